"""Durable OpenAI Agents SDK runs: `Runner` (a drop-in for `agents.Runner`).

Inside a `@workflow`, change the import and nothing else::

    from resumable.integrations.openai_agents import Runner  # was: from agents import Runner

    @workflow
    async def support(question: str) -> str:
        result = await Runner.run(triage_agent, question)
        return str(result.final_output)

**What becomes durable.** Every model response is a step (`model:<agent>`): its
output items and usage are committed before the agent sees them, and a resumed
run replays them without calling the model. Every function tool call is a step
(`tool:<name>`): a tool that finished never runs again. Handoffs and
agents-as-tools follow from that: a handoff is a tool call the recorded model
response makes, and an agent used as a tool is a tool, recorded whole. Input and
output guardrails are steps too (`guardrail:<name>`), and so is every read and
write of a `session`, so a replay sees the conversation as the first run saw it.

**How.** For each run the agent graph is copied (the agents reachable by
handoffs, shallow copies as `Agent.clone` makes): a copy's function tools and guardrails call through
steps, and its model is wrapped; agents named by a model name get their model from
`RunConfig.model_provider` wrapped the same way. Your agents are not changed.
Mark a tool that is cheap and pure with `pure_tool(tool)` to run it again on
replay instead of journaling it.

**Approval.** A tool with `needs_approval` stops the SDK run with interruptions;
`Runner.run` then waits durably, once per interruption, with
`wait_for(approval_key(item))` (`approval:<tool name>:<call id>`), so the process
may exit. Send `True` (or `{"approve": true}`) to run the tool, `False` (or
`{"approve": false, "message": "..."}`) to take the SDK's rejection path:
`resumable send RUN approval:issue_refund:call_1 true`. The run then continues
from the SDK's `RunState`.

**Traces.** Each `Runner.run`/`run_sync`/`run_streamed` in a workflow is one
agent run for the engine's observers (`Observer.agent_started`): with `Tracing`,
an `invoke_agent <agent>` span in the execution's, holding the model and tool
step spans.

**Usage.** A model step's OpenAI calls are metered by the SDK meter
(`resumable._engine.metering`), once; a model the meter cannot see (another
client) has its `ModelResponse.usage` recorded instead. Budgets are checked
before every step, so they stop an agent between model calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import functools
import hashlib
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from resumable._engine.bridge import wait_on
from resumable._engine.context import (
    RunContext,
    _step,
    active_run,
    def_workflow_run,
)
from resumable._engine.conversation import NAMESPACE as CONVERSATIONS
from resumable._engine.conversation import Conversation
from resumable._engine.engine import Engine
from resumable._engine.retry import NO_RETRY
from resumable._engine.specs import StepSpec
from resumable._engine.steps import execute_step
from resumable._engine.waits import wait_for
from resumable.usage import Usage as LedgerUsage

try:
    import agents
    from agents import (
        Agent,
        FunctionTool,
        GuardrailFunctionOutput,
        Handoff,
        InputGuardrail,
        Model,
        ModelProvider,
        ModelResponse,
        ModelSettings,
        OutputGuardrail,
        RunConfig,
        RunResult,
        RunResultStreaming,
        Session,
        ToolApprovalItem,
    )
    from agents.agent_output import AgentOutputSchemaBase
    from agents.items import TResponseInputItem, TResponseStreamEvent
    from agents.memory import SessionSettings
    from agents.models.interface import ModelTracing
    from agents.tool import Tool
    from agents.tool_context import ToolContext
    from agents.usage import Usage as AgentUsage
    from openai.types.responses import (
        Response,
        ResponseCompletedEvent,
        ResponseOutputItem,
        ResponseUsage,
    )
    from openai.types.responses.response_prompt_param import ResponsePromptParam
    from openai.types.responses.response_usage import (
        InputTokensDetails,
        OutputTokensDetails,
    )
    from pydantic import TypeAdapter
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        f"resumable.integrations.openai_agents needs the OpenAI Agents SDK ({exc}); "
        f"pip install 'resumable[openai-agents]'"
    ) from exc

__all__ = [
    "APPROVAL_PREFIX",
    "ResumableSession",
    "Runner",
    "StepSession",
    "approval_key",
    "pure_tool",
]

APPROVAL_PREFIX = "approval:"
"""An approval's `wait_for` key is this prefix, the tool's name and the call id."""

_PURE = "__resumable_pure__"
_DURABLE = "__resumable_durable__"
"""Set on the copies made here: an agent or tool given back (`result.last_agent`)
is durable already."""
_T = TypeVar("_T")
_OUTPUT_ITEM: TypeAdapter[Any] = TypeAdapter(ResponseOutputItem)
_SPECS: dict[str, StepSpec] = {}


# --- steps --------------------------------------------------------------------------


async def _invoke(call: Callable[[], Awaitable[_T]], *_key: Any) -> _T:
    return await call()


def _spec(name: str) -> StepSpec:
    spec = _SPECS.get(name)
    if spec is None:
        spec = StepSpec(name=name, fn=_invoke, is_async=True, retry=NO_RETRY)
        spec.annotations_registered = True
        _SPECS[name] = spec
    return spec


async def _as_step(
    name: str, key: tuple[Any, ...], call: Callable[[], Awaitable[_T]]
) -> _T:
    """`call()` journaled as step `name`, its arguments fingerprinted by `key`.

    Outside a run's workflow body (no run, or inside another step) it is a plain
    call. The call itself is not part of the fingerprint: `key` says what it is.
    """
    ctx = active_run()
    if ctx is None:
        return await call()
    spec = _spec(name)
    # the callable is passed first and is not fingerprinted: execute_step
    # fingerprints `args`, so the key goes there and the call rides in a closure
    bound = StepSpec(name=name, fn=lambda *_: call(), is_async=True, retry=spec.retry)
    bound.annotations_registered = True
    return cast("_T", await execute_step(ctx, ctx.take_seq(), bound, key, {}))


# --- model responses ----------------------------------------------------------------


def _usage_record(usage: AgentUsage) -> dict[str, Any]:
    return {
        "requests": usage.requests,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "input_tokens_details": usage.input_tokens_details.model_dump(mode="json"),
        "output_tokens_details": usage.output_tokens_details.model_dump(mode="json"),
    }


def _agent_usage(record: dict[str, Any]) -> AgentUsage:
    return AgentUsage(
        requests=record["requests"],
        input_tokens=record["input_tokens"],
        output_tokens=record["output_tokens"],
        total_tokens=record["total_tokens"],
        input_tokens_details=InputTokensDetails.model_validate(
            record["input_tokens_details"]
        ),
        output_tokens_details=OutputTokensDetails.model_validate(
            record["output_tokens_details"]
        ),
    )


def _response_record(response: ModelResponse, model: str | None) -> dict[str, Any]:
    """What a model step commits: JSON the dashboard shows and a replay rebuilds."""
    return {
        "model": model,
        # only the fields the provider sent, as a live response has them: the
        # replayed items then give the next call the very input the first run gave
        "output": [
            item.model_dump(mode="json", exclude_unset=True) for item in response.output
        ],
        "usage": _usage_record(response.usage),
        "response_id": response.response_id,
        "request_id": response.request_id,
    }


def _model_response(record: dict[str, Any]) -> ModelResponse:
    return ModelResponse(
        output=[_OUTPUT_ITEM.validate_python(item) for item in record["output"]],
        usage=_agent_usage(record["usage"]),
        response_id=record["response_id"],
        request_id=record["request_id"],
    )


def _meter_unseen(response: ModelResponse, model: str | None) -> None:
    """Record a response's usage when the SDK meter saw no call in this step.

    OpenAI clients are metered where the call is made; a model on another
    client (LiteLLM, a custom Model) is not, and its own usage is all we have.
    """
    scope = _step.get()
    if scope is None or scope[4] or response.usage.requests == 0:
        return
    scope[4].append(
        LedgerUsage(
            model=model,
            provider=None,
            input_tokens=response.usage.input_tokens
            - response.usage.input_tokens_details.cached_tokens,
            cached_input_tokens=response.usage.input_tokens_details.cached_tokens,
            output_tokens=response.usage.output_tokens,
        )
    )


def _call_key(
    instructions: str | None, input: str | list[TResponseInputItem]
) -> tuple[str]:
    """A model call's fingerprinted argument: a digest of its instructions and input.

    On replay the input is rebuilt from recorded steps, so it is the same unless
    the code changed (another prompt, another agent): then the recorded response
    is refused (`NonDeterminismError`) rather than returned for another question.
    """
    text = json.dumps([instructions, input], sort_keys=True, default=_jsonable)
    return (hashlib.blake2b(text.encode(), digest_size=16).hexdigest(),)


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_unset=True)
    return repr(value)


class DurableModel(Model):
    """A `Model` whose responses are steps of the run that calls it."""

    def __init__(
        self, model: Model, *, agent_name: str, model_name: str | None
    ) -> None:
        self.model, self.agent_name, self.model_name = model, agent_name, model_name
        self.step_name = f"model:{agent_name}"

    async def get_response(  # noqa: PLR0917 - the SDK's Model signature
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        """A recorded response, or the wrapped model's, committed before it returns."""
        respond = functools.partial(
            self.model.get_response,
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            tracing,
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            prompt=prompt,
        )

        async def call() -> dict[str, Any]:
            response = await respond()
            _meter_unseen(response, self.model_name)
            return _response_record(response, self.model_name)

        if active_run() is None:
            return await respond()
        key = _call_key(system_instructions, input)
        return _model_response(await _as_step(self.step_name, key, call))

    def stream_response(  # noqa: PLR0917 - the SDK's Model signature
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        """The wrapped model's events live, as one step; on replay, its final event."""

        def stream() -> AsyncIterator[TResponseStreamEvent]:
            return self.model.stream_response(
                system_instructions,
                input,
                model_settings,
                tools,
                output_schema,
                handoffs,
                tracing,
                previous_response_id=previous_response_id,
                conversation_id=conversation_id,
                prompt=prompt,
            )

        if active_run() is None:
            return stream()
        return self._streamed(stream, _call_key(system_instructions, input))

    async def _streamed(
        self,
        stream: Callable[[], AsyncIterator[TResponseStreamEvent]],
        key: tuple[Any, ...],
    ) -> AsyncIterator[TResponseStreamEvent]:
        live: asyncio.Queue[TResponseStreamEvent] = asyncio.Queue()

        async def call() -> dict[str, Any]:
            final: Response | None = None
            async for event in stream():
                live.put_nowait(event)
                if isinstance(event, ResponseCompletedEvent):
                    final = event.response
            if final is None:
                raise agents.ModelBehaviorError(
                    "the model stream ended without a response"
                )
            response = ModelResponse(
                output=list(final.output),
                usage=_usage_of(final.usage),
                response_id=final.id,
            )
            _meter_unseen(response, self.model_name)
            return _response_record(response, self.model_name)

        # the step takes its seq here, when called, like any step call
        task = asyncio.ensure_future(_as_step(self.step_name, key, call))
        streamed = False
        try:
            async for event in _drain(live, task):
                streamed = True
                yield event
            record = await task
        finally:
            if not task.done():
                task.cancel()
        if not streamed:  # a replay: the body that feeds `live` never ran
            yield _completed_event(record)

    async def close(self) -> None:
        """Close the wrapped model."""
        await self.model.close()


async def _drain(
    live: asyncio.Queue[_T], task: asyncio.Future[Any]
) -> AsyncIterator[_T]:
    """The events `task` puts on `live`, as they come, until it is done."""
    while not task.done():
        getter = asyncio.ensure_future(live.get())
        await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
        if getter.done():
            yield getter.result()
        else:
            getter.cancel()  # an item it had not taken yet stays on the queue
    while not live.empty():
        yield live.get_nowait()


def _usage_of(usage: ResponseUsage | None) -> AgentUsage:
    if usage is None:
        return AgentUsage(requests=1)
    return AgentUsage(
        requests=1,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        input_tokens_details=InputTokensDetails.model_validate(
            usage.input_tokens_details.model_dump()
        ),
        output_tokens_details=OutputTokensDetails.model_validate(
            usage.output_tokens_details.model_dump()
        ),
    )


def _completed_event(record: dict[str, Any]) -> ResponseCompletedEvent:
    """The recorded response as the one event a replayed stream delivers."""
    usage = record["usage"]
    response = Response.model_construct(
        id=record["response_id"] or "replayed",
        object="response",
        created_at=0,
        model=record["model"] or "",
        output=[_OUTPUT_ITEM.validate_python(item) for item in record["output"]],
        parallel_tool_calls=False,
        tool_choice="auto",
        tools=[],
        usage=ResponseUsage.model_validate(
            {
                "input_tokens": usage["input_tokens"],
                "output_tokens": usage["output_tokens"],
                "total_tokens": usage["total_tokens"],
                "input_tokens_details": usage["input_tokens_details"],
                "output_tokens_details": usage["output_tokens_details"],
            }
        ),
    )
    return ResponseCompletedEvent(
        type="response.completed", response=response, sequence_number=0
    )


class DurableModelProvider(ModelProvider):
    """Wraps a `ModelProvider`: each model it gives answers through steps."""

    def __init__(self, provider: ModelProvider, agent_name: Callable[[], str]) -> None:
        self.provider, self._agent_name = provider, agent_name

    def get_model(self, model_name: str | None) -> Model:
        """The provider's model, wrapped."""
        return DurableModel(
            self.provider.get_model(model_name),
            agent_name=self._agent_name(),
            model_name=model_name,
        )

    async def aclose(self) -> None:
        """Close the wrapped provider."""
        await self.provider.aclose()


# --- tools, handoffs, guardrails: the agent graph, copied per run -------------------


def pure_tool(tool: FunctionTool) -> FunctionTool:
    """Mark a function tool to run again on replay instead of being a step.

    For tools that are cheap and deterministic (arithmetic, formatting): they save
    a journal write each. A tool with side effects must stay a step.
    """
    setattr(tool, _PURE, True)
    return tool


def _durable_tool(tool: Tool) -> Tool:
    if not isinstance(tool, FunctionTool) or getattr(tool, _PURE, False):
        return tool
    if getattr(tool, _DURABLE, False):
        return tool
    durable = copy.copy(tool)
    setattr(durable, _DURABLE, True)
    invoke = durable.on_invoke_tool
    name = f"tool:{tool.name}"

    async def on_invoke_tool(context: ToolContext[Any], arguments: str) -> Any:
        return await _as_step(name, (arguments,), lambda: invoke(context, arguments))

    durable.on_invoke_tool = on_invoke_tool
    return durable


def _verdict(output: GuardrailFunctionOutput) -> dict[str, Any]:
    """What a guardrail step commits: its verdict, and its info (a value serde encodes)."""
    return {
        "tripwire_triggered": output.tripwire_triggered,
        "output_info": output.output_info,
    }


def _guardrail_output(verdict: dict[str, Any]) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(
        output_info=verdict["output_info"],
        tripwire_triggered=verdict["tripwire_triggered"],
    )


def _durable_input_guardrail(guardrail: InputGuardrail[Any]) -> InputGuardrail[Any]:
    check = guardrail.guardrail_function
    name = f"guardrail:{guardrail.get_name()}"

    async def function(context: Any, agent: Any, input: Any) -> GuardrailFunctionOutput:
        async def call() -> dict[str, Any]:
            result = check(context, agent, input)
            return _verdict(await result if inspect.isawaitable(result) else result)

        return _guardrail_output(await _as_step(name, (), call))

    return InputGuardrail(
        guardrail_function=function,
        name=guardrail.get_name(),
        run_in_parallel=guardrail.run_in_parallel,
    )


def _durable_output_guardrail(guardrail: OutputGuardrail[Any]) -> OutputGuardrail[Any]:
    check = guardrail.guardrail_function
    name = f"guardrail:{guardrail.get_name()}"

    async def function(
        context: Any, agent: Any, output: Any
    ) -> GuardrailFunctionOutput:
        async def call() -> dict[str, Any]:
            result = check(context, agent, output)
            return _verdict(await result if inspect.isawaitable(result) else result)

        return _guardrail_output(await _as_step(name, (), call))

    return OutputGuardrail(guardrail_function=function, name=guardrail.get_name())


@dataclass
class _Graph:
    """One run's copies of the agents it can reach, each copy made once."""

    copies: dict[int, Agent[Any]] = field(default_factory=dict)

    def agent(self, agent: Agent[Any]) -> Agent[Any]:
        found = self.copies.get(id(agent))
        if found is not None:
            return found
        if getattr(agent, _DURABLE, False):
            return agent
        # a shallow copy, as Agent.clone makes, without re-validating a valid agent
        durable = copy.copy(agent)
        setattr(durable, _DURABLE, True)
        self.copies[id(agent)] = durable  # before the handoffs: they may cycle back
        self.copies[id(durable)] = durable
        durable.tools = [_durable_tool(tool) for tool in agent.tools]
        durable.handoffs = [
            self.agent(h) if isinstance(h, Agent) else self._handoff(h)
            for h in agent.handoffs
        ]
        durable.input_guardrails = [
            _durable_input_guardrail(g) for g in agent.input_guardrails
        ]
        durable.output_guardrails = [
            _durable_output_guardrail(g) for g in agent.output_guardrails
        ]
        if isinstance(agent.model, Model) and not isinstance(agent.model, DurableModel):
            durable.model = DurableModel(
                agent.model, agent_name=agent.name, model_name=None
            )
        return durable

    def _handoff(self, handoff: Handoff[Any, Any]) -> Handoff[Any, Any]:
        invoke = handoff.on_invoke_handoff

        async def on_invoke_handoff(context: Any, arguments: str) -> Agent[Any]:
            return self.agent(await invoke(context, arguments))

        durable = copy.copy(handoff)
        durable.on_invoke_handoff = on_invoke_handoff
        return durable


# --- sessions -----------------------------------------------------------------------


class StepSession:
    """A `Session` whose every read and write is a step of the run using it.

    `Runner.run` wraps the session it is given in one, so a replay reads the
    history the first run read and never adds a turn twice.
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self.session_id = session.session_id
        self.session_settings = session.session_settings

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The wrapped session's items, as recorded."""
        return await _as_step(
            "session:get_items", (limit,), lambda: self.session.get_items(limit)
        )

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Add the items once, however often the run replays."""
        await _as_step(
            "session:add_items", (len(items),), lambda: self.session.add_items(items)
        )

    async def pop_item(self) -> TResponseInputItem | None:
        """Pop once; a replay returns the item popped."""
        return await _as_step("session:pop_item", (), self.session.pop_item)

    async def clear_session(self) -> None:
        """Clear once."""
        await _as_step("session:clear", (), self.session.clear_session)


class ResumableSession:
    """An Agents SDK `Session` kept in a resumable store, as a conversation thread.

    The items are the thread `session_id` of `resumable._engine.conversation`
    (namespace "conversation"), saved with `Engine.save_state`: on SQLite,
    PostgreSQL, Redis or memory, beside the runs, each item stored once however
    long the thread grows. Any process opening the same store continues it::

        session = ResumableSession("user-42", engine)
        await Runner.run(agent, "Hello again", session=session)
    """

    session_settings: SessionSettings | None = None

    def __init__(self, session_id: str, engine: Engine) -> None:
        self.session_id, self.engine = session_id, engine

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The thread's items, oldest first; with `limit`, the latest `limit`."""
        conversation = await Conversation.open(self.engine, self.session_id)
        items = cast("list[TResponseInputItem]", conversation.messages)
        return items if limit is None else items[max(len(items) - limit, 0) :]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items and save the thread."""
        if not items:
            return
        conversation = await Conversation.open(self.engine, self.session_id)
        conversation.extend(cast("list[dict[str, Any]]", items))
        await conversation.save()

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the latest item and return it (None if the thread is empty)."""
        items = await self.get_items()
        if not items:
            return None
        await self._save(items[:-1])
        return items[-1]

    async def clear_session(self) -> None:
        """Empty the thread (its earlier versions stay in its history)."""
        await self._save([])

    async def _save(self, items: list[TResponseInputItem]) -> None:
        await self.engine.save_state(
            self.session_id, {"messages": list(items)}, namespace=CONVERSATIONS
        )


# --- the runner ---------------------------------------------------------------------


def approval_key(item: ToolApprovalItem) -> str:
    """The `wait_for` key an interruption waits under: `approval:<tool>:<call id>`."""
    return f"{APPROVAL_PREFIX}{item.name}:{item.call_id}"


def _decision(value: Any) -> tuple[bool, str | None]:
    """(approved, rejection message) from what `send` delivered."""
    if isinstance(value, dict):
        return bool(value.get("approve", value.get("approved"))), value.get("message")
    if isinstance(value, str):
        return value.strip().lower() in (
            "true",
            "yes",
            "approve",
            "approved",
            "1",
        ), None
    return bool(value), None


@dataclass
class _Durable:
    """What one durable run passes the SDK: copied agents and a wrapped config."""

    run_config: RunConfig
    graph: _Graph = field(default_factory=_Graph)
    current: str = ""

    @classmethod
    def of(cls, run_config: RunConfig | None) -> _Durable:
        config = run_config or RunConfig()
        durable = cls(run_config=config)
        provider = config.model_provider
        if isinstance(provider, DurableModelProvider):
            return durable
        model = config.model
        wrapped = copy.copy(config)
        wrapped.model_provider = DurableModelProvider(provider, lambda: durable.current)
        if isinstance(model, Model) and not isinstance(model, DurableModel):
            wrapped.model = DurableModel(model, agent_name="run", model_name=None)
        durable.run_config = wrapped
        return durable

    def start(self, agent: Agent[Any]) -> Agent[Any]:
        """The durable copy of the run's first agent (and of all it reaches)."""
        self.current = agent.name
        return self.graph.agent(agent)


@contextlib.contextmanager
def _agent_run(ctx: RunContext, agent: Agent[Any]) -> Iterator[None]:
    """One agent run, told to the run's observers: its model and tool steps inside.

    With `Tracing`, the `invoke_agent <agent>` span, current while the run goes.
    """
    observer = ctx.runtime.observer
    if observer is None:
        yield
        return
    scope = observer.agent_started(ctx, agent.name)
    try:
        yield
    except Exception as exc:
        observer.agent_ended(ctx, scope, error=exc)
        raise
    except BaseException:  # the run suspended (an approval's wait) or was cancelled
        observer.agent_ended(ctx, scope, error=None)
        raise
    observer.agent_ended(ctx, scope, error=None)


def _streamed_agent_run(
    ctx: RunContext, agent: Agent[Any], start: Callable[[], RunResultStreaming]
) -> RunResultStreaming:
    """`start()` as one agent run, told to the observers, ending with its run task.

    The SDK runs a streamed agent in a task it makes at once: started in a
    context where the agent run is current, the task's steps nest in it, and the
    caller's context is left as it was.
    """
    observer = ctx.runtime.observer
    if observer is None:
        return start()
    scope_context = contextvars.copy_context()
    scope = scope_context.run(observer.agent_started, ctx, agent.name)
    try:
        result = scope_context.run(start)
    except Exception as exc:
        scope_context.run(observer.agent_ended, ctx, scope, error=exc)
        raise
    task = result.run_loop_task
    if task is None:  # nothing runs in the background: the run is over
        scope_context.run(observer.agent_ended, ctx, scope, error=None)
        return result

    def ended(task: asyncio.Task[Any]) -> None:
        error = None if task.cancelled() else task.exception()
        observer.agent_ended(
            ctx, scope, error=error if isinstance(error, Exception) else None
        )

    # in the context the scope began in, so an observer can undo what it set there
    task.add_done_callback(ended, context=scope_context)
    return result


class Runner:
    """`agents.Runner`, durable inside a `@workflow`; the SDK's own outside one."""

    @classmethod
    async def run(
        cls,
        starting_agent: Agent[Any],
        input: str | list[TResponseInputItem],
        *,
        run_config: RunConfig | None = None,
        session: Session | None = None,
        **kwargs: Any,
    ) -> RunResult:
        """Run the agent to its final output; each model call and tool call a step.

        Tool approvals (`needs_approval`) wait durably for `Engine.send` under
        `approval_key(item)`; the run continues once every one is answered.
        """
        ctx = active_run()
        if ctx is None:
            return await agents.Runner.run(
                starting_agent, input, run_config=run_config, session=session, **kwargs
            )
        with _agent_run(ctx, starting_agent):
            durable = _Durable.of(run_config)
            agent = durable.start(starting_agent)
            step_session = None if session is None else StepSession(session)
            hooks = _AgentNames(durable, kwargs.pop("hooks", None))
            result = await agents.Runner.run(
                agent,
                input,
                run_config=durable.run_config,
                session=cast("Session | None", step_session),
                hooks=hooks,
                **kwargs,
            )
            while result.interruptions:
                state = result.to_state()
                for item in result.interruptions:
                    approved, message = _decision(await wait_for(approval_key(item)))
                    if approved:
                        state.approve(item)
                    else:
                        state.reject(item, rejection_message=message)
                result = await agents.Runner.run(
                    agent,
                    state,
                    run_config=durable.run_config,
                    session=cast("Session | None", step_session),
                    hooks=hooks,
                    **kwargs,
                )
            return result

    @classmethod
    def run_sync(
        cls,
        starting_agent: Agent[Any],
        input: str | list[TResponseInputItem],
        **kwargs: Any,
    ) -> RunResult:
        """`run` from a plain `def` workflow (or from sync code outside a run)."""
        ctx = def_workflow_run()
        if ctx is None:
            return agents.Runner.run_sync(starting_agent, input, **kwargs)
        return wait_on(ctx.loop, cls.run(starting_agent, input, **kwargs))

    @classmethod
    def run_streamed(
        cls,
        starting_agent: Agent[Any],
        input: str | list[TResponseInputItem],
        *,
        run_config: RunConfig | None = None,
        session: Session | None = None,
        **kwargs: Any,
    ) -> RunResultStreaming:
        """Stream the run's events; a replayed model call delivers its final event.

        Interruptions are the caller's to handle here (`result.interruptions`).
        """
        ctx = active_run()
        if ctx is None:
            return agents.Runner.run_streamed(
                starting_agent, input, run_config=run_config, session=session, **kwargs
            )
        durable = _Durable.of(run_config)
        agent = durable.start(starting_agent)
        start = functools.partial(
            agents.Runner.run_streamed,
            agent,
            input,
            run_config=durable.run_config,
            session=None if session is None else cast("Session", StepSession(session)),
            hooks=_AgentNames(durable, kwargs.pop("hooks", None)),
            **kwargs,
        )
        return _streamed_agent_run(ctx, starting_agent, start)


class _AgentNames(agents.RunHooks[Any]):
    """Keeps `_Durable.current` on the agent about to call its model (step names)."""

    def __init__(self, durable: _Durable, user: agents.RunHooks[Any] | None) -> None:
        self.durable, self.user = durable, user

    async def on_agent_start(self, context: Any, agent: Agent[Any]) -> None:
        self.durable.current = agent.name
        if self.user is not None:
            await self.user.on_agent_start(context, agent)

    async def on_llm_start(
        self,
        context: Any,
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        self.durable.current = agent.name
        if self.user is not None:
            await self.user.on_llm_start(context, agent, system_prompt, input_items)

    async def on_llm_end(self, context: Any, agent: Agent[Any], response: Any) -> None:
        if self.user is not None:
            await self.user.on_llm_end(context, agent, response)

    async def on_agent_end(self, context: Any, agent: Agent[Any], output: Any) -> None:
        if self.user is not None:
            await self.user.on_agent_end(context, agent, output)

    async def on_handoff(self, context: Any, from_agent: Any, to_agent: Any) -> None:
        if self.user is not None:
            await self.user.on_handoff(context, from_agent, to_agent)

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        if self.user is not None:
            await self.user.on_tool_start(context, agent, tool)

    async def on_tool_end(
        self, context: Any, agent: Any, tool: Any, result: Any
    ) -> None:
        if self.user is not None:
            await self.user.on_tool_end(context, agent, tool, result)
