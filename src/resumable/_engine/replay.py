"""Replay decisions: recorded step x this call -> replay, execute, or refuse. Pure."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

from resumable.errors import NonDeterminismError
from resumable.stores.protocol import StepRecord


@dataclass(frozen=True, slots=True)
class Execute:
    """Run the step from `first_attempt`; the retry budget counts attempts after `base`."""

    first_attempt: int
    base: int


FIRST_RUN: Final = Execute(first_attempt=1, base=0)
"""A step with nothing recorded at its seq yet (most executions)."""


def same_success(recorded: StepRecord, name: str, fingerprint: str) -> bool:
    """Whether `recorded` is a success of this very call: it replays (most do)."""
    return (
        recorded.status == "ok"
        and recorded.name == name
        and recorded.fingerprint == fingerprint
    )


def decide(
    recorded: StepRecord | None,
    *,
    run_id: str,
    seq: int,
    name: str,
    fingerprint: str,
    attempts: int,
    retry_failed: bool,
    aliases: Collection[str] = (),
) -> StepRecord | Execute:
    """What to do with the call at `seq`: replay the record returned, or execute.

    A recorded failure replays while the run is in progress, so a workflow that
    caught it takes the same path after a crash. When a failed run is run again
    (`retry_failed`), its failed steps get a fresh budget of `attempts`.

    `aliases` are other names this same call may have recorded: a child
    workflow's older names (`child:__main__:research`, recorded when its script
    ran as `__main__`). A record under one of them is this call; any other name
    is a different step.

    Raises:
        NonDeterminismError: the journal holds a different step or arguments at seq.
    """
    if recorded is None:
        return FIRST_RUN
    if recorded.name != name and recorded.name not in aliases:
        raise NonDeterminismError(
            run_id=run_id,
            seq=seq,
            recorded=recorded.name,
            called=name,
            reason="another step",
        )
    if recorded.fingerprint != fingerprint:
        raise NonDeterminismError(
            run_id=run_id,
            seq=seq,
            recorded=f"{recorded.name}(args {recorded.fingerprint})",
            called=f"{name}(args {fingerprint})",
            reason="same step, different arguments",
        )
    if recorded.status == "ok":
        return recorded
    if recorded.status == "failed":
        if not retry_failed:
            return recorded
        return Execute(first_attempt=recorded.attempts + 1, base=recorded.attempts)
    # "retrying": the process died between attempts; the count goes on from the journal
    return Execute(
        first_attempt=recorded.attempts + 1,
        base=max(0, recorded.attempts + 1 - attempts),
    )
