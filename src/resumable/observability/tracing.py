"""OpenTelemetry spans for runs and steps, on the global TracerProvider.

Nothing is configured here: spans go to whatever provider the application set
(`trace.set_tracer_provider`, `opentelemetry-instrument`), and without one they
are the API's no-ops. Needs `pip install 'resumable[otel]'` (opentelemetry-api).

A trace context crosses processes through the store: an enqueued run keeps its
enqueuer's, and every execution keeps its own, as inputs of the run under
`resumable.trace.*` keys (encrypted like every input when the engine encrypts).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from resumable._engine.context import Observer, RunContext, Runtime
from resumable._engine.observe import store_kind
from resumable.errors import ResumableError, StepFailed
from resumable.stores.blobref import written_size
from resumable.stores.kinds import JournalKind, kind_of
from resumable.stores.places import input_place
from resumable.stores.protocol import InputRecord, RunRecord, StepRecord
from resumable.usage import Usage

__all__ = ["CREATED_KEY", "EXECUTION_KEY", "Tracing"]

CREATED_KEY = "resumable.trace.created"
"""The input key of the trace context a run was enqueued in."""
EXECUTION_KEY = "resumable.trace.execution."
"""The input key prefix of each execution's span context (followed by its fence)."""

_PROPAGATOR = TraceContextTextMapPropagator()
_SUSPENDED = frozenset({"waiting", "sleeping", "queued", "succeeded"})
_ATTEMPTS = "attempts"
"""`ctx.observed` key: by seq, the attributes of each attempt in flight, set at its end."""

Attributes = dict[str, AttributeValue]


class Tracing(Observer):
    """Spans for each execution of a run and each step attempt it executes.

    Pass it to the engine: `Engine(url, observers=[Tracing()])`. Replayed steps
    get no span: the execution span counts them (`resumable.replayed_steps`,
    `resumable.replay_ms`). LLM calls a step returns add the GenAI semantic
    convention attributes (`gen_ai.system`, `gen_ai.request.model`,
    `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`) to its span. An
    agent run of the OpenAI Agents SDK integration is a span of its own
    (`invoke_agent <agent>`) between the execution's and its steps'.

    Args:
        tracer_provider: Where spans go; default the global provider.
    """

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self.tracer = trace.get_tracer(
            "resumable", "0.1.0", tracer_provider=tracer_provider
        )

    async def run_created(self, runtime: Runtime, run: RunRecord) -> None:
        """Keep the enqueuer's trace context, for the worker that will claim the run."""
        if run.queue is None:  # run/start execute here, in this very context
            return
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier)
        if carrier:
            await _keep(runtime, run.run_id, CREATED_KEY, carrier)

    async def execution_started(self, ctx: RunContext, run: RunRecord) -> None:
        """Start the execution's span, linked to the run's previous execution.

        Its parent is the caller's span, else the enqueuer's; a fork's first
        execution links to its source's last one.
        """
        runtime = ctx.runtime
        stored = await _stored_contexts(runtime, run.run_id)
        parent = otel_context.get_current()
        if not trace.get_current_span(parent).get_span_context().is_valid:
            created = stored.get(CREATED_KEY)
            if created is not None:
                parent = _PROPAGATOR.extract(created)
        links = _previous_execution(stored, ctx.fence)
        if run.forked_from is not None and ctx.fence == 1:
            source = await _stored_contexts(runtime, run.forked_from)
            links += _previous_execution(source, None, kind="fork source")
        span = self.tracer.start_span(
            f"resumable.run {ctx.workflow}",
            context=parent,
            kind=SpanKind.INTERNAL,
            links=links,
            attributes={
                "resumable.run_id": ctx.run_id,
                "resumable.workflow": ctx.workflow,
                "resumable.execution": ctx.fence,
                "resumable.store": store_kind(runtime),
                "resumable.recorded_steps": sum(
                    1 for s in ctx.journal if kind_of(s) is not JournalKind.LEDGER
                ),
            },
        )
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        ctx.observed["span"], ctx.observed["token"] = span, token
        ctx.observed["reused"] = []
        ctx.observed[_ATTEMPTS] = {}
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier)
        await _keep(runtime, run.run_id, f"{EXECUTION_KEY}{ctx.fence}", carrier)

    def replay_finished(self, ctx: RunContext) -> None:
        """Note how long the replay took on the execution span."""
        span: Span | None = ctx.observed.get("span")
        if span is not None:
            started_s = ctx.observed["started_s"]
            span.set_attribute(
                "resumable.replay_ms", (time.perf_counter() - started_s) * 1000
            )

    def usage_replayed(self, ctx: RunContext, calls: Sequence[Usage]) -> None:
        """Collect the reused LLM calls, summed on the execution span at its end."""
        reused = ctx.observed.get("reused")
        if reused is not None:
            reused.extend(calls)

    def execution_ended(
        self, ctx: RunContext, outcome: str, error: BaseException | None
    ) -> None:
        """End the execution span with its outcome and what it replayed."""
        span: Span | None = ctx.observed.pop("span", None)
        if span is None:
            return
        attributes: Attributes = {
            "resumable.outcome": outcome,
            "resumable.replayed_steps": ctx.replayed,
        }
        reused: list[Usage] = ctx.observed.pop("reused", [])
        if reused:
            attributes["resumable.reused.llm_calls"] = len(reused)
            attributes["resumable.reused.input_tokens"] = sum(
                _input_tokens(u) for u in reused
            )
            attributes["resumable.reused.output_tokens"] = sum(
                u.output_tokens for u in reused
            )
            attributes["resumable.reused.cost_usd"] = sum(
                ctx.runtime.prices.cost(u) or 0.0 for u in reused
            )
        if error is not None and outcome not in _SUSPENDED:
            _record_error(span, error, attributes)
        span.set_attributes(attributes)
        otel_context.detach(ctx.observed.pop("token"))
        span.end()

    def step_started(
        self, ctx: RunContext, seq: int, name: str, attempt: int, *, child: bool
    ) -> Any:
        """Start the attempt's span and make it current.

        Current, so that a child run and the spans of instrumented libraries the
        step calls (an HTTP client, an LLM SDK) nest in it.
        """
        # few attributes: the SDK validates each one, on every step. The run id is
        # on the execution span (the parent) and in the idempotency key.
        span = self.tracer.start_span(
            f"resumable.{'child' if child else 'step'} {name}",
            attributes={
                "resumable.seq": seq,
                "resumable.step": name,
                "resumable.attempt": attempt,
                "resumable.idempotency_key": f"{ctx.run_id}:{seq}",
            },
        )
        ctx.observed[_ATTEMPTS][seq] = {}
        return span, otel_context.attach(trace.set_span_in_context(span)), seq

    def checkpoint_written(
        self,
        ctx: RunContext,
        record: StepRecord,
        *,
        duration_s: float,
        error: BaseException | None,
    ) -> None:
        """Keep the commit's size and duration for its attempt's span."""
        attributes: Attributes | None = ctx.observed[_ATTEMPTS].get(record.seq)
        if attributes is None:  # a ledger entry or a wait: no attempt of a step
            return
        # a streamed result's row holds a reference: its object's size is what
        # the commit wrote
        attributes["resumable.checkpoint.bytes"] = written_size(
            record.output
        ) + written_size(record.usage)
        attributes["resumable.checkpoint.duration_ms"] = duration_s * 1000
        if error is not None:
            attributes["resumable.checkpoint.error"] = type(error).__name__

    def step_ended(
        self,
        ctx: RunContext,
        scope: Any,
        *,
        error: BaseException | None,
        retry_delay_s: float | None,
        calls: Sequence[Usage],
    ) -> None:
        """End the attempt's span with its commit, its LLM calls and its error.

        What the attempt learned is set in one call: the SDK takes a lock and
        checks the attributes on each call.
        """
        span, token, seq = scope
        attributes: Attributes = ctx.observed[_ATTEMPTS].pop(seq, None) or {}
        if calls:
            attributes["resumable.replayed"] = False
            _gen_ai(attributes, calls, ctx.runtime)
        if retry_delay_s is not None:
            attributes["resumable.retry_delay_s"] = retry_delay_s
        if error is not None:
            _record_error(span, error, attributes)
        if attributes:
            span.set_attributes(attributes)
        otel_context.detach(token)
        span.end()

    def agent_started(self, ctx: RunContext, agent: str) -> Any:
        """Start the agent run's span (`invoke_agent <agent>`) and make it current.

        Current, so the agent's model and tool step spans nest in it. Named and
        marked as the GenAI semantic conventions name an agent invocation, as
        Pydantic AI's own instrumentation does.
        """
        span = self.tracer.start_span(
            f"invoke_agent {agent}",
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": agent,
            },
        )
        return span, otel_context.attach(trace.set_span_in_context(span))

    def agent_ended(
        self, ctx: RunContext, scope: Any, *, error: BaseException | None
    ) -> None:
        """End the agent run's span, with its error if it failed."""
        span, token = scope
        if error is not None:
            attributes: Attributes = {}
            _record_error(span, error, attributes)
            span.set_attributes(attributes)
        otel_context.detach(token)
        span.end()

    def tick_started(self, schedule: str, tick_ms: int, *, late: bool) -> Any:
        """Start a span for the tick and make it current.

        Current, so the run it records keeps it as the context it was enqueued in
        (`run_created`): the run's execution spans link back to the tick.
        """
        span = self.tracer.start_span(
            f"resumable.tick {schedule}",
            attributes={
                "resumable.schedule": schedule,
                "resumable.tick_ms": tick_ms,
                "resumable.tick_late": late,
            },
        )
        return span, otel_context.attach(trace.set_span_in_context(span))

    def tick_ended(
        self, scope: Any, *, run_id: str, created: bool, error: BaseException | None
    ) -> None:
        """End the tick's span with its run id, and whether this worker made it."""
        span, token = scope
        attributes: Attributes = {
            "resumable.run_id": run_id,
            "resumable.tick_created": created,
        }
        if error is not None:
            _record_error(span, error, attributes)
        span.set_attributes(attributes)
        otel_context.detach(token)
        span.end()

    def feed_appended(
        self, ctx: RunContext, kind: str, *, entries: int, size: int
    ) -> None:
        """An event on the current span: the step attempt's, or the execution's.

        A streaming step writes its chunks in batches: one event per batch.
        """
        trace.get_current_span().add_event(
            "resumable.feed",
            {
                "resumable.feed.kind": kind,
                "resumable.feed.entries": entries,
                "resumable.feed.bytes": size,
            },
        )

    def lease_lost(self, ctx: RunContext) -> None:
        """An event on the execution span."""
        span: Span | None = ctx.observed.get("span")
        if span is not None:
            span.add_event("resumable.lease_lost", {"resumable.fence": ctx.fence})


async def _keep(
    runtime: Runtime, run_id: str, key: str, carrier: dict[str, str]
) -> None:
    await runtime.store.send_input(
        InputRecord(
            run_id=run_id,
            key=key,
            value=runtime.serde.dumps(
                carrier, place=input_place(run_id, key), root="value"
            ),
            sent_at_ms=runtime.clock.now_ms(),
        )
    )


async def _stored_contexts(runtime: Runtime, run_id: str) -> dict[str, dict[str, str]]:
    """The trace contexts kept with a run, by input key."""
    found: dict[str, dict[str, str]] = {}
    for key, value in (await runtime.store.get_inputs(run_id)).items():
        if key == CREATED_KEY or key.startswith(EXECUTION_KEY):
            carrier = runtime.serde.loads(value, place=input_place(run_id, key))
            if isinstance(carrier, dict):
                found[key] = {str(k): str(v) for k, v in carrier.items()}
    return found


def _previous_execution(
    stored: dict[str, dict[str, str]], fence: int | None, *, kind: str = "previous"
) -> list[Link]:
    """A link to the latest stored execution before `fence` (any, if None)."""
    fences = [
        int(key[len(EXECUTION_KEY) :])
        for key in stored
        if key.startswith(EXECUTION_KEY) and key[len(EXECUTION_KEY) :].isdigit()
    ]
    earlier = [f for f in fences if fence is None or f < fence]
    if not earlier:
        return []
    carrier = stored[f"{EXECUTION_KEY}{max(earlier)}"]
    span_context = trace.get_current_span(
        _PROPAGATOR.extract(carrier)
    ).get_span_context()
    if not span_context.is_valid:
        return []
    return [Link(span_context, {"resumable.link": f"{kind} execution"})]


def _input_tokens(usage: Usage) -> int:
    return usage.input_tokens + usage.cached_input_tokens + usage.cache_write_tokens


def _gen_ai(attributes: Attributes, calls: Sequence[Usage], runtime: Runtime) -> None:
    """The GenAI semantic convention attributes of the attempt's LLM calls (summed)."""
    last = calls[-1]
    if last.provider is not None:
        attributes["gen_ai.system"] = last.provider
    if last.model is not None:
        attributes["gen_ai.request.model"] = last.model
        attributes["gen_ai.response.model"] = last.model
    attributes["gen_ai.usage.input_tokens"] = sum(_input_tokens(u) for u in calls)
    attributes["gen_ai.usage.output_tokens"] = sum(u.output_tokens for u in calls)
    attributes["resumable.llm_calls"] = len(calls)
    unmetered = sum(1 for u in calls if not u.is_metered)
    if unmetered:  # their tokens are unknown: the sums above are a lower bound
        attributes["resumable.unmetered_calls"] = unmetered
    costs = [runtime.prices.cost(u) if u.is_metered else None for u in calls]
    if all(cost is not None for cost in costs):
        attributes["resumable.cost_usd"] = sum(c or 0.0 for c in costs)


def _record_error(span: Span, error: BaseException, attributes: Attributes) -> None:
    """Record the exception (the step's own, under StepFailed) and the error status.

    Resumable's error class and `error.type` go to `attributes`, set with the rest.
    """
    cause = error.__cause__ if isinstance(error, StepFailed) else None
    span.record_exception(cause if isinstance(cause, BaseException) else error)
    if isinstance(error, ResumableError):
        attributes["resumable.error_class"] = type(error).__name__
    attributes["error.type"] = type(cause or error).__name__
    span.set_status(Status(StatusCode.ERROR, type(cause or error).__name__))
