"""ResumableAgent against the simulated provider: history, streaming, usage, budgets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from pydantic_ai import Agent, AgentRunResultEvent, InstrumentationSettings
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import (
    AgentStreamEvent,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    PartDeltaEvent,
    TextPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RequestUsage

from conftest import store_url
from resumable import BudgetExceeded, Engine, workflow
from resumable.integrations.pydantic_ai import (
    ResumableAgent,
    ResumableDurability,
    load_history,
    save_history,
)
from resumable.observability import Tracing
from resumable.simulator import SimulatedProvider

HISTORY_BACKENDS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]


@pytest.fixture
def provider() -> Iterator[SimulatedProvider]:
    with SimulatedProvider() as provider:
        yield provider


@pytest.fixture
async def client(provider: SimulatedProvider) -> AsyncIterator[openai.AsyncOpenAI]:
    """The SDK client the models use, closed with the test's loop."""
    client = openai.AsyncOpenAI(base_url=provider.openai_base_url, api_key="sk-test")
    yield client
    await client.close()


def model_of(client: openai.AsyncOpenAI) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client))


def weather_agent(
    client: openai.AsyncOpenAI, calls: list[str]
) -> ResumableAgent[None, str]:
    agent = Agent(
        model_of(client),
        name="weather",
        instructions="First call lookup_city, then call get_weather.",
    )

    @agent.tool_plain
    def lookup_city(name: str) -> str:
        calls.append("lookup_city")
        return "Oslo"

    @agent.tool_plain
    def get_weather(city: str) -> str:
        calls.append("get_weather")
        return "sunny"

    return ResumableAgent(agent)


async def test_a_finished_run_replays_its_output_without_a_model_or_tool_call(
    provider: SimulatedProvider, client: openai.AsyncOpenAI, tmp_path: Path
) -> None:
    calls: list[str] = []
    agent = weather_agent(client, calls)

    @workflow(name="pai.replay")
    async def ask(question: str) -> str:
        return (await agent.run(question)).output

    engine = Engine(f"sqlite:///{tmp_path / 'r.db'}")
    first = await engine.run(ask, "Weather?", run_id="r")
    steps = [s.name for s in await engine.history("r")]
    assert steps == [
        "weather__model.request",
        "weather__function_toolset__<agent>.call_tool:lookup_city",
        "weather__model.request",
        "weather__function_toolset__<agent>.call_tool:get_weather",
        "weather__model.request",
    ]
    # the ledger counts each model call once: the SDK meter, not the returned value
    ledger = await engine.ledger("r")
    assert ledger.incurred.calls == len(provider.requests()) == 3
    forked = await engine.fork("r", at_step=5)
    assert await engine.resume(forked) == first  # every step replayed
    assert calls == ["lookup_city", "get_weather"]
    assert len(provider.requests()) == 3
    await engine.close()


async def test_outside_a_run_the_agent_is_an_ordinary_one(
    client: openai.AsyncOpenAI,
) -> None:
    calls: list[str] = []
    result = await weather_agent(client, calls).run("Weather?")
    assert "sunny" in result.output
    assert calls == ["lookup_city", "get_weather"]


async def test_a_budget_stops_the_agent_between_model_calls(
    provider: SimulatedProvider, client: openai.AsyncOpenAI, tmp_path: Path
) -> None:
    calls: list[str] = []
    agent = weather_agent(client, calls)

    @workflow(name="pai.budget", budget_tokens=50)
    async def ask(question: str) -> str:
        return (await agent.run(question)).output

    engine = Engine(f"sqlite:///{tmp_path / 'b.db'}")
    with pytest.raises(BudgetExceeded):
        await engine.run(ask, "Weather?", run_id="b")
    assert len(provider.requests()) == 1  # stopped before the tool, after one call
    assert calls == []
    await engine.close()


def dumped(messages: Sequence[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(list(messages))


@pytest.mark.parametrize("backend", HISTORY_BACKENDS)
async def test_message_history_survives_a_restart(
    backend: str, client: openai.AsyncOpenAI, tmp_path: Path
) -> None:
    url = store_url(backend, tmp_path)
    agent = ResumableAgent(Agent(model_of(client), name="chat"))
    engine = Engine(url)
    first = await agent.run("Tell me about Oslo")
    await save_history(engine, "user-42", first.all_messages())
    await engine.close()

    engine = Engine(url)  # a new process would open the store the same way
    try:
        history = await load_history(engine, "user-42")
        assert dumped(history) == dumped(first.all_messages())
        second = await agent.run("And Bergen?", message_history=history)
        await save_history(engine, "user-42", second.all_messages())
        assert dumped(await load_history(engine, "user-42")) == dumped(
            second.all_messages()
        )
        assert len(second.all_messages()) == 4
        assert await load_history(engine, "user-7") == []
    finally:
        drop = getattr(engine.store, "drop", None)
        if drop is not None:
            await drop()
        await engine.close()


async def test_run_stream_streams_the_first_time_and_replays_the_output(
    provider: SimulatedProvider, client: openai.AsyncOpenAI, tmp_path: Path
) -> None:
    deltas: list[Any] = []

    async def handler(
        ctx: RunContext[Any], events: AsyncIterable[AgentStreamEvent]
    ) -> None:
        async for event in events:
            if isinstance(event, PartDeltaEvent):
                deltas.append(event)

    agent = ResumableAgent(
        Agent(model_of(client), name="streamer"), event_stream_handler=handler
    )
    texts: list[str] = []

    @workflow(name="pai.stream")
    async def tell(question: str) -> str:
        async with agent.run_stream(question) as result:
            async for text in result.stream_text(delta=True):
                texts.append(text)
            return await result.get_output()

    engine = Engine(f"sqlite:///{tmp_path / 's.db'}")
    first = await engine.run(tell, "Tell me about Oslo", run_id="s")
    assert len(deltas) > 1  # token by token, while the model step ran
    assert "".join(texts) == first
    streamed = len(deltas)
    forked = await engine.fork("s", at_step=1)
    texts.clear()
    assert await engine.resume(forked) == first
    assert "".join(texts) == first  # the output, from the store
    assert len(provider.requests()) == 1  # the model was not called again
    assert len(deltas) == streamed
    await engine.close()


def test_run_sync_in_a_def_workflow_journals_and_replays_the_same_steps(
    provider: SimulatedProvider, tmp_path: Path
) -> None:
    calls: list[str] = []
    client = openai.AsyncOpenAI(base_url=provider.openai_base_url, api_key="sk-test")
    agent = weather_agent(client, calls)

    @workflow(name="pai.sync")
    def ask(question: str) -> str:
        output = agent.run_sync(question).output
        # run_sync leaves its event loop set on this thread: close it, and the
        # client's connections made on it, before the thread is reused
        loop = asyncio.get_event_loop()
        loop.run_until_complete(client.close())
        loop.close()
        asyncio.set_event_loop(None)
        return output

    url = f"sqlite:///{tmp_path / 'sync.db'}"
    first = Engine(url).run_sync(ask, "Weather?", run_id="s")

    async def replay() -> tuple[list[str], object]:
        engine = Engine(url)
        try:
            steps = [s.name for s in await engine.history("s")]
            return steps, await engine.resume(await engine.fork("s", at_step=5))
        finally:
            await engine.close()

    steps, again = asyncio.run(replay())
    assert len(steps) == 5
    assert again == first
    assert calls == ["lookup_city", "get_weather"]  # the fork replayed them
    assert len(provider.requests()) == 3


async def test_model_and_tool_step_spans_nest_in_the_agent_runs_span(
    client: openai.AsyncOpenAI, tmp_path: Path
) -> None:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = Agent(
        model_of(client),
        name="traced",
        instructions="Call lookup_city.",
        capabilities=[
            Instrumentation(
                settings=InstrumentationSettings(tracer_provider=tracer_provider)
            )
        ],
    )

    @agent.tool_plain
    def lookup_city(name: str) -> str:
        return "Oslo"

    durable = ResumableAgent(agent)

    @workflow(name="pai.traced")
    async def ask(question: str) -> str:
        return (await durable.run(question)).output

    async with Engine("memory://", observers=[Tracing(tracer_provider)]) as engine:
        await engine.run(ask, "Where?", run_id="t")
    finished = exporter.get_finished_spans()
    by_id = {span.context.span_id: span for span in finished}

    def ancestors(span: ReadableSpan) -> list[str]:
        names = []
        while span.parent is not None and span.parent.span_id in by_id:
            span = by_id[span.parent.span_id]
            names.append(span.name)
        return names

    (run_span,) = [s for s in finished if s.name == "resumable.run pai.traced"]
    (agent_span,) = [s for s in finished if s.name == "invoke_agent traced"]
    steps = [s for s in finished if s.name.startswith("resumable.step traced__")]
    assert [s.name.removeprefix("resumable.step ") for s in steps] == [
        "traced__model.request",
        "traced__function_toolset__<agent>.call_tool:lookup_city",
        "traced__model.request",
    ]
    for step_span in steps:  # run → agent run → (model/tool spans) → step
        chain = ancestors(step_span)
        assert agent_span.name in chain
        assert chain[-1] == run_span.name
    tracer_provider.shutdown()


async def test_a_model_the_sdk_meter_cannot_see_has_its_reported_usage_recorded(
    tmp_path: Path,
) -> None:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(
            parts=[TextPart("42")],
            usage=RequestUsage(input_tokens=11, output_tokens=3),
            model_name="house-model",
        )

    agent = Agent(
        FunctionModel(answer), name="house", capabilities=[ResumableDurability()]
    )  # attached directly, without the wrapper

    @workflow(name="pai.house")
    async def ask(question: str) -> str:
        return (await agent.run(question)).output

    engine = Engine(f"sqlite:///{tmp_path / 'h.db'}")
    assert await engine.run(ask, "The answer?", run_id="h") == "42"
    ledger = await engine.ledger("h")
    assert ledger.incurred.calls == 1
    assert ledger.incurred.total_tokens == 14
    assert [s.name for s in await engine.history("h")] == ["house__model.request"]
    await engine.close()


async def test_iter_walks_the_same_steps_and_replays_them(
    provider: SimulatedProvider, client: openai.AsyncOpenAI, tmp_path: Path
) -> None:
    calls: list[str] = []
    agent = weather_agent(client, calls)
    nodes: list[str] = []

    @workflow(name="pai.iter")
    async def walk(question: str) -> str:
        async with agent.iter(question) as run:
            async for node in run:
                nodes.append(type(node).__name__)
        assert run.result is not None
        return run.result.output

    engine = Engine(f"sqlite:///{tmp_path / 'i.db'}")
    first = await engine.run(walk, "Weather?", run_id="i")
    assert len(await engine.history("i")) == 5
    walked = list(nodes)
    nodes.clear()
    assert await engine.resume(await engine.fork("i", at_step=5)) == first
    assert nodes == walked  # the same graph, from the store
    assert calls == ["lookup_city", "get_weather"]
    assert len(provider.requests()) == 3
    await engine.close()


async def test_run_stream_events_gives_the_runs_result_and_replays_it_unpaid(
    provider: SimulatedProvider, client: openai.AsyncOpenAI, tmp_path: Path
) -> None:
    agent = ResumableAgent(Agent(model_of(client), name="events"))
    kinds: list[str] = []

    @workflow(name="pai.events")
    async def tell(question: str) -> str:
        output = ""
        async with agent.run_stream_events(question) as events:
            async for event in events:
                kinds.append(type(event).__name__)
                if isinstance(event, AgentRunResultEvent):
                    output = event.result.output
        return output

    engine = Engine(f"sqlite:///{tmp_path / 'e.db'}")
    first = await engine.run(tell, "Tell me about Oslo", run_id="e")
    assert first
    assert kinds[-1] == "AgentRunResultEvent"
    assert [s.name for s in await engine.history("e")] == [
        "events__model.request_stream"
    ]
    kinds.clear()
    assert await engine.resume(await engine.fork("e", at_step=1)) == first
    assert kinds[-1] == "AgentRunResultEvent"  # the same result, from the store
    assert len(provider.requests()) == 1
    await engine.close()
