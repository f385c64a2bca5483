"""Checks on what a store reads back, before it becomes a record the engine trusts.

A store's rows are data anyone with write access can change. A value of the wrong
type or out of range is reported as damage (StoreError or CorruptCheckpointError,
naming where), never left to fail later as a TypeError deep in the engine.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from typing import Any, TypeVar, cast

from resumable.errors import CorruptCheckpointError, StoreError
from resumable.stores.protocol import RUN_STATUSES, RunRecord, StepRecord, ThreadRecord


def schema_version_of(value: object, *, store: str) -> int:
    """The schema version a store's meta row holds (0 when there is none).

    Raises:
        StoreError: The stored version is not a non-negative whole number.
    """
    if value is None:
        return 0
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    text = str(value).strip()
    if not text.isdigit() or len(text) > 9:
        raise StoreError(
            store=store,
            detail=f"its schema_version is {text[:40]!r}, not a version number: "
            f"the store's meta data was altered; restore it from a backup, or set "
            f"it to the version this store was created with",
        )
    return int(text)


# a time in ms that datetime can show (years 1970-9999)
_MAX_MS = 253_402_300_800_000
_STEP_STATUSES = frozenset({"ok", "failed", "retrying", "waiting"})


_MAX_INT = 2**63 - 1  # what every store's integer columns hold


def _is_int(value: object, *, low: int = 0, high: int = _MAX_INT) -> bool:
    return type(value) is int and low <= value <= high


def _is_ms(value: object) -> bool:
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
        ("created_at_ms", _is_ms(run.created_at_ms)),
        ("updated_at_ms", _is_ms(run.updated_at_ms)),
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


def step_problem(step: StepRecord) -> str | None:
    """What is wrong with a journal entry read back from a store, or None."""
    # every replayed step passes here: the checks of _is_int and _is_ms, written out
    attempts, started, finished = step.attempts, step.started_at_ms, step.finished_at_ms
    if (
        type(step.seq) is int
        and type(step.name) is str
        and type(step.fingerprint) is str
        and step.status in _STEP_STATUSES
        and type(attempts) is int
        and 0 <= attempts <= _MAX_INT
        and type(started) is int
        and 0 <= started < _MAX_MS
        and type(finished) is int
        and 0 <= finished < _MAX_MS
    ):
        return None
    fields = ("seq", "name", "fingerprint", "status", "attempts", "started_at_ms")
    return ", ".join(f"{name}={getattr(step, name)!r:.40}" for name in fields)


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
    for step in steps:
        problem = step_problem(step)
        if problem is not None:
            raise CorruptCheckpointError(
                place=f"run {run_id!r} step #{step.seq!r:.20}",
                detail=f"its stored row is damaged ({problem})",
            )
    return steps


def checked_thread(
    thread_id: object, updated_at_ms: object, unescape: Callable[[str], str] = str
) -> ThreadRecord:
    """A listed thread, if its stored id and newest time are what this library writes.

    `unescape` turns the stored id back into the thread's (`_sql.from_text`).

    Raises:
        CorruptCheckpointError: They are not (a snapshot row or index was altered).
    """
    if type(thread_id) is str and _is_ms(updated_at_ms):
        return ThreadRecord(
            thread_id=unescape(thread_id), updated_at_ms=cast("int", updated_at_ms)
        )
    raise CorruptCheckpointError(
        place=f"thread {thread_id!r:.80}",
        detail=f"its stored snapshots are damaged (thread id of type "
        f"{type(thread_id).__name__}, newest created_at_ms {updated_at_ms!r:.40}); "
        f"restore its snapshot rows from a backup or delete them, and the threads "
        f"list again",
    )


F = TypeVar("F", bound=Callable[..., Any])


def converter(what: str, where: Callable[..., str] | None = None) -> Callable[[F], F]:
    """Report a stored row or packed record that does not convert as damage.

    For the functions that turn what a driver returned into a record: a value of
    the wrong type or shape raises CorruptCheckpointError, not a TypeError.
    `where(*args)` names the place from the converter's arguments (a row's ids).
    """

    def decorate(convert: F) -> F:
        @functools.wraps(convert)
        def checked(*args: Any) -> Any:
            try:
                return convert(*args)
            except (
                TypeError,
                ValueError,
                AttributeError,
                KeyError,
                IndexError,
                struct.error,
                RecursionError,  # JSON nested past the interpreter's limit
            ) as exc:
                raise CorruptCheckpointError(
                    place=_place(what, where, args),
                    detail=f"it does not read as a {what} ({type(exc).__name__}: "
                    f"{str(exc)[:120]})",
                ) from exc

        return cast("F", checked)

    return decorate


def _place(what: str, where: Callable[..., str] | None, args: tuple[Any, ...]) -> str:
    if where is not None:
        try:
            return where(*args)
        except Exception:  # noqa: BLE001, S110 - the ids themselves may be the damage
            pass
    return f"a stored {what}"
