"""Executing one run under a lease: load its journal, call the workflow, record the end."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from resumable._engine import outcome, step_cache
from resumable._engine.awaits import unawaited_result
from resumable._engine.commits import durably, put_sealed, recorded_first
from resumable._engine.context import Budget, RunContext, Runtime, _run
from resumable._engine.journal import load_journal
from resumable._engine.lease import Tenure
from resumable._engine.ledger import Spend, spend_of, usage_entries
from resumable._engine.observe import outcome_of
from resumable._engine.specs import WorkflowSpec
from resumable._engine.steps import start_noting_replays
from resumable._engine.waits import Suspend
from resumable.errors import (
    BudgetExceeded,
    CorruptCheckpointError,
    LeaseLost,
    NonDeterminismError,
    ResumableError,
    SerializationError,
    StepFailed,
)
from resumable.serde.chunked import SealedStream
from resumable.stores.kinds import JournalKind
from resumable.stores.places import run_place, step_place
from resumable.stores.protocol import (
    Lease,
    RunRecord,
    RunStatus,
    RunUpdate,
)
from resumable.usage import Usage

# failures that running the same run again can cure: a step's cause fixed, the old
# code restored, a budget raised, a corrupt row repaired. Anything else the workflow
# raised itself is replayed as WorkflowFailed (use Engine.resume to force a re-run).
RETRYABLE = (StepFailed, NonDeterminismError, BudgetExceeded, CorruptCheckpointError)
log = logging.getLogger("resumable.runs")


def _spent_so_far(ctx: RunContext) -> Spend:
    """What this run's own recorded calls cost.

    A fork's inherited steps were its parent's spend, not this run's.
    """
    calls: list[Usage] = []
    for record in ctx.journal.values():
        if (
            record.run_id == ctx.run_id
            and record.kind is not JournalKind.LEDGER
            and record.usage is not None
        ):
            place = step_place(record.run_id, record.seq, record.name) + " usage"
            raw = ctx.runtime.serde.loads(record.usage, place=place)
            calls.extend(usage for _, usage in usage_entries(raw, place=place))
    return spend_of(calls, ctx.runtime.prices)


def is_retryable(info: dict[str, Any]) -> bool:
    """Whether a recorded run failure is retried by running the run again."""
    return bool(info.get("retryable"))


async def execute_run(
    runtime: Runtime,
    spec: WorkflowSpec,
    run: RunRecord,
    lease: Lease,
    *,
    retry_failed: bool,
) -> Any:
    """Execute `run` from the top under `lease`, replaying its journal, to its end.

    Returns the workflow's result once it is recorded. Raises WorkflowFailed once a
    failure is recorded; LeaseLost or CheckpointWriteError when the run could not be
    recorded (it is then left for a later execution to resume).
    """
    started_s = time.perf_counter()
    ctx = RunContext(
        runtime=runtime,
        run_id=run.run_id,
        workflow=spec.name,
        fence=lease.fence,
        journal=await load_journal(runtime.store, run, serde=runtime.serde),
        retry_failed=retry_failed,
        loop=asyncio.get_running_loop(),
        tenure=Tenure.of(
            ttl_s=runtime.lease_ttl_s,
            expires_at_ms=lease.expires_at_ms,
            now_ms=runtime.clock.now_ms(),
        ),
    )
    observer = runtime.observer
    if observer is None:
        return await _execute(ctx, spec, run, lease)
    ctx.observed["started_s"] = started_s
    await observer.execution_started(ctx, run)
    error: BaseException | None = None
    try:
        return await _execute(ctx, spec, run, lease)
    except BaseException as exc:
        error = exc
        raise
    finally:
        if ctx.is_replaying:
            ctx.is_replaying = False
            observer.replay_finished(ctx)
        outcome_ = ctx.ended_as or outcome_of(error, "succeeded")
        observer.execution_ended(ctx, outcome_, error)


async def _execute(
    ctx: RunContext, spec: WorkflowSpec, run: RunRecord, lease: Lease
) -> Any:
    runtime = ctx.runtime
    log.debug(
        "run %r: execution %d starts (%d steps recorded)",
        run.run_id,
        lease.fence,
        len(ctx.journal),
        extra={"run_id": run.run_id, "workflow": spec.name, "fence": lease.fence},
    )
    if spec.budget_usd is not None or spec.budget_tokens is not None:
        ctx.budget = Budget(usd=spec.budget_usd, tokens=spec.budget_tokens)
        ctx.spent = _spent_so_far(ctx)
    args, kwargs = runtime.serde.loads(run.input, place=run_place(run.run_id, "input"))
    main = asyncio.current_task()
    try:
        result = await _call_workflow(ctx, spec, args, kwargs, lease)
    except asyncio.CancelledError:
        if ctx.failure is not None and main is not None and main.uncancel() == 0:
            raise ctx.failure from None  # the heartbeat found the lease gone
        raise
    except Suspend:
        if ctx.failure is not None:
            raise ctx.failure from None
        suspended = _suspension(ctx.suspensions)
        await _finish(ctx, suspended.status, None, wake_at_ms=suspended.wake_at_ms)
        await _wake_if_sent_meanwhile(ctx)
        raise suspended from None
    except Exception as exc:
        if ctx.failure is not None:
            raise ctx.failure from exc
        info = await _record_failure(ctx, exc)
        if isinstance(exc, ResumableError) and not isinstance(exc, StepFailed):
            raise  # the engine's own verdict (non-determinism, corrupt data...) as itself
        raise outcome.workflow_failed(run.run_id, info) from exc
    if ctx.failure is not None:
        raise ctx.failure
    try:
        output = runtime.dumps_result(result, place=run_place(run.run_id, "output"))
    except SerializationError as exc:
        # a coroutine or future never awaited (the codec refuses them) says so
        unawaited = unawaited_result(result, run_id=run.run_id, step=None)
        error = unawaited or SerializationError(
            run_id=run.run_id,
            path=exc.path.replace("value", "result", 1),
            detail=exc.detail,
        )
        await _record_failure(ctx, error)
        raise error from None
    if isinstance(output, SealedStream):  # a large result, uploaded as it is sealed
        output = await put_sealed(ctx, output, seq=None)
    await _finish(ctx, "succeeded", output)
    return result


async def _call_workflow(
    ctx: RunContext,
    spec: WorkflowSpec,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    lease: Lease,
) -> Any:
    """Run the workflow body under the lease's heartbeat; tidy up however it ends."""
    heartbeat = asyncio.create_task(_heartbeat(ctx, lease, asyncio.current_task()))
    token = _run.set(ctx)
    try:
        if spec.is_async:
            return await spec.fn(*args, **kwargs)
        return await asyncio.to_thread(spec.fn, *args, **kwargs)
    finally:
        _run.reset(token)
        heartbeat.cancel()
        await _settle(ctx)
        with contextlib.suppress(ResumableError):  # a lost write is ctx.failure now
            await recorded_first(ctx)
        if ctx.cache_entries:  # indexes of results committed: written once, here
            await step_cache.write_entries(ctx)
        if ctx.failure is None:
            noting = start_noting_replays(ctx)
            if noting is not None:
                await noting


async def _record_failure(ctx: RunContext, error: Exception) -> dict[str, Any]:
    """Record the run as failed with `error`; returns the recorded description."""
    info = outcome.error_info(error, step=getattr(error, "step", None))
    info["retryable"] = isinstance(error, RETRYABLE) or (
        isinstance(error, SerializationError) and error.step is not None
    )
    output = ctx.runtime.serde.dumps(info, place=run_place(ctx.run_id, "output"))
    await _finish(ctx, "failed", output)
    return info


def _suspension(suspensions: list[Suspend]) -> Suspend:
    """The run's suspension: waiting if any wait_for is pending, else sleeping.

    It wakes at the earliest deadline among them.
    """
    status: RunStatus = (
        "waiting" if any(s.status == "waiting" for s in suspensions) else "sleeping"
    )
    deadlines = [s.wake_at_ms for s in suspensions if s.wake_at_ms is not None]
    return Suspend(status, min(deadlines) if deadlines else None)


async def _finish(
    ctx: RunContext,
    status: RunStatus,
    output: bytes | None,
    *,
    wake_at_ms: int | None = None,
) -> None:
    runtime = ctx.runtime
    update = RunUpdate(
        status=status,
        now_ms=runtime.clock.now_ms(),
        output=output,
        wake_at_ms=wake_at_ms,
    )
    await durably(
        ctx,
        lambda: runtime.store.update_run(ctx.run_id, fence=ctx.fence, update=update),
        seq=None,
    )
    ctx.ended_as = status
    level = logging.WARNING if status == "failed" else logging.INFO
    log.log(
        level,
        "run %r %s",
        ctx.run_id,
        status,
        extra={"run_id": ctx.run_id, "workflow": ctx.workflow, "fence": ctx.fence},
    )


async def _wake_if_sent_meanwhile(ctx: RunContext) -> None:
    """Requeue a run recorded as waiting for an input that has arrived meanwhile.

    `send` wakes a run that is waiting when the input lands. An input sent after
    wait_for looked for it, but before the run was recorded as waiting, woke
    nothing: the run would wait for its timeout, or forever. Now that the run is
    recorded as waiting, a later input wakes it; an earlier one is seen here.
    """
    keys = {s.key for s in ctx.suspensions if s.key is not None}
    if not keys or keys.isdisjoint(await ctx.runtime.store.get_inputs(ctx.run_id)):
        return
    # the fence is still this execution's unless another engine took the run since;
    # then that one carries on, and LeaseLost leaves it be
    with contextlib.suppress(LeaseLost):
        await _finish(ctx, "queued", None)


async def _settle(ctx: RunContext) -> None:
    """Stop the steps still running when the workflow ended.

    gather() leaves a failed step's siblings running; none may outlive the execution.
    """
    current = asyncio.current_task()
    pending = [task for task in ctx.inflight if task is not current and not task.done()]
    for task in pending:
        task.cancel()
    for task in pending:
        with contextlib.suppress(BaseException):
            await task


async def _heartbeat(
    ctx: RunContext, lease: Lease, main: asyncio.Task[Any] | None
) -> None:
    """Renew the lease every third of its TTL; on losing it, stop the execution."""
    runtime = ctx.runtime
    ttl_ms = int(runtime.lease_ttl_s * 1000)
    expires_at_ms = lease.expires_at_ms
    while True:
        await asyncio.sleep(runtime.lease_ttl_s / 3)
        now_ms, asked_s = runtime.clock.now_ms(), time.monotonic()
        renewal = asyncio.ensure_future(
            runtime.store.renew_lease(
                ctx.run_id, fence=ctx.fence, now_ms=now_ms, ttl_ms=ttl_ms
            )
        )
        if ctx.tenure is not None:
            ctx.tenure.renewing = renewal
        try:
            await renewal
        except LeaseLost as exc:
            lost: ResumableError | None = exc
        except ResumableError:
            # the store is unreachable: keep trying until the lease has run out
            lost = (
                LeaseLost(run_id=ctx.run_id, fence=ctx.fence)
                if now_ms >= expires_at_ms
                else None
            )
        else:
            if runtime.observer is not None:
                due_ms = expires_at_ms - ttl_ms * 2 // 3
                runtime.observer.lease_renewed(ctx, late_s=(now_ms - due_ms) / 1000)
            expires_at_ms, lost = now_ms + ttl_ms, None
            if ctx.tenure is not None:
                ctx.tenure.renewed(asked_s=asked_s, asked_ms=now_ms)
        if lost is not None:
            if runtime.observer is not None:
                runtime.observer.lease_lost(ctx)
            log.warning(
                "run %r: lease lost (fence %d); another owner has the run",
                ctx.run_id,
                ctx.fence,
                extra={"run_id": ctx.run_id, "workflow": ctx.workflow},
            )
            ctx.failure = lost
            if main is not None:
                main.cancel()
            return
