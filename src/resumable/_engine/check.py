"""Pre-deploy check: replay stored runs against the code loaded now, executing nothing.

Each selected run's workflow body runs from the top, as a resume would, under a
`RunContext` whose `check` is a `CheckProbe`. Every journaled call (step, child
run, map_steps item, wait_for, sleep, patched) asks the probe, which answers it
from the journal or stops the check with a private BaseException (which a
workflow's `except Exception:` cannot swallow):

- the journal holds this very call: its recorded outcome replays;
- the journal holds another call at that seq: a `Divergence` is noted and the
  check stops (the run would stop with NonDeterminismError on the new code);
- nothing (or an unfinished attempt) is recorded there: a frontier is noted,
  "the new code would execute X here", and the check stops; that is fine, a
  resume carries on from there. Under gather() every sibling call is still
  answered before the body unwinds, so a divergence after a frontier is seen.

The verdict comes from what the probe noted, not from which signal unwound the
body: the first divergence by seq, else what the workflow raised, else the
earliest frontier.

No step, child run, wait, sleep or store write happens: the probe stops before
any of them, and the check reads the store only (runs, journals).
"""

from __future__ import annotations

import asyncio
import contextlib
import reprlib
from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, Literal, NoReturn

from resumable._engine import replay
from resumable._engine.context import RunContext, Runtime, _run
from resumable._engine.decorators import WORKFLOWS
from resumable._engine.runs import load_journal, run_place
from resumable.errors import NonDeterminismError, ResumableError, RunNotFound
from resumable.stores.journal import is_step
from resumable.stores.protocol import RunQuery, RunRecord, RunStatus, StepRecord

if TYPE_CHECKING:
    from resumable._engine.decorators import WorkflowSpec

Verdict = Literal["compatible", "diverges", "raises", "no-workflow", "timeout"]
BREAKING: Final[frozenset[str]] = frozenset(
    {"diverges", "raises", "no-workflow", "timeout"}
)
DEFAULT_STATUSES: Final[tuple[RunStatus, ...]] = (
    "queued",
    "running",
    "waiting",
    "sleeping",
    "failed",
)
"""Runs that may execute again: the ones a deploy can break."""
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


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCheck:
    """One run's verdict."""

    run_id: str
    workflow: str
    status: RunStatus
    verdict: Verdict
    replayed: int
    """Recorded calls the new code matched and replayed."""
    new_after_seq: int | None = None
    """The new code would execute new steps after this seq (fine: a resume
    carries on from there); None if it finishes from the journal alone."""
    frontier: str | None = None
    """What the new code would do after `new_after_seq`."""
    divergence: Divergence | None = None
    error: str | None = None
    """`Type: message` of what the workflow raised (verdict "raises")."""
    patches_needed: tuple[str, ...] = ()
    """Patches whose old branch this run took (it passed them on old code)."""
    version: str | None = None
    """The workflow version the run started on (`@workflow(version=)`)."""
    unused: tuple[int, ...] = ()
    """Recorded seqs the new code never called (it returned before them)."""

    @property
    def is_breaking(self) -> bool:
        """Whether this run would fail on the new code."""
        return self.verdict in BREAKING

    def describe(self) -> str:
        """One human line saying where and why."""
        if self.verdict == "diverges" and self.divergence is not None:
            d = self.divergence
            return (
                f"step #{d.seq}: recorded {d.recorded!r} (args {d.recorded_fingerprint[:12]}), "
                f"new code calls {d.called!r} (args {d.called_fingerprint[:12]}) "
                f"with {d.called_args}: {d.reason}; {d.hint}"
            )
        if self.verdict == "raises":
            return f"the workflow raises {self.error}"
        if self.verdict == "no-workflow":
            return f"the new code defines no workflow {self.workflow!r}"
        if self.verdict == "timeout":
            return "the workflow body did not finish or stop in time"
        if self.new_after_seq is None:
            unused = (
                f"; the recorded calls at seq {', '.join(map(str, self.unused))} "
                f"are no longer made"
                if self.unused
                else ""
            )
            return f"replays {self.replayed} recorded calls to the end{unused}"
        return (
            f"replays {self.replayed} recorded calls; would execute new steps after "
            f"seq {self.new_after_seq} ({self.frontier})"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckReport:
    """The verdict on every run checked; `ok` when none would break."""

    runs: tuple[RunCheck, ...]

    @property
    def ok(self) -> bool:
        """Whether every run checked can continue on the new code."""
        return not any(run.is_breaking for run in self.runs)

    @property
    def breaking(self) -> tuple[RunCheck, ...]:
        """The runs the new code would break."""
        return tuple(run for run in self.runs if run.is_breaking)

    def summary(self) -> dict[tuple[str, str], int]:
        """How many runs per (workflow, verdict)."""
        counts: dict[tuple[str, str], int] = {}
        for run in self.runs:
            key = (run.workflow, run.verdict)
            counts[key] = counts.get(key, 0) + 1
        return dict(sorted(counts.items()))

    def patches_needed(self) -> dict[str, tuple[str, ...]]:
        """Each patch whose old branch some run still needs, with those runs."""
        needed: dict[str, list[str]] = {}
        for run in self.runs:
            for name in run.patches_needed:
                needed.setdefault(name, []).append(run.run_id)
        return {name: tuple(ids) for name, ids in sorted(needed.items())}


# --- the probe ---------------------------------------------------------------------
class _Stop(BaseException):
    """Stops a check's workflow body; a BaseException so `except Exception` cannot."""


class CheckProbe:
    """Answers one run's journaled calls from its journal, and notes what it saw."""

    def __init__(self, journal: dict[int, StepRecord]) -> None:
        self.journal = journal
        self.divergences: list[Divergence] = []
        self.frontiers: list[tuple[int, str]] = []
        self.patches_needed: list[str] = []

    def new_call(self, seq: int, name: str) -> NoReturn:
        """Stop: nothing is recorded at `seq`, so the new code would execute it."""
        self.stop_at(seq, f"new code would execute {name!r}")

    def decide(
        self,
        ctx: RunContext,
        recorded: StepRecord,
        *,
        seq: int,
        name: str,
        fingerprint: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> StepRecord:
        """The record a call that is not a recorded success replays; else stop.

        A recorded failure replays (as StepFailed) where a resume would replay it;
        an unfinished or failed step a resume would execute again stops the check.
        """
        try:
            decision = replay.decide(
                recorded,
                run_id=ctx.run_id,
                seq=seq,
                name=name,
                fingerprint=fingerprint,
                attempts=1,
                retry_failed=ctx.retry_failed,
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

    def wait_point(self, ctx: RunContext, seq: int, name: str) -> None:
        """Let a wait_for/sleep replay if the journal finished it; else stop."""
        recorded = ctx.journal.get(seq)
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
        raise _Stop

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
        raise _Stop


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


# --- the driver --------------------------------------------------------------------
async def check_runs(
    runtime: Runtime,
    *,
    status: Collection[RunStatus] = DEFAULT_STATUSES,
    workflow: str | None = None,
    version: str | None = None,
    run_ids: Collection[str] | None = None,
    limit: int | None = None,
    updated_since_ms: int | None = None,
    timeout_s: float = 10.0,
    concurrency: int = 16,
) -> CheckReport:
    """Check the selected runs against the workflows registered in this process."""
    store = runtime.store
    if run_ids is not None:
        runs = []
        for run_id in run_ids:
            found = await store.get_run(run_id)
            if found is None:
                raise RunNotFound(run_id=run_id)
            runs.append(found)
    else:
        runs = await store.list_runs(
            RunQuery(
                status=tuple(status),
                workflow=workflow,
                version=version,
                limit=limit or 2**31,
            )
        )
    if updated_since_ms is not None:
        runs = [run for run in runs if run.updated_at_ms >= updated_since_ms]
    if limit is not None:
        runs = runs[:limit]
    slots = asyncio.Semaphore(max(1, concurrency))

    async def one(run: RunRecord) -> RunCheck:
        async with slots:
            return await check_run(runtime, run, timeout_s=timeout_s)

    return CheckReport(runs=tuple(await asyncio.gather(*(one(r) for r in runs))))


async def check_run(
    runtime: Runtime, run: RunRecord, *, timeout_s: float = 10.0
) -> RunCheck:
    """Replay one run against the registered code; executes nothing."""
    base = RunCheck(
        run_id=run.run_id,
        workflow=run.workflow,
        status=run.status,
        version=run.version,
        verdict="compatible",
        replayed=0,
    )
    spec = WORKFLOWS.get(run.workflow)
    if spec is None:
        return replace(base, verdict="no-workflow")
    spec.register_types()
    try:
        journal = await load_journal(runtime.store, run)
    except ResumableError as exc:  # e.g. forked from a run since deleted
        return replace(base, verdict="raises", error=_described(exc))
    probe = CheckProbe(journal)
    ctx = RunContext(
        # a check executes nothing: observers (metrics, traces) do not see it
        runtime=replace(runtime, observer=None),
        run_id=run.run_id,
        workflow=spec.name,
        fence=0,
        journal=journal,
        # a failed run is checked as `resume` would run it: failed steps again
        retry_failed=run.status == "failed",
        loop=asyncio.get_running_loop(),
        check=probe,
    )
    error: str | None = None
    finished = timed_out = False
    try:
        args, kwargs = runtime.serde.loads(
            run.input, place=run_place(run.run_id, "input")
        )
        await asyncio.wait_for(_body(ctx, spec, args, kwargs), timeout_s)
        finished = True
    except _Stop:
        pass
    except TimeoutError:
        timed_out = True
    except Exception as exc:  # noqa: BLE001 - what the workflow raises is the verdict
        error = _described(exc)
    seen = replace(
        base,
        replayed=ctx.replayed,
        patches_needed=tuple(dict.fromkeys(probe.patches_needed)),
    )
    return _verdict(
        seen,
        probe,
        error=error,
        finished=finished,
        timed_out=timed_out,
        next_seq=ctx.next_seq,
    )


def _described(error: BaseException) -> str:
    return f"{type(error).__qualname__}: {error}"


async def _body(
    ctx: RunContext, spec: WorkflowSpec, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    token = _run.set(ctx)
    try:
        if spec.is_async:
            return await spec.fn(*args, **kwargs)
        return await asyncio.to_thread(spec.fn, *args, **kwargs)
    finally:
        _run.reset(token)
        for task in list(ctx.inflight):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def _verdict(
    base: RunCheck,
    probe: CheckProbe,
    *,
    error: str | None,
    finished: bool,
    timed_out: bool,
    next_seq: int,
) -> RunCheck:
    """The run's verdict from what the probe saw (the first divergence by seq wins)."""
    if probe.divergences:
        first = min(probe.divergences, key=lambda d: d.seq)
        return replace(base, verdict="diverges", divergence=first)
    if error is not None:
        return replace(base, verdict="raises", error=error)
    if timed_out:
        return replace(base, verdict="timeout")
    if probe.frontiers:
        seq, what = min(probe.frontiers)
        return replace(base, new_after_seq=seq - 1, frontier=what)
    if finished:
        # recorded calls after the last one the new code made: it returned first
        unused = sorted(s for s in probe.journal if is_step(s) and s >= next_seq)
        return replace(base, unused=tuple(unused))
    return base
