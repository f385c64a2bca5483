"""Executing one step call: replay it, or run it with retries and commit its outcome.

This is the hot path. A step that runs and succeeds costs one fingerprint, one
encode and one store write; a replayed step costs one decode.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import TYPE_CHECKING, Any

from resumable._engine import ledger, metering, outcome, replay, retry, step_cache
from resumable._engine.awaits import refuse_unawaited, unawaited_result
from resumable._engine.commits import (
    commit,
    confirm_lease,
    log_fields,
    recorded_first,
)
from resumable._engine.context import RunContext, StepScope, _step, seq_ranges
from resumable._engine.specs import StepSpec
from resumable._plural import plural
from resumable.errors import (
    BudgetExceeded,
    ResumableError,
    SerializationError,
    StepFailed,
)
from resumable.serde.chunked import SealedStream
from resumable.stores.kinds import JournalKind, seq_of
from resumable.stores.places import step_place
from resumable.stores.protocol import StepRecord
from resumable.usage import Usage, usage_from

if TYPE_CHECKING:
    from resumable._engine.context import Observer

log = logging.getLogger("resumable.steps")


async def execute_step(
    ctx: RunContext,
    seq: int,
    spec: StepSpec,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """Return the step's recorded result, or run it and commit the result first."""
    if not spec.annotations_registered:
        spec.register_types()
    fingerprint, decision = decide_call(
        ctx, seq, spec.name, args, kwargs, attempts=spec.retry.attempts
    )
    if isinstance(decision, StepRecord):
        return replayed(ctx, decision)
    key = None
    if spec.cache is not None:  # a step without a cache pays this test and the last
        found = await step_cache.look_up(
            ctx,
            seq,
            spec,
            fingerprint=fingerprint,
            args=args,
            kwargs=kwargs,
            plan=decision,
        )
        if isinstance(found, step_cache.Served):
            return found.value
        key = found
    result = await _run_attempts(
        ctx, seq, spec, fingerprint=fingerprint, args=args, kwargs=kwargs, plan=decision
    )
    if key is not None:
        await step_cache.remember(ctx, seq, spec, key)
    return result


def decide_call(
    ctx: RunContext,
    seq: int,
    name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    attempts: int,
    aliases: tuple[str, ...] = (),
) -> tuple[str, StepRecord | replay.Execute]:
    """The call's args fingerprint, and the record `seq` replays, or how it executes.

    `aliases`: older names the call may have recorded (see `replay.decide`).
    Raises the run's failure first: once a write failed, nothing more runs.
    """
    if ctx.failure is not None:
        raise ctx.failure
    fingerprint = ctx.runtime.serde.fingerprint((args, kwargs) if kwargs else args)
    recorded = ctx.journal.get(seq)
    if recorded is not None and replay.same_success(recorded, name, fingerprint):
        # a resume replays thousands: no more calls (the arguments of a recorded
        # call were looked at for a forgotten await when it executed)
        return fingerprint, recorded
    refuse_unawaited(args, kwargs, run_id=ctx.run_id, step=name)
    if recorded is None:
        if ctx.check is not None:  # Engine.check: stops here, executes nothing
            ctx.check.new_call(seq, name)
        return fingerprint, replay.FIRST_RUN  # a new step: no more calls
    if ctx.check is not None:  # Engine.check: replays a recorded failure, or stops
        return fingerprint, ctx.check.decide(
            recorded,
            seq=seq,
            name=name,
            fingerprint=fingerprint,
            args=args,
            kwargs=kwargs,
            aliases=aliases,
        )
    return fingerprint, replay.decide(
        recorded,
        run_id=ctx.run_id,
        seq=seq,
        name=name,
        fingerprint=fingerprint,
        attempts=attempts,
        retry_failed=ctx.retry_failed,
        aliases=aliases,
    )


def recorded_success(
    ctx: RunContext,
    seq: int,
    name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> StepRecord | None:
    """The success recorded at `seq` of this very call, if there is one to replay.

    For a sync workflow's thread, which replays it without a trip to the run's
    loop: that trip costs two thread wake-ups, some 30 replays. None leaves
    the call to `decide_call` on the loop (which also raises the run's failure).
    """
    recorded = ctx.journal.get(seq)
    if recorded is None or ctx.failure is not None:
        return None
    fingerprint = ctx.runtime.serde.fingerprint((args, kwargs) if kwargs else args)
    return recorded if replay.same_success(recorded, name, fingerprint) else None


def replayed(ctx: RunContext, record: StepRecord) -> Any:
    """The recorded outcome: its result, or its failure raised as StepFailed.

    Counts the step as replayed by this execution (its ledger entry says so).
    """
    ctx.replayed_seqs.append(record.seq)  # for its ledger entry
    observer = ctx.runtime.observer
    if observer is not None:
        observer.step_replayed(ctx, record)
    # a forked run replays its parent's records, sealed under the parent's run id
    place = step_place(record.run_id, record.seq, record.name)
    if record.usage is not None:
        raw = ctx.runtime.serde.loads(record.usage, place=place + " usage")
        entries = ledger.usage_entries(raw, place=place + " usage")
        ctx.replayed_usage.extend(usage for _, usage in entries)
        if observer is not None:
            observer.usage_replayed(ctx, [usage for _, usage in entries])
    value = ctx.runtime.serde.loads(record.output or b"", place=place)
    if record.status == "ok":
        return value
    raise outcome.step_failed(ctx.run_id, value)


async def _run_attempts(
    ctx: RunContext,
    seq: int,
    spec: StepSpec,
    *,
    fingerprint: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    plan: replay.Execute,
) -> Any:
    """Run the call's attempts and commit its outcome (the step's own code runs)."""
    if ctx.recording:  # a value now()/uuid4() drew may be among its arguments
        await recorded_first(ctx)
    runtime = ctx.runtime
    previous = ctx.journal.get(seq)
    calls = _recorded_calls(ctx, previous) if previous is not None else []
    noting = start_noting_replays(ctx)  # overlaps the step; durable before its outcome
    check_budget(ctx, spec.name)
    observer = runtime.observer
    attempt = plan.first_attempt
    if runtime.metering:
        metering.install()  # an SDK imported since the last step is metered too
    # in flight until its outcome is committed: a step still running when the
    # workflow ends is stopped (runs._settle)
    task = asyncio.current_task()
    if task is not None:
        ctx.inflight.add(task)
    try:
        while True:
            started_at_ms = runtime.clock.now_ms()
            if ctx.tenure is not None and not ctx.tenure.is_fresh(started_at_ms):
                started_at_ms = await confirm_lease(ctx, seq=seq, name=spec.name)
            this: StepScope = (ctx, seq, spec.name, attempt, [])
            scope = (
                None
                if observer is None
                else observe_start(ctx, observer, seq, spec.name, attempt, child=False)
            )
            step_token = _step.set(this)
            try:
                if spec.is_async:
                    result = await spec.fn(*args, **kwargs)
                else:
                    result = await asyncio.to_thread(spec.fn, *args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - every step error is journaled or retried
                error = exc
            else:
                await _commit_result(
                    this,
                    result,
                    fingerprint=fingerprint,
                    started_at_ms=started_at_ms,
                    calls=calls,
                    noting=noting,
                    scope=scope,
                )
                return result
            finally:
                _step.reset(step_token)
            await _retry_or_fail(
                this,
                error,
                fingerprint=fingerprint,
                started_at_ms=started_at_ms,
                retry_policy=spec.retry,
                retry_number=attempt - plan.base,
                calls=calls,
                noting=noting,
                scope=scope,
            )
            attempt += 1
    finally:
        if task is not None:
            ctx.inflight.discard(task)


async def _commit_result(
    this: StepScope,
    result: Any,
    *,
    fingerprint: str,
    started_at_ms: int,
    calls: list[tuple[int, Usage]],
    noting: asyncio.Future[None] | None,
    scope: Any,
) -> None:
    """Commit an attempt's result, with the usage of every attempt, before it returns."""
    ctx, seq, name, attempt, attempt_calls = this
    runtime = ctx.runtime
    place = step_place(ctx.run_id, seq, name)
    try:
        attempt_calls.extend(returned_calls(result, attempt_calls))
        output: bytes | SealedStream | None
        try:
            output = runtime.dumps_result(result, place=place)
        except SerializationError as exc:
            # a coroutine or future never awaited (the codec refuses them) says so
            unawaited = unawaited_result(result, run_id=ctx.run_id, step=name)
            raise unawaited or SerializationError(
                run_id=ctx.run_id,
                step=name,
                path=exc.path.replace("value", "result", 1),
                detail=exc.detail,
            ) from None
        if attempt_calls:
            calls.extend((ctx.fence, usage) for usage in attempt_calls)
        if noting is not None:
            await noting
        sealed = None
        if isinstance(output, SealedStream):  # uploaded; the row keeps a reference
            sealed, output = output, None
        await commit(
            ctx,
            StepRecord(
                run_id=ctx.run_id,
                seq=seq,
                name=name,
                fingerprint=fingerprint,
                status="ok",
                output=output,
                attempts=attempt,
                started_at_ms=started_at_ms,
                finished_at_ms=runtime.clock.now_ms(),
                usage=_encoded_calls(ctx, place, calls),
            ),
            sealed=sealed,
        )
        _spend(ctx, seq, attempt_calls)
    except BaseException as exc:
        if runtime.observer is not None:
            runtime.observer.step_ended(
                ctx, scope, error=exc, retry_delay_s=None, calls=attempt_calls
            )
        raise
    if runtime.observer is not None:
        runtime.observer.step_ended(
            ctx, scope, error=None, retry_delay_s=None, calls=attempt_calls
        )


async def _retry_or_fail(
    this: StepScope,
    error: Exception,
    *,
    fingerprint: str,
    started_at_ms: int,
    retry_policy: retry.Retry,
    retry_number: int,
    calls: list[tuple[int, Usage]],
    noting: asyncio.Future[None] | None,
    scope: Any,
) -> None:
    """Commit a failed attempt, then wait out the delay before the next one.

    Raises:
        StepFailed: no retry is left; the run sees the step's recorded failure.
        ResumableError: the step raised one of the engine's own signals.
    """
    ctx, _, name, _, attempt_calls = this
    observer = ctx.runtime.observer
    try:
        delay = await _commit_failure(
            this,
            error,
            fingerprint=fingerprint,
            started_at_ms=started_at_ms,
            retry_policy=retry_policy,
            retry_number=retry_number,
            calls=calls,
            noting=noting,
        )
    except BaseException as exc:
        if observer is not None:
            observer.step_ended(
                ctx, scope, error=exc, retry_delay_s=None, calls=attempt_calls
            )
        raise
    if observer is not None:
        observer.step_ended(
            ctx, scope, error=error, retry_delay_s=delay, calls=attempt_calls
        )
    await ctx.runtime.clock.sleep(delay)
    check_budget(ctx, name)


async def _commit_failure(
    this: StepScope,
    error: Exception,
    *,
    fingerprint: str,
    started_at_ms: int,
    retry_policy: retry.Retry,
    retry_number: int,
    calls: list[tuple[int, Usage]],
    noting: asyncio.Future[None] | None,
) -> float:
    """Commit a failed attempt as retrying; returns the delay before the next one.

    Raises:
        StepFailed: no retry is left (the attempt is committed as failed).
        ResumableError: the step raised one of the engine's own signals.
    """
    ctx, seq, name, attempt, attempt_calls = this
    runtime = ctx.runtime
    place = step_place(ctx.run_id, seq, name)
    if isinstance(error, ResumableError) and not isinstance(error, StepFailed):
        raise error  # our own signals (lease lost, nested write errors) are not step errors
    # a failed attempt's calls were billed too: they stay in the record
    calls.extend((ctx.fence, usage) for usage in attempt_calls)
    _spend(ctx, seq, attempt_calls)
    delay = retry.next_delay(retry_policy, retry_number, error, random.random)
    info = outcome.error_info(error, step=name, seq=seq, attempts=attempt)
    if delay is not None:
        info["retry_in_s"] = delay  # the back-off the run page draws
    if noting is not None:
        await noting
    record = StepRecord(
        run_id=ctx.run_id,
        seq=seq,
        name=name,
        fingerprint=fingerprint,
        status="failed" if delay is None else "retrying",
        output=runtime.serde.dumps(info, place=place),
        attempts=attempt,
        started_at_ms=started_at_ms,
        finished_at_ms=runtime.clock.now_ms(),
        usage=_encoded_calls(ctx, place, calls),
    )
    await commit(ctx, record)
    _log_failed_attempt(ctx, record, error, delay)
    if delay is None:
        raise outcome.step_failed(ctx.run_id, info) from error
    return delay


def _log_failed_attempt(
    ctx: RunContext, attempt: StepRecord, error: BaseException, delay: float | None
) -> None:
    """Log a failed attempt: INFO when it is retried, WARNING when none is left."""
    fields = log_fields(ctx, attempt.seq, attempt.name, attempt.attempts)
    kind = type(error).__name__
    if delay is None:
        log.warning(
            "run %r, step #%d %r failed after %s (%s)",
            ctx.run_id,
            attempt.seq,
            attempt.name,
            plural(attempt.attempts, "attempt"),
            kind,
            extra=fields,
        )
    else:
        log.info(
            "run %r, step #%d %r: attempt %d failed (%s); retrying in %.3f s",
            ctx.run_id,
            attempt.seq,
            attempt.name,
            attempt.attempts,
            kind,
            delay,
            extra=fields,
        )


def observe_start(
    ctx: RunContext,
    observer: Observer,
    seq: int,
    name: str,
    attempt: int,
    *,
    child: bool,
) -> Any:
    """Tell the observer an attempt starts (and, at the first, that replay ended)."""
    if ctx.is_replaying:
        ctx.is_replaying = False
        observer.replay_finished(ctx)
    return observer.step_started(ctx, seq, name, attempt, child=child)


def returned_calls(result: Any, metered: list[Usage]) -> list[Usage]:
    """Usage read from responses a step returned that the SDK meter did not count."""
    if not metered:  # the usual case: only the returned value can tell
        return usage_from(result)
    seen = {call.response_id for call in metered if call.response_id}
    return usage_from(result, skip_ids=seen)


def _spend(ctx: RunContext, seq: int, calls: list[Usage]) -> None:
    """Count an attempt's recorded calls where the run tracks what it spends.

    In the run's incurred spend (tracked only where a budget needs it), and in
    the batch the step at `seq` is an item of, if it is one (`map_steps`).
    """
    if not calls:  # the usual step: no LLM call, nothing to count
        return
    sink = ctx.spend_sinks.get(seq)
    if sink is not None:
        sink(calls)
    if ctx.budget is not None:
        spend = ledger.spend_of(calls, ctx.runtime.prices)
        if spend.unmetered_calls:
            log.warning(
                "run %r: %s without usage (unmetered); the run's budget counts "
                "only metered spend",
                ctx.run_id,
                plural(spend.unmetered_calls, "LLM call"),
            )
        ctx.spent = ctx.spent + spend


def _recorded_calls(ctx: RunContext, record: StepRecord) -> list[tuple[int, Usage]]:
    if record.usage is None:
        return []
    place = step_place(record.run_id, record.seq, record.name) + " usage"
    return ledger.usage_entries(
        ctx.runtime.serde.loads(record.usage, place=place), place=place
    )


def _encoded_calls(
    ctx: RunContext, place: str, calls: list[tuple[int, Usage]]
) -> bytes | None:
    if not calls:
        return None
    # plain JSON (str, int, float, None, bool): the same bytes as `dumps`, without its walk
    return ctx.runtime.serde.dumps_json(
        ledger.encode_entries(calls), place=place + " usage"
    )


def check_budget(ctx: RunContext, step: str) -> None:
    """Refuse to start a step once the run's incurred spend passed its budget."""
    spent, budget = ctx.spent, ctx.budget
    if budget is None:
        return
    # unmetered calls cost something unknown: the budget counts what is known and says so
    unmetered = (
        f" (+ {plural(spent.unmetered_calls, 'unmetered call')} of unknown cost)"
        if spent.unmetered_calls
        else ""
    )
    if budget.usd is not None and spent.cost_usd > budget.usd:
        raise BudgetExceeded(
            run_id=ctx.run_id,
            step=step,
            spent=f"${spent.cost_usd:.4f}{unmetered}",
            budget=f"${budget.usd:.4f}",
        )
    if budget.tokens is not None and spent.total_tokens > budget.tokens:
        raise BudgetExceeded(
            run_id=ctx.run_id,
            step=step,
            spent=plural(spent.total_tokens, "token") + unmetered,
            budget=f"{budget.tokens} tokens",
        )


def start_noting_replays(ctx: RunContext) -> asyncio.Future[None] | None:
    """Start writing the execution's ledger entry if it has replayed more since.

    The write overlaps the step about to run; that step awaits it before its own
    outcome is committed, so what this execution reused is on record before it
    records anything it spent.
    """
    replayed = len(ctx.replayed_seqs)  # ctx.replayed, asked before every step
    if replayed <= ctx.replays_noted:
        return ctx.noting
    ctx.replays_noted = replayed
    seqs = seq_ranges(ctx.replayed_seqs)  # as of now: the count's moment
    ctx.noting = asyncio.ensure_future(note_replays(ctx, replayed, seqs))
    return ctx.noting


async def note_replays(ctx: RunContext, replayed: int, seqs: list[list[int]]) -> None:
    """Record what this execution has replayed (its ledger entry, `JournalKind.LEDGER`)."""
    runtime = ctx.runtime
    entry = {
        "replayed_steps": replayed,
        "replayed_seqs": seqs,
        "usage": ledger.encode_entries((ctx.fence, u) for u in ctx.replayed_usage),
    }
    now_ms = runtime.clock.now_ms()
    seq = seq_of(JournalKind.LEDGER, ctx.fence)
    place = step_place(ctx.run_id, seq, LEDGER_STEP)
    await commit(
        ctx,
        StepRecord(
            run_id=ctx.run_id,
            seq=seq,
            name=LEDGER_STEP,
            fingerprint="-",
            status="ok",
            output=runtime.serde.dumps(entry, place=place),
            attempts=1,
            started_at_ms=now_ms,
            finished_at_ms=now_ms,
        ),
    )


LEDGER_STEP = "resumable.ledger"
"""The name of the per-execution ledger entries (`JournalKind.LEDGER`)."""
