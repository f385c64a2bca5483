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
from collections.abc import Collection
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final, Literal

from resumable._engine.context import RunContext, Runtime, _run
from resumable._engine.journal import load_journal
from resumable._engine.probe import CheckProbe, CheckStopped, Divergence
from resumable._engine.specs import WORKFLOWS
from resumable.errors import ResumableError, RunNotFound
from resumable.stores.kinds import is_step
from resumable.stores.places import run_place
from resumable.stores.protocol import (
    RunListing,
    RunQuery,
    RunRecord,
    RunStatus,
    StepRecord,
)

if TYPE_CHECKING:
    from resumable._engine.specs import WorkflowSpec

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


# --- the driver --------------------------------------------------------------------
async def check_runs(
    runtime: Runtime,
    listing: RunListing | None,
    *,
    status: RunStatus | Collection[RunStatus] | None = None,
    workflow: str | None = None,
    version: str | None = None,
    run_ids: Collection[str] | None = None,
    limit: int | None = None,
    since: timedelta | None = None,
    timeout_s: float = 10.0,
    concurrency: int = 16,
) -> CheckReport:
    """Check the selected runs against the workflows registered in this process.

    `status` None: the statuses that may execute again (`DEFAULT_STATUSES`);
    `since`: only runs updated within this long. `listing`: the store's listing,
    needed unless `run_ids` are given.
    """
    store = runtime.store
    statuses: tuple[RunStatus, ...] = (
        (status,) if isinstance(status, str) else tuple(status or DEFAULT_STATUSES)
    )
    updated_since_ms = (
        None
        if since is None
        else runtime.clock.now_ms() - int(since.total_seconds() * 1000)
    )
    if run_ids is not None:
        runs = []
        for run_id in run_ids:
            found = await store.get_run(run_id)
            if found is None:
                raise RunNotFound(run_id=run_id)
            runs.append(found)
    else:
        assert listing is not None  # noqa: S101 - Engine.check asked for it
        runs = await listing.list_runs(
            RunQuery(
                status=statuses,
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
        journal = await load_journal(runtime.store, run, serde=runtime.serde)
    except ResumableError as exc:  # e.g. forked from a run since deleted
        return replace(base, verdict="raises", error=_described(exc))
    ctx, probe = _checking(runtime, run, spec, journal)
    error: str | None = None
    finished = timed_out = False
    try:
        args, kwargs = runtime.serde.loads(
            run.input, place=run_place(run.run_id, "input")
        )
        await asyncio.wait_for(_body(ctx, spec, args, kwargs), timeout_s)
        finished = True
    except CheckStopped:
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


def _checking(
    runtime: Runtime,
    run: RunRecord,
    spec: WorkflowSpec,
    journal: dict[int, StepRecord],
) -> tuple[RunContext, CheckProbe]:
    """The context a check runs the body in, and its probe."""
    # a failed run is checked as `resume` would run it: failed steps again
    retry_failed = run.status == "failed"
    probe = CheckProbe(journal, run_id=run.run_id, retry_failed=retry_failed)
    ctx = RunContext(
        # a check executes nothing: observers (metrics, traces) do not see it
        runtime=replace(runtime, observer=None),
        run_id=run.run_id,
        workflow=spec.name,
        fence=0,
        journal=journal,
        retry_failed=retry_failed,
        loop=asyncio.get_running_loop(),
        check=probe,
    )
    return ctx, probe


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
