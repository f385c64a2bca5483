"""Replay decisions: recorded step x this call -> replay, execute, or refuse. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from resumable.errors import NonDeterminismError
from resumable.stores.protocol import StepRecord


@dataclass(slots=True)  # not frozen: made for every replayed step, and never kept
class Replay:
    """Return (or raise) the recorded outcome without running the step."""

    record: StepRecord


@dataclass(frozen=True, slots=True)
class Execute:
    """Run the step from `first_attempt`; the retry budget counts attempts after `base`."""

    first_attempt: int
    base: int


def decide(
    recorded: StepRecord | None,
    *,
    run_id: str,
    seq: int,
    name: str,
    fingerprint: str,
    attempts: int,
    retry_failed: bool,
) -> Replay | Execute:
    """What to do with the call at `seq`, given what the journal holds there.

    A recorded failure replays while the run is in progress, so a workflow that
    caught it takes the same path after a crash. When a failed run is run again
    (`retry_failed`), its failed steps get a fresh budget of `attempts`.

    Raises:
        NonDeterminismError: the journal holds a different step or arguments at seq.
    """
    if recorded is None:
        return Execute(first_attempt=1, base=0)
    if recorded.name != name:
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
        return Replay(recorded)
    if recorded.status == "failed":
        if not retry_failed:
            return Replay(recorded)
        return Execute(first_attempt=recorded.attempts + 1, base=recorded.attempts)
    # "retrying": the process died between attempts; the count goes on from the journal
    return Execute(
        first_attempt=recorded.attempts + 1,
        base=max(0, recorded.attempts + 1 - attempts),
    )
