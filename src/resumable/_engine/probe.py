"""The probe `Engine.check` puts in a run's context: answers calls from the journal.

Every journaled call of a checked run (step, child run, map_steps item, wait_for,
sleep, patched) asks the probe, which lets it replay what the journal recorded,
or notes a `Divergence` or a frontier and stops the check with `CheckStopped`, a
BaseException a workflow's `except Exception:` cannot swallow. See `check`.
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NoReturn

from resumable._engine import replay
from resumable.errors import NonDeterminismError
from resumable.stores.protocol import StepRecord

_ARG_WIDTH = 160


@dataclass(frozen=True, slots=True, kw_only=True)
class Divergence:
    """Where the new code calls something other than the journal holds."""

    seq: int
    recorded: str
    """The recorded step name."""
    recorded_fingerprint: str
    called: str
    """The name of what the new code calls at `seq`."""
    called_fingerprint: str
    called_args: str
    """The new call's arguments, readable. The journal keeps only a fingerprint of
    the recorded call's arguments, so they cannot be shown beside them."""
    reason: str
    hint: str
    """What the journal suggests happened (a step inserted, removed, renamed...)."""


class CheckStopped(BaseException):
    """Stops a check's workflow body; a BaseException so `except Exception` cannot."""


class CheckProbe:
    """Answers one run's journaled calls from its journal, and notes what it saw."""

    def __init__(
        self, journal: dict[int, StepRecord], *, run_id: str, retry_failed: bool
    ) -> None:
        self.journal = journal
        self.run_id, self.retry_failed = run_id, retry_failed
        self.divergences: list[Divergence] = []
        self.frontiers: list[tuple[int, str]] = []
        self.patches_needed: list[str] = []

    def new_call(self, seq: int, name: str) -> NoReturn:
        """Stop: nothing is recorded at `seq`, so the new code would execute it."""
        self.stop_at(seq, f"new code would execute {name!r}")

    def decide(
        self,
        recorded: StepRecord,
        *,
        seq: int,
        name: str,
        fingerprint: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        aliases: tuple[str, ...] = (),
    ) -> StepRecord:
        """The record a call that is not a recorded success replays; else stop.

        A recorded failure replays (as StepFailed) where a resume would replay it;
        an unfinished or failed step a resume would execute again stops the check.
        """
        try:
            decision = replay.decide(
                recorded,
                run_id=self.run_id,
                seq=seq,
                name=name,
                fingerprint=fingerprint,
                attempts=1,
                retry_failed=self.retry_failed,
                aliases=aliases,
            )
        except NonDeterminismError as exc:
            self.diverge(
                recorded,
                seq=seq,
                name=name,
                fingerprint=fingerprint,
                args=args,
                kwargs=kwargs,
                reason=exc.reason,
            )
        if isinstance(decision, replay.Execute):
            self.stop_at(seq, f"new code would execute {name!r} again (unfinished)")
        return decision

    def wait_point(self, seq: int, name: str) -> None:
        """Let a wait_for/sleep replay if the journal finished it; else stop."""
        recorded = self.journal.get(seq)
        if recorded is None:
            self.stop_at(seq, f"new code would reach {name!r}")
        if recorded.name != name:
            self.diverge(
                recorded,
                seq=seq,
                name=name,
                fingerprint="-",
                args=(),
                kwargs={},
                reason="another step",
            )
        if recorded.status == "waiting":  # new code carries on after this wait
            self.stop_at(seq + 1, f"the run is suspended in {name!r} at seq {seq}")

    def patch_point(self, seq: int, name: str, *, passed: bool) -> None:
        """Note a patch decision; the marker a new run records stops the check."""
        if passed:
            self.patches_needed.append(name)
            return
        self.stop_at(seq, f"new code would record patch marker {name!r}")

    def stop_at(self, seq: int, what: str) -> NoReturn:
        """Stop: the new code would carry on executing at `seq`."""
        self.frontiers.append((seq, what))
        raise CheckStopped

    def diverge(
        self,
        recorded: StepRecord,
        *,
        seq: int,
        name: str,
        fingerprint: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        reason: str,
    ) -> NoReturn:
        """Stop: the new code calls something else at a recorded seq."""
        self.divergences.append(
            Divergence(
                seq=seq,
                recorded=recorded.name,
                recorded_fingerprint=recorded.fingerprint,
                called=name,
                called_fingerprint=fingerprint,
                called_args=readable_call(args, kwargs),
                reason=reason,
                hint=_hint(self.journal, recorded, seq, name, fingerprint),
            )
        )
        raise CheckStopped


def readable_call(args: Iterable[Any], kwargs: dict[str, Any]) -> str:
    """`(arg, ..., key=value)` with each value's repr clipped."""
    shown = reprlib.Repr()
    shown.maxstring = shown.maxother = _ARG_WIDTH
    shown.maxlist = shown.maxtuple = shown.maxdict = 8
    parts = [shown.repr(a) for a in args]
    parts += [f"{k}={shown.repr(v)}" for k, v in kwargs.items()]
    return "(" + ", ".join(parts) + ")"


def _hint(
    journal: dict[int, StepRecord],
    recorded: StepRecord,
    seq: int,
    name: str,
    fingerprint: str,
) -> str:
    """What the journal suggests the change was."""
    same = sorted(
        s
        for s, r in journal.items()
        if 0 < s != seq and r.name == name and r.fingerprint == fingerprint
    )
    if same:
        where = same[0]
        change = (
            "a call before it was removed or moved later"
            if where > seq
            else "a call was inserted before it"
        )
        return f"this exact call is recorded at seq {where}: {change}"
    if recorded.name == name:
        return (
            "the arguments changed; the journal keeps only a fingerprint of the "
            "recorded arguments, so only the new ones can be shown"
        )
    if recorded.fingerprint == fingerprint and fingerprint != "-":
        return (
            f"same arguments as recorded: was {recorded.name!r} renamed to {name!r}? "
            f"(@step(name={recorded.name!r}) keeps the recorded name)"
        )
    if not any(r.name == name for r in journal.values()):
        return f"{name!r} is new to this run: a call was inserted here"
    return f"{recorded.name!r} is no longer called here"
