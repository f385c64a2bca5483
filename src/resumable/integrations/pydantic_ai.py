"""Durable Pydantic AI agents: `ResumableAgent(agent)` inside a `@workflow`.

Making an agent durable is one line::

    from resumable.integrations.pydantic_ai import ResumableAgent

    agent = ResumableAgent(Agent(model, name="support", tools=[...]))

    @workflow
    async def support(question: str) -> str:
        result = await agent.run(question)  # or run_stream / iter
        return result.output

Inside a run, every model request and every tool call (function tools, MCP
servers, dynamic toolsets, tool discovery) is a step of the run: committed with
its result, and the model request with its token usage, before the agent goes
on; replayed from the store on resume. Outside a run the agent is an ordinary
one. It is built on Pydantic AI's own durable-execution seam
(`pydantic_ai.durable_exec.BaseDurabilityCapability`, as its Temporal, DBOS and
Prefect integrations are): `ResumableDurability` is the capability, and
`ResumableAgent` a `WrapperAgent` that adds it to every run. Values cross the
step boundary as JSON (`JSON_CODEC`): messages, tool results and model
responses are stored with Pydantic AI's own type adapters, never pickled.

**Approval.** A tool that needs approval (`requires_approval=True`,
`ApprovalRequired`) or is executed outside (`CallDeferred`, external tools)
waits through `resumable.wait_for`, under the key `approve:<tool_call_id>`
(approvals) or `result:<tool_call_id>` (external results): the run is recorded
as waiting and the process may exit. `Engine.send(run_id, key, value)` or
`resumable send RUN KEY VALUE` from any process, days later, makes it runnable;
the agent replays to the same point and carries on. An approval's value is
`true`, `false`, or `{"approved": false, "message": "..."}` (a denial, which
takes Pydantic AI's denial path: the model is told the message) or
`{"approved": true, "override_args": {...}}`.

**Usage.** A model request made through the `openai` or `anthropic` SDK is
metered by the SDK meter (`resumable._engine.metering`), once, in the step
that makes it; a model the meter cannot see (another provider's SDK, a test
model) has its usage recorded from Pydantic AI's own `RequestUsage` instead.
Budgets are checked before every step, so a run stops between model calls.

**Deterministic code.** What runs outside the steps runs again on resume:
instructions, system prompt functions, output validators, history processors
and the workflow itself must give the same results from the same replayed
inputs. Tool calls run sequentially inside a run, so their steps replay in the
same order.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from resumable._engine.bridge import await_on, wait_on
from resumable._engine.context import RunContext as ResumableRunContext
from resumable._engine.context import active_run, current_run
from resumable._engine.engine import Engine
from resumable._engine.retry import NO_RETRY
from resumable._engine.snapshots import Checkpoint
from resumable._engine.specs import StepSpec
from resumable._engine.steps import execute_step
from resumable._engine.waits import wait_for

try:
    from pydantic_ai.agent import AbstractAgent, EventStreamHandler, WrapperAgent
    from pydantic_ai.durable_exec import (
        JSON_CODEC,
        BaseDurabilityCapability,
        DurabilityEngineSpec,
        DurableOperationId,
        JournalCallableOperationBackend,
        ModelRequestId,
        RoleBasedOperationConfig,
        conversation_id_from_run_id,
    )
    from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
    from pydantic_ai.models import Model
    from pydantic_ai.output import OutputDataT
    from pydantic_ai.tools import (
        AgentDepsT,
        DeferredToolRequests,
        DeferredToolResults,
        RunContext,
        ToolApproved,
        ToolDenied,
    )
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        f"resumable.integrations.pydantic_ai needs pydantic-ai ({exc}); "
        f"pip install 'resumable[pydantic-ai]'"
    ) from exc

__all__ = [
    "APPROVAL_PREFIX",
    "HISTORY_NAMESPACE",
    "RESULT_PREFIX",
    "ResumableAgent",
    "ResumableDurability",
    "load_history",
    "save_history",
]

HISTORY_NAMESPACE = "pydantic_ai"
"""The snapshot namespace a thread's Pydantic AI message history is saved in."""
APPROVAL_PREFIX = "approve:"
"""The input key a tool call needing approval waits for: this and its tool_call_id."""
RESULT_PREFIX = "result:"
"""The input key an externally executed tool call waits for: this and its tool_call_id."""


class _StepBackend(JournalCallableOperationBackend[None]):
    """Runs each Pydantic AI durable operation as one step of the current run."""

    async def execute(
        self,
        *,
        operation_id: DurableOperationId,
        name: str,
        body: Callable[[], Awaitable[object]],
        cache_key: tuple[object, ...],
        config: None,
    ) -> object:
        ctx = active_run()
        if ctx is None:  # the capability routes here only inside a run
            return await body()
        unit = _metered(body) if isinstance(operation_id, ModelRequestId) else body
        here = asyncio.get_running_loop()
        if here is ctx.loop:  # an `async def` workflow awaiting agent.run
            spec = StepSpec(
                name=name,
                fn=unit,
                is_async=True,
                retry=NO_RETRY,
                annotations_registered=True,  # a JSON payload: nothing to register
            )
            return await execute_step(ctx, ctx.take_seq(), spec, (), {})
        # a `def` workflow calling agent.run_sync: the agent runs on a loop of its
        # own in the workflow's thread; the step is journaled on the run's loop,
        # and its body runs back here, where the agent's clients live
        spec = StepSpec(
            name=name,
            fn=lambda: wait_on(here, _awaited(unit)),
            is_async=False,
            retry=NO_RETRY,
            annotations_registered=True,
        )
        return await await_on(ctx.loop, execute_step(ctx, ctx.take_seq(), spec, (), {}))


async def _awaited(unit: Callable[[], Awaitable[object]]) -> object:
    return await unit()


def _metered(body: Callable[[], Awaitable[object]]) -> Callable[[], Awaitable[object]]:
    """A model request's body that records its usage when the SDK meter saw no call.

    The SDK meter counts calls made through `openai`/`anthropic` inside the step;
    a model that uses neither (another SDK, a function model) would go unrecorded.
    """

    async def request() -> object:
        payload = await body()
        calls = current_run().calls
        if calls is not None and not calls and isinstance(payload, Mapping):
            _record_response_usage(payload)
        return payload

    return request


def _record_response_usage(payload: Mapping[str, Any]) -> None:
    usage = payload.get("usage")
    if not isinstance(usage, Mapping):
        return
    current_run().record_usage(
        model=payload.get("model_name")
        if isinstance(payload.get("model_name"), str)
        else None,
        provider=payload.get("provider_name")
        if isinstance(payload.get("provider_name"), str)
        else None,
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cached_input_tokens=int(usage.get("cache_read_tokens") or 0),
        cache_write_tokens=int(usage.get("cache_write_tokens") or 0),
    )


class ResumableDurability(BaseDurabilityCapability[AgentDepsT]):
    """The capability that makes an agent's model requests and tool calls steps.

    Attach it to an agent (`Agent(..., capabilities=[ResumableDurability()])`)
    or wrap the agent in `ResumableAgent`, which does. Outside a run the agent
    behaves as if it were not there.
    """

    engine_spec: ClassVar[DurabilityEngineSpec] = DurabilityEngineSpec(
        engine_name="resumable",
        durable_unit_noun="step",
        durable_container_noun="workflow",
        codec=JSON_CODEC,
        wrapped_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        toolset_lifecycles={
            "function": "enter-always",
            "mcp": "enter-in-durable-unit",
            "dynamic": "enter-never",
        },
        journal_discovery=True,
        # steps take their seq in call order: one tool at a time keeps it stable
        sequential_tools_in_durable_context=True,
        tool_config_key=None,
    )

    def __init__(
        self,
        *,
        models: Mapping[str, Model] | None = None,
        name: str | None = None,
        event_stream_handler: EventStreamHandler[AgentDepsT] | None = None,
    ) -> None:
        """Create the capability.

        Args:
            models: Other models the agent may be run with (`run(model=...)`), by
                key: a `Model` instance cannot be stored, so it is named by its key.
            name: The name the agent's steps carry (default: the agent's `name`,
                which it then must have). Keep it stable: recorded runs find their
                steps by it.
            event_stream_handler: Receives the model's events live, inside each
                model step, on the execution that makes the call (a replayed
                step delivers none), and each tool event in a step of its own.
        """
        super().__init__(
            models=models, name=name, event_stream_handler=event_stream_handler
        )
        self._backend: _StepBackend | None = None

    @property
    def in_durable_context(self) -> bool:
        """Whether the agent runs in a workflow's body (inside a step it does not)."""
        return active_run() is not None

    def get_durable_operation_backend(self) -> _StepBackend:
        """The backend that makes each operation a step (one per bound agent)."""
        if self._backend is None:
            self._backend = _StepBackend(
                agent_name=self.name,
                default_model_id=self.default_model_id,
                config=RoleBasedOperationConfig(
                    model=None, event=None, capability=None, tool=None
                ),
            )
        return self._backend

    def get_default_run_id(self) -> str | None:
        """`<run id>:<seq>`: the same on every execution of the run."""
        ctx = active_run()
        return None if ctx is None else f"{ctx.run_id}:{ctx.next_seq}"

    def get_default_conversation_id(self, run_id: str) -> str | None:
        """Derived from the replay-stable run id, as Pydantic AI's engines do."""
        return conversation_id_from_run_id(run_id) if self.in_durable_context else None

    async def handle_deferred_tool_calls(
        self, ctx: RunContext[AgentDepsT], *, requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        """Wait durably for each approval and external result (`resumable send`)."""
        run = active_run()
        if run is None:
            return None
        keys = [APPROVAL_PREFIX + call.tool_call_id for call in requests.approvals]
        keys += [RESULT_PREFIX + call.tool_call_id for call in requests.calls]
        values = await _wait_for_all(keys)
        results = DeferredToolResults()
        for key, value in zip(keys, values, strict=True):
            if key.startswith(APPROVAL_PREFIX):
                results.approvals[key.removeprefix(APPROVAL_PREFIX)] = _approval(
                    run, key, value
                )
            else:
                results.calls[key.removeprefix(RESULT_PREFIX)] = value
        return results


async def _wait_for_all(keys: list[str]) -> list[Any]:
    """The input sent under each key; the run waits until every one has come.

    In an `async def` workflow the waits are gathered, so the run is recorded
    waiting for every key at once. A `def` workflow's `wait_for` answers (or
    suspends) on the spot: it waits for them one after the other.
    """
    waits = [wait_for(key) for key in keys]
    if all(inspect.isawaitable(wait) for wait in waits):
        return list(await asyncio.gather(*waits))
    return waits


def _approval(
    run: ResumableRunContext, key: str, value: Any
) -> ToolApproved | ToolDenied:
    """The approval `value` sent under `key` says: true, false or a dict."""
    if isinstance(value, bool):
        return ToolApproved() if value else ToolDenied()
    if isinstance(value, Mapping) and isinstance(value.get("approved"), bool):
        if value["approved"]:
            args = value.get("override_args")
            return ToolApproved(
                override_args=dict(args) if isinstance(args, Mapping) else None
            )
        message = value.get("message")
        return ToolDenied(message) if isinstance(message, str) else ToolDenied()
    raise TypeError(
        f"run {run.run_id!r}: the input sent under {key!r} is {value!r}; send true, "
        f'false or {{"approved": false, "message": "why"}}'
    )


class ResumableAgent(WrapperAgent[AgentDepsT, OutputDataT]):
    """An agent whose runs inside a `@workflow` are durable; ordinary outside one.

    Wraps any Pydantic AI agent: `run`, `run_sync`, `run_stream` and `iter`
    work as on the agent, with `ResumableDurability` added to every run.
    """

    def __init__(
        self,
        wrapped: AbstractAgent[AgentDepsT, OutputDataT],
        *,
        name: str | None = None,
        models: Mapping[str, Model] | None = None,
        event_stream_handler: EventStreamHandler[AgentDepsT] | None = None,
    ) -> None:
        """Wrap `wrapped`.

        Args:
            wrapped: The agent; it needs a `name` (or pass `name=`), which its steps carry.
            name: The name its steps carry, if not the agent's.
            models: Other models runs may select by key (see `ResumableDurability`).
            event_stream_handler: Receives model events live (see `ResumableDurability`).
        """
        super().__init__(wrapped)
        durability: ResumableDurability[AgentDepsT] = ResumableDurability(
            models=models, name=name, event_stream_handler=event_stream_handler
        )
        self.durability = durability.for_agent(wrapped)

    if not TYPE_CHECKING:  # type checkers keep WrapperAgent.iter's overloads

        def iter(self, *args, capabilities=None, **kwargs):
            """The wrapped agent's `iter`, with the durability capability added.

            `run`, `run_sync` and `run_stream` all run through `iter`.
            """
            return super().iter(
                *args, capabilities=[*(capabilities or ()), self.durability], **kwargs
            )


async def load_history(engine: Engine, thread_id: str) -> list[ModelMessage]:
    """The thread's Pydantic AI message history as last saved ([] for a new thread).

    Pass it as `message_history=` to the next run. It is read from the thread's
    state in namespace `HISTORY_NAMESPACE` (`resumable threads` lists it).
    """
    state = await engine.load_state(
        thread_id, namespace=HISTORY_NAMESPACE, default=None
    )
    if state is None:
        return []
    return ModelMessagesTypeAdapter.validate_python(state["messages"])


async def save_history(
    engine: Engine,
    thread_id: str,
    messages: Sequence[ModelMessage],
    *,
    label: str | None = None,
) -> Checkpoint:
    """Save a thread's message history (`result.all_messages()`) as its new version.

    Messages are stored as JSON through Pydantic AI's `ModelMessagesTypeAdapter`,
    never pickled; each message is stored once, so saving after every turn
    writes only the turn's new messages.
    """
    dumped = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
    return await engine.save_state(
        thread_id, {"messages": dumped}, namespace=HISTORY_NAMESPACE, label=label
    )
