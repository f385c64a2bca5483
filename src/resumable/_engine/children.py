"""Child runs: a @workflow called inside a run is a run of its own (multi-agent).

The call takes a seq in the parent like a step. The child gets the stable id
`<parent run_id>/<seq>`, its own journal and lease, and is recovered on its own;
the parent journals the child's outcome, so once the child has finished the
parent replays it without touching the child again.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from resumable._engine import outcome
from resumable._engine.commits import commit, recorded_first
from resumable._engine.context import RunContext
from resumable._engine.ids import derived_id
from resumable._engine.specs import WorkflowSpec
from resumable._engine.steps import decide_call, observe_start, replayed
from resumable.errors import WorkflowFailed
from resumable.stores.places import step_place
from resumable.stores.protocol import StepRecord


def child_run_id(parent_run_id: str, seq: int) -> str:
    """The id of the child run started at `seq` of its parent (`parent/seq`).

    A parent id so long that this would pass the id limit is replaced by its hash.
    """
    return derived_id(parent_run_id, f"/{seq}")


class _Outcome(NamedTuple):
    """How a child run ended, as its parent records it."""

    status: str
    output: bytes
    result: Any
    info: dict[str, Any]
    error: WorkflowFailed | None


async def run_child(
    ctx: RunContext,
    seq: int,
    spec: WorkflowSpec,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """Return the child's recorded result, or run the child and record its outcome."""
    runtime = ctx.runtime
    name = spec.journal_name
    spec.register_types()  # its recorded result may hold them
    fingerprint, decision = decide_call(
        ctx, seq, name, args, kwargs, attempts=1, aliases=spec.journal_aliases
    )
    if isinstance(decision, StepRecord):
        return replayed(ctx, decision)
    await recorded_first(ctx)  # a value now()/uuid4() drew may be among its arguments
    started_at_ms = runtime.clock.now_ms()
    ended = await _run_to_end(
        ctx, seq, spec, args, kwargs, attempts=decision.first_attempt
    )
    await commit(
        ctx,
        StepRecord(
            run_id=ctx.run_id,
            seq=seq,
            name=name,
            fingerprint=fingerprint,
            status=ended.status,  # type: ignore[arg-type]  # "ok" or "failed"
            output=ended.output,
            attempts=decision.first_attempt,
            started_at_ms=started_at_ms,
            finished_at_ms=runtime.clock.now_ms(),
        ),
    )
    if ended.error is not None:
        raise outcome.step_failed(ctx.run_id, ended.info) from ended.error
    return ended.result


async def _run_to_end(
    ctx: RunContext,
    seq: int,
    spec: WorkflowSpec,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    attempts: int,
) -> _Outcome:
    """Start or resume the child run and wait for its end; encode what it ended with."""
    runtime = ctx.runtime
    name = spec.journal_name
    place = step_place(ctx.run_id, seq, name)
    observer = runtime.observer
    scope = (
        None
        if observer is None
        else observe_start(ctx, observer, seq, name, attempts, child=True)
    )
    try:
        result = await runtime.run_child(
            spec,
            args,
            kwargs,
            run_id=child_run_id(ctx.run_id, seq),
            parent_id=ctx.run_id,
            retry_failed=ctx.retry_failed,
        )
    except BaseException as exc:
        if observer is not None:
            observer.step_ended(ctx, scope, error=exc, retry_delay_s=None, calls=())
        if not isinstance(exc, WorkflowFailed):
            raise
        info: dict[str, Any] = {
            "type": exc.error_type,
            "message": exc.message,
            "step": name,
            "seq": seq,
            "attempts": attempts,
            "traceback": "",
        }
        return _Outcome(
            "failed", runtime.serde.dumps(info, place=place), None, info, exc
        )
    output = runtime.serde.dumps(result, place=place)
    if observer is not None:
        observer.step_ended(ctx, scope, error=None, retry_delay_s=None, calls=())
    return _Outcome("ok", output, result, {}, None)
