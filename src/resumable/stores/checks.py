"""Checks on the records a store reads back, before the engine trusts them.

A store's rows are data anyone with write access can change, and a store may be
a third party's. A value of the wrong type or out of range is reported as damage
(CorruptCheckpointError, naming where), never left to fail later as a TypeError
deep in the engine. The engine checks what any store gives it; a store may check
too (the memory store does, for what it lists).
"""

from __future__ import annotations

from collections.abc import Callable

from resumable.errors import CorruptCheckpointError
from resumable.stores.protocol import RUN_STATUSES, RunRecord, StepRecord

__all__ = [
    "checked_run",
    "checked_steps",
    "is_stored_ms",
    "run_problem",
]

# a time in ms that datetime can show (years 1970-9999)
_MAX_MS = 253_402_300_800_000
_STEP_STATUSES = frozenset({"ok", "failed", "retrying", "waiting"})


_MAX_INT = 2**63 - 1  # what every store's integer columns hold


def _is_int(value: object, *, low: int = 0, high: int = _MAX_INT) -> bool:
    return type(value) is int and low <= value <= high


def is_stored_ms(value: object) -> bool:
    """Whether `value` is a time in ms as this library stores them (years 1970-9999)."""
    return type(value) is int and 0 <= value < _MAX_MS


def _optional(check: Callable[[object], bool], value: object) -> bool:
    return value is None or check(value)


def _is_text(value: object) -> bool:
    return type(value) is str


def run_problem(run: RunRecord) -> str | None:
    """What is wrong with a run read back from a store, or None if nothing."""
    checks: tuple[tuple[str, bool], ...] = (
        ("run_id", _is_text(run.run_id)),
        ("workflow", _is_text(run.workflow)),
        ("status", run.status in RUN_STATUSES),
        ("created_at_ms", is_stored_ms(run.created_at_ms)),
        ("updated_at_ms", is_stored_ms(run.updated_at_ms)),
        ("parent_id", _optional(_is_text, run.parent_id)),
        ("forked_from", _optional(_is_text, run.forked_from)),
        ("fork_seq", _optional(_is_int, run.fork_seq)),
        ("queue", _optional(_is_text, run.queue)),
        ("lease_owner", _optional(_is_text, run.lease_owner)),
        ("lease_expires_at_ms", _is_int(run.lease_expires_at_ms)),
        ("fence", _is_int(run.fence)),
        ("wake_at_ms", _optional(_is_int, run.wake_at_ms)),
        ("expires_at_ms", _optional(_is_int, run.expires_at_ms)),
        ("version", _optional(_is_text, run.version)),
    )
    bad = [name for name, ok in checks if not ok]
    if not bad:
        return None
    return ", ".join(f"{name}={getattr(run, name)!r:.40}" for name in bad)


def checked_run(run: RunRecord) -> RunRecord:
    """The run, if its stored fields have the types and ranges this library writes.

    Raises:
        CorruptCheckpointError: They do not (the row was altered).
    """
    problem = run_problem(run)
    if problem is not None:
        raise CorruptCheckpointError(
            place=f"run {run.run_id!r}", detail=f"its stored row is damaged ({problem})"
        )
    return run


def checked_steps(run_id: str, steps: list[StepRecord]) -> list[StepRecord]:
    """The journal entries, if each has the types and ranges this library writes.

    Raises:
        CorruptCheckpointError: One does not (its row was altered).
    """
    # a resume checks thousands of rows: the tests of _is_int and is_stored_ms are
    # written out here, in one loop, with the constants as locals
    statuses, max_int, max_ms = _STEP_STATUSES, _MAX_INT, _MAX_MS
    for step in steps:
        attempts, started, finished = (
            step.attempts,
            step.started_at_ms,
            step.finished_at_ms,
        )
        if (
            type(step.seq) is int
            and type(step.name) is str
            and type(step.fingerprint) is str
            and step.status in statuses
            and type(attempts) is int
            and 0 <= attempts <= max_int
            and type(started) is int
            and 0 <= started < max_ms
            and type(finished) is int
            and 0 <= finished < max_ms
        ):
            continue
        fields = ("seq", "name", "fingerprint", "status", "attempts", "started_at_ms")
        problem = ", ".join(f"{name}={getattr(step, name)!r:.40}" for name in fields)
        raise CorruptCheckpointError(
            place=f"run {run_id!r} step #{step.seq!r:.20}",
            detail=f"its stored row is damaged ({problem})",
        )
    return steps
