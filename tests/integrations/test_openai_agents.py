"""resumable.integrations.openai_agents: the real Agents SDK against the simulator.

Model responses and tool calls are steps (replayed, never paid twice), the
ledger holds each model call once, budgets stop an agent between model calls,
a streamed run streams live and replays its final output, and a
`ResumableSession` keeps the conversation in the store across a restart.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import (
    Agent,
    GuardrailFunctionOutput,
    OutputGuardrailTripwireTriggered,
    RunConfig,
    function_tool,
    input_guardrail,
    output_guardrail,
    set_tracing_disabled,
)
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.models.openai_provider import OpenAIProvider
from openai import AsyncOpenAI
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode
from starlette.testclient import TestClient

from conftest import store_url
from resumable import BudgetExceeded, Engine, NonDeterminismError, wait_for, workflow
from resumable.integrations.openai_agents import ResumableSession, Runner, pure_tool
from resumable.observability import Tracing
from resumable.simulator import SimulatedProvider
from resumable.ui.app import create_app

set_tracing_disabled(True)
TOOL_RUNS: list[str] = []
CONFIG: dict[str, RunConfig] = {}
ENGINES: dict[str, Engine] = {}


@function_tool
def lookup_invoice(customer: str) -> str:
    """Find the customer's latest invoice."""
    TOOL_RUNS.append("lookup_invoice")
    return f"INV-7 for {customer}"


@function_tool
def add_tax(amount: str) -> str:
    """Add 20% tax to an amount."""
    TOOL_RUNS.append("add_tax")
    return f"{amount} + 20%"


pure_tool(add_tax)
billing = Agent(
    name="billing",
    instructions="First call lookup_invoice, then call add_tax.",
    tools=[lookup_invoice, add_tax],
    model="gpt-4o-mini",
)
triage = Agent(
    name="triage",
    instructions="Call transfer_to_billing.",
    handoffs=[billing],
    model="gpt-4o-mini",
)
chat = Agent(name="chat", instructions="Answer briefly.", model="gpt-4o-mini")


@pytest.fixture
async def provider() -> AsyncIterator[SimulatedProvider]:
    TOOL_RUNS.clear()
    with SimulatedProvider() as simulated:
        async with AsyncOpenAI(
            base_url=simulated.openai_base_url, api_key="sk-test"
        ) as client:
            CONFIG["run"] = RunConfig(
                model_provider=OpenAIProvider(openai_client=client)
            )
            yield simulated


@workflow(name="test.agents.support")
async def support(question: str) -> str:
    result = await Runner.run(triage, question, run_config=CONFIG["run"])
    await wait_for("close")  # the run stops here; its resume replays the agent
    return str(result.final_output)


async def test_a_resumed_run_replays_model_and_tool_steps_and_reruns_only_pure_tools(
    provider: SimulatedProvider,
) -> None:
    engine = Engine("memory://")
    try:
        handle = await engine.start(support, "refund please", run_id="s1")
        while await handle.status() != "waiting":
            await asyncio.sleep(0.01)
        paid = provider.count()
        assert paid == 4  # triage, billing per tool, billing's answer
        assert TOOL_RUNS == ["lookup_invoice", "add_tax"]
        steps = [s.name for s in await engine.history("s1")]
        assert steps == [
            "model:triage",
            "model:billing",
            "tool:lookup_invoice",
            "model:billing",
            "model:billing",
            "wait_for:close",
        ]
        await engine.send("s1", "close", True)
        answer = await engine.resume("s1")
        assert provider.count() == paid  # nothing paid twice
        assert TOOL_RUNS == [
            "lookup_invoice",
            "add_tax",
            "add_tax",
        ]  # only the pure one
        assert answer
        ledger = await engine.ledger("s1")
        answered = provider.requests()
        assert ledger.incurred.calls == len(answered) == 4
        assert ledger.incurred.unmetered_calls == 0
        assert ledger.incurred.output_tokens == sum(
            e.usage.output_tokens for e in answered if e.usage
        )
        assert ledger.reused.calls == 4  # the replay saved every call
    finally:
        await engine.close()


@workflow(name="test.agents.budgeted", budget_tokens=1)
async def budgeted(question: str) -> str:
    result = await Runner.run(triage, question, run_config=CONFIG["run"])
    return str(result.final_output)


async def test_a_budget_stops_the_agent_between_model_calls(
    provider: SimulatedProvider,
) -> None:
    engine = Engine("memory://")
    try:
        with pytest.raises(BudgetExceeded, match="model:billing"):
            await engine.run(budgeted, "refund please", run_id="b1")
        assert provider.count() == 1  # the first call spent the budget; no second
        assert TOOL_RUNS == []
    finally:
        await engine.close()


@workflow(name="test.agents.streamed")
async def streamed(question: str) -> list[Any]:
    result = Runner.run_streamed(chat, question, run_config=CONFIG["run"])
    kinds = [
        event.data.type
        async for event in result.stream_events()
        if event.type == "raw_response_event"
    ]
    await wait_for("close")
    return [kinds, str(result.final_output)]


async def test_run_streamed_streams_live_then_replays_the_final_output_unpaid(
    provider: SimulatedProvider,
) -> None:
    engine = Engine("memory://")
    try:
        handle = await engine.start(streamed, "tell me about durability", run_id="t1")
        while await handle.status() != "waiting":
            await asyncio.sleep(0.01)
        assert provider.count() == 1
        await engine.send("t1", "close", True)
        kinds, output = await engine.resume("t1")
        assert provider.count() == 1  # the replay did not call the model
        assert kinds == ["response.completed"]  # the replay's one event
        assert output
        assert provider.requests()[0].is_stream
    finally:
        await engine.close()


@workflow(name="test.agents.live")
async def live(question: str) -> list[Any]:
    result = Runner.run_streamed(chat, question, run_config=CONFIG["run"])
    kinds = [
        event.data.type
        async for event in result.stream_events()
        if event.type == "raw_response_event"
    ]
    return [kinds, str(result.final_output)]


async def test_the_first_streamed_run_delivers_the_models_events_as_they_come(
    provider: SimulatedProvider,
) -> None:
    engine = Engine("memory://")
    try:
        kinds, output = await engine.run(live, "tell me about durability", run_id="l1")
    finally:
        await engine.close()
    assert kinds.count("response.output_text.delta") > 1
    assert kinds[-1] == "response.completed"
    assert output


@workflow(name="test.agents.session_turn")
async def session_turn(thread: str, text: str) -> str:
    session = ResumableSession(thread, ENGINES["now"])
    result = await Runner.run(chat, text, run_config=CONFIG["run"], session=session)
    return str(result.final_output)


@pytest.mark.parametrize(
    "backend",
    [
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ],
)
async def test_a_resumable_session_survives_a_restart(
    provider: SimulatedProvider, backend: str, tmp_path: Path
) -> None:
    url = store_url(backend, tmp_path)
    ENGINES["now"] = engine = Engine(url)
    try:
        await engine.run(session_turn, "user-1", "my name is Ada", run_id="turn-1")
    finally:
        await engine.close()
    ENGINES["now"] = engine = Engine(url)  # a new process's engine
    try:
        await engine.run(session_turn, "user-1", "what is my name", run_id="turn-2")
        items = await ResumableSession("user-1", engine).get_items()
    finally:
        await engine.close()
    users = [item.get("content") for item in items if item.get("role") == "user"]
    assert users == ["my name is Ada", "what is my name"]
    assert len(items) == 4  # two questions, two answers
    second = provider.requests()[-1]
    assert second.last_user_text == "what is my name"


async def test_session_items_pop_and_clear(tmp_path: Path) -> None:
    engine = Engine(f"sqlite:///{tmp_path / 's.db'}")
    try:
        session = ResumableSession("t", engine)
        await session.add_items([{"role": "user", "content": "a"}])
        await session.add_items([{"role": "user", "content": "b"}])
        assert [i.get("content") for i in await session.get_items(limit=1)] == ["b"]
        popped = await session.pop_item()
        assert popped is not None
        assert popped.get("content") == "b"
        assert len(await session.get_items()) == 1
        await session.clear_session()
        assert await session.get_items() == []
        assert await session.pop_item() is None
    finally:
        await engine.close()


async def test_outside_a_run_the_runner_is_the_sdks(
    provider: SimulatedProvider,
) -> None:
    result = await Runner.run(triage, "refund please", run_config=CONFIG["run"])
    assert provider.count() == 4
    assert TOOL_RUNS == ["lookup_invoice", "add_tax"]
    assert result.final_output


GUARD_RUNS: list[str] = []


@input_guardrail
async def polite(context: Any, agent: Any, text: Any) -> GuardrailFunctionOutput:
    GUARD_RUNS.append("polite")
    return GuardrailFunctionOutput(
        output_info={"checked": True}, tripwire_triggered=False
    )


researcher = Agent(
    name="researcher",
    instructions="Call lookup_invoice.",
    tools=[lookup_invoice],
    model="gpt-4o-mini",
)
manager = Agent(
    name="manager",
    instructions="Call research.",
    tools=[researcher.as_tool(tool_name="research", tool_description="Research it.")],
    input_guardrails=[polite],
    model="gpt-4o-mini",
)


@workflow(name="test.agents.managed")
async def managed(question: str) -> str:
    result = await Runner.run(manager, question, run_config=CONFIG["run"])
    await wait_for("close")
    return str(result.final_output)


async def test_guardrails_and_agents_as_tools_replay_without_running_again(
    provider: SimulatedProvider,
) -> None:
    GUARD_RUNS.clear()
    engine = Engine("memory://")
    try:
        handle = await engine.start(managed, "what does Ada owe", run_id="m1")
        while await handle.status() != "waiting":
            await asyncio.sleep(0.01)
        paid = provider.count()
        assert TOOL_RUNS == ["lookup_invoice"]  # inside the nested agent run
        assert GUARD_RUNS == ["polite"]
        steps = [s.name for s in await engine.history("m1")]
        assert "guardrail:polite" in steps
        assert "tool:research" in steps  # the nested run, recorded whole
        await engine.send("m1", "close", True)
        assert await engine.resume("m1")
        assert provider.count() == paid
        assert TOOL_RUNS == ["lookup_invoice"]
        assert GUARD_RUNS == ["polite"]
    finally:
        await engine.close()


@output_guardrail
async def no_refunds(context: Any, agent: Any, output: Any) -> GuardrailFunctionOutput:
    GUARD_RUNS.append("no_refunds")
    return GuardrailFunctionOutput(output_info="blocked", tripwire_triggered=True)


guarded = Agent(
    name="guarded",
    instructions="Answer briefly.",
    output_guardrails=[no_refunds],
    model="gpt-4o-mini",
)


@workflow(name="test.agents.tripped")
async def tripped(question: str) -> str:
    try:
        await Runner.run(guarded, question, run_config=CONFIG["run"])
    except OutputGuardrailTripwireTriggered as exc:
        await wait_for("close")
        return str(exc.guardrail_result.output.output_info)
    return "passed"


async def test_a_tripped_output_guardrail_replays_its_verdict(
    provider: SimulatedProvider,
) -> None:
    GUARD_RUNS.clear()
    engine = Engine("memory://")
    try:
        handle = await engine.start(tripped, "refund me", run_id="g1")
        while await handle.status() != "waiting":
            await asyncio.sleep(0.01)
        await engine.send("g1", "close", True)
        assert await engine.resume("g1") == "blocked"
        assert GUARD_RUNS == ["no_refunds"]
        assert provider.count() == 1
    finally:
        await engine.close()


@workflow(name="test.agents.sync")
def sync_support(question: str) -> str:
    result = Runner.run_sync(triage, question, run_config=CONFIG["run"])
    return str(result.final_output)


async def test_run_sync_in_a_plain_def_workflow_journals_the_same_steps(
    provider: SimulatedProvider,
) -> None:
    engine = Engine("memory://")
    try:
        assert await engine.run(sync_support, "refund please", run_id="y1")
        steps = [s.name for s in await engine.history("y1")]
    finally:
        await engine.close()
    assert steps == [
        "model:triage",
        "model:billing",
        "tool:lookup_invoice",
        "model:billing",
        "model:billing",
    ]
    assert provider.count() == 4


Spans = tuple[Tracing, InMemorySpanExporter]


@pytest.fixture
def spans() -> Iterator[Spans]:
    """A `Tracing` observer and the exporter that keeps the spans it ends."""
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Tracing(tracer_provider=tracer_provider), exporter
    tracer_provider.shutdown()


@workflow(name="test.agents.traced")
async def traced(question: str) -> str:
    result = await Runner.run(triage, question, run_config=CONFIG["run"])
    return str(result.final_output)


@workflow(name="test.agents.traced_sync")
def traced_sync(question: str) -> str:
    result = Runner.run_sync(triage, question, run_config=CONFIG["run"])
    return str(result.final_output)


@workflow(name="test.agents.traced_streamed")
async def traced_streamed(question: str) -> str:
    result = Runner.run_streamed(triage, question, run_config=CONFIG["run"])
    async for _ in result.stream_events():
        pass
    return str(result.final_output)


@pytest.mark.parametrize("flow", [traced, traced_sync, traced_streamed])
async def test_model_and_tool_step_spans_nest_in_the_agent_runs_span(
    provider: SimulatedProvider, spans: Spans, flow: Any
) -> None:
    tracing, exporter = spans
    engine = Engine("memory://", observers=[tracing])
    try:
        assert await engine.run(flow, "refund please", run_id="o1")
    finally:
        await engine.close()
    finished = exporter.get_finished_spans()
    (execution,) = [s for s in finished if s.name.startswith("resumable.run")]
    (agent_run,) = [s for s in finished if s.name.startswith("invoke_agent")]
    steps = [s for s in finished if s.name.startswith("resumable.step")]
    assert [s.name for s in steps] == [
        "resumable.step model:triage",
        "resumable.step model:billing",
        "resumable.step tool:lookup_invoice",
        "resumable.step model:billing",
        "resumable.step model:billing",
    ]
    # run → agent run → model and tool steps
    assert agent_run.name == "invoke_agent triage"
    assert agent_run.parent is not None
    assert agent_run.parent.span_id == execution.context.span_id
    assert all(
        s.parent is not None and s.parent.span_id == agent_run.context.span_id
        for s in steps
    )
    assert agent_run.attributes == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "triage",
    }
    assert agent_run.start_time is not None
    assert agent_run.end_time is not None
    assert all(
        s.start_time is not None
        and s.end_time is not None
        and agent_run.start_time <= s.start_time <= s.end_time <= agent_run.end_time
        for s in steps
    )
    assert steps[0].attributes is not None
    assert steps[0].attributes["resumable.step"] == "model:triage"


@function_tool(needs_approval=True)
def issue_refund(invoice: str) -> str:
    """Refund an invoice."""
    TOOL_RUNS.append("issue_refund")
    return f"refunded {invoice}"


refunder = Agent(
    name="refunder",
    instructions="Call issue_refund for the invoice named.",
    tools=[issue_refund],
    model="gpt-4o-mini",
)


@workflow(name="test.agents.traced_approval")
async def traced_approval(question: str) -> str:
    result = await Runner.run(refunder, question, run_config=CONFIG["run"])
    return str(result.final_output)


async def test_an_agent_run_waiting_for_approval_ends_its_span_without_an_error(
    provider: SimulatedProvider, spans: Spans
) -> None:
    tracing, exporter = spans
    engine = Engine("memory://", observers=[tracing])
    try:
        handle = await engine.start(traced_approval, "Refund INV-7", run_id="a1")
        while await handle.status() != "waiting":
            await asyncio.sleep(0.01)
        (waited,) = [
            s
            for s in exporter.get_finished_spans()
            if s.name == "invoke_agent refunder"
        ]
        assert waited.status.status_code is StatusCode.UNSET
        (key,) = await engine.awaited_keys("a1")
        await engine.send("a1", key, True)
        assert await handle.result()
    finally:
        await engine.close()
    assert TOOL_RUNS == ["issue_refund"]
    finished = exporter.get_finished_spans()
    runs = [s for s in finished if s.name.startswith("resumable.run")]
    agent_runs = [s for s in finished if s.name == "invoke_agent refunder"]
    assert len(runs) == len(agent_runs) == 2  # one per execution
    for execution, agent_run in zip(runs, agent_runs, strict=True):
        assert agent_run.parent is not None
        assert agent_run.parent.span_id == execution.context.span_id
    (tool,) = [s for s in finished if s.name == "resumable.step tool:issue_refund"]
    assert tool.parent is not None
    assert tool.parent.span_id == agent_runs[1].context.span_id


async def test_a_failed_agent_run_records_its_error_on_its_span(
    provider: SimulatedProvider, spans: Spans
) -> None:
    GUARD_RUNS.clear()
    tracing, exporter = spans
    engine = Engine("memory://", observers=[tracing])
    try:
        handle = await engine.start(tripped, "refund me", run_id="g2")
        while await handle.status() != "waiting":
            await asyncio.sleep(0.01)
    finally:
        await engine.close()
    (agent_run,) = [
        s for s in exporter.get_finished_spans() if s.name == "invoke_agent guarded"
    ]
    assert agent_run.status.status_code is StatusCode.ERROR
    assert agent_run.attributes is not None
    assert agent_run.attributes["error.type"] == "OutputGuardrailTripwireTriggered"


PROMPT = {"text": "tell me about durability"}


@workflow(name="test.agents.prompted")
async def prompted() -> str:
    result = await Runner.run(chat, PROMPT["text"], run_config=CONFIG["run"])
    await wait_for("close")
    return str(result.final_output)


async def test_a_changed_prompt_is_refused_not_answered_from_the_record(
    provider: SimulatedProvider,
) -> None:
    engine = Engine("memory://")
    try:
        handle = await engine.start(prompted, run_id="p1")
        while await handle.status() != "waiting":
            await asyncio.sleep(0.01)
        PROMPT["text"] = "tell me about something else"  # the code changed
        await engine.send("p1", "close", True)
        with pytest.raises(NonDeterminismError, match="model:chat"):
            await handle.result()
        assert provider.count() == 1
    finally:
        PROMPT["text"] = "tell me about durability"
        await engine.close()


def test_the_dashboard_shows_model_and_tool_steps_with_readable_values(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'ui.db'}"

    async def record(base_url: str) -> None:
        async with (
            AsyncOpenAI(base_url=base_url, api_key="sk-test") as client,
            Engine(url) as engine,
        ):
            CONFIG["run"] = RunConfig(
                model_provider=OpenAIProvider(openai_client=client)
            )
            await engine.run(traced, "refund please", run_id="ui-1")

    with SimulatedProvider() as simulated:
        asyncio.run(record(simulated.openai_base_url))
    engine = Engine(url)
    with TestClient(create_app(engine), base_url="http://127.0.0.1") as client:
        page = html.unescape(client.get("/run", params={"id": "ui-1"}).text)
    asyncio.run(engine.close())
    for shown in (
        "model:triage",
        '"name": "transfer_to_billing"',  # the handoff, in the model's output
        "tool:lookup_invoice",
        '"INV-7 for',  # the tool's result
        '"input_tokens": ',  # the model call's usage
    ):
        assert shown in page


MODELS: dict[str, Agent[Any]] = {}


@workflow(name="test.agents.model_instance")
async def with_model_instance(question: str) -> str:
    result = await Runner.run(MODELS["agent"], question)
    await wait_for("close")
    return str(result.final_output)


async def test_an_agent_holding_a_model_object_is_durable_too(
    provider: SimulatedProvider,
) -> None:
    async with AsyncOpenAI(base_url=provider.openai_base_url, api_key="sk-test") as c:
        MODELS["agent"] = Agent(
            name="direct",
            instructions="Answer briefly.",
            model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=c),
        )
        engine = Engine("memory://")
        try:
            handle = await engine.start(with_model_instance, "hello", run_id="d1")
            while await handle.status() != "waiting":
                await asyncio.sleep(0.01)
            await engine.send("d1", "close", True)
            assert await handle.result()
            steps = [s.name for s in await engine.history("d1")]
        finally:
            await engine.close()
    assert steps == ["model:direct", "wait_for:close"]
    assert provider.count() == 1  # the resume replayed the model step
