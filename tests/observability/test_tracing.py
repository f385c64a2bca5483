"""Spans from the OpenTelemetry SDK's in-memory exporter, across processes and runs."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anthropic
import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode

import resumable
from observability.traced_app import STEPS, traced_sequential
from observability.traced_worker_app import STEPS as WORKER_STEPS
from observability.traced_worker_app import traced_worker_flow
from resumable import Engine, Retry, step, workflow
from resumable.errors import WorkflowFailed
from resumable.observability import Tracing
from resumable.observability.tracing import EXECUTION_KEY
from resumable.simulator import SimulatedProvider

APP = Path(__file__).with_name("traced_app.py")
TESTS = Path(__file__).parent.parent


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def by_name(finished: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [span for span in finished if span.name.startswith(prefix)]


def parent_id(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


async def test_a_run_killed_mid_way_resumes_in_a_span_linked_to_the_dead_execution(
    tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    db, log = tmp_path / "traced.db", tmp_path / "steps.log"
    child = subprocess.Popen(
        [sys.executable, str(APP), str(db), "killed"],
        env={
            **os.environ,
            "HANG_FROM": "3",
            "TRACED_LOG": str(log),
            "PYTHONPATH": str(TESTS),
        },
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not (log.exists() and "start 3" in log.read_text()):
            assert child.poll() is None, child.communicate()[1].decode()
            assert time.monotonic() < deadline, "the child never reached step 3"
            await asyncio.sleep(0.01)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    child.stderr.close()  # type: ignore[union-attr]  # Popen was given stderr=PIPE

    provider, exporter = spans
    async with Engine(f"sqlite:///{db}", observers=[Tracing(provider)]) as engine:
        dead = await engine.store.get_inputs("killed")
        assert f"{EXECUTION_KEY}1" in dead  # the killed process kept its span context
        assert await engine.run(traced_sequential, STEPS, run_id="killed") == [
            i * i for i in range(STEPS)
        ]
        carrier = engine.serde.loads(
            dead[f"{EXECUTION_KEY}1"], place=f"run 'killed' input {EXECUTION_KEY}1"
        )
    finished = exporter.get_finished_spans()
    (execution,) = by_name(finished, "resumable.run traced.sequential")
    steps = by_name(finished, "resumable.step")
    # steps 0-2 were committed before the kill: replayed, no span; 3 and 4 executed
    assert sorted(int(str((s.attributes or {})["resumable.seq"])) for s in steps) == [
        4,
        5,
    ]
    assert all(parent_id(s) == execution.context.span_id for s in steps)
    assert execution.attributes is not None
    assert execution.attributes["resumable.replayed_steps"] == 3
    assert execution.attributes["resumable.execution"] == 2
    assert execution.attributes["resumable.outcome"] == "succeeded"
    assert execution.attributes["resumable.replay_ms"] >= 0  # type: ignore[operator]
    (link,) = execution.links
    dead_trace, dead_span = carrier["traceparent"].split("-")[1:3]
    assert link.context.trace_id == int(dead_trace, 16)
    assert link.context.span_id == int(dead_span, 16)


@step
async def enqueued_step(x: int) -> int:
    return x + 1


@workflow(name="traced.enqueued")
async def enqueued_flow(x: int) -> int:
    return await enqueued_step(x)


async def test_a_worker_continues_the_trace_of_the_code_that_enqueued_the_run(
    tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    url = f"sqlite:///{tmp_path / 'queue.db'}"
    tracer = provider.get_tracer("app")
    async with Engine(url, observers=[Tracing(provider)]) as producer:
        with tracer.start_as_current_span("http request") as request:
            await producer.enqueue(enqueued_flow, 41, run_id="claimed")
    # another engine (as another process would) claims it, outside any span
    async with Engine(url, observers=[Tracing(provider)]) as consumer:
        worker = consumer.worker(poll_s=0.05)
        await asyncio.wait_for(worker.run(until=lambda w: w.completed >= 1), 20)
        assert await consumer.run(enqueued_flow, 41, run_id="claimed") == 42
    finished = exporter.get_finished_spans()
    (execution,) = by_name(finished, "resumable.run traced.enqueued")
    assert execution.context.trace_id == request.get_span_context().trace_id
    assert parent_id(execution) == request.get_span_context().span_id
    (step_span,) = by_name(finished, "resumable.step")
    assert parent_id(step_span) == execution.context.span_id


async def test_a_real_worker_process_continues_the_enqueuers_trace(
    tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    """`resumable worker --traces` in its own process; its spans go to a file."""
    provider, _ = spans
    url = f"sqlite:///{tmp_path / 'worker.db'}"
    exported, out = tmp_path / "spans.jsonl", tmp_path / "worker.out"
    async with Engine(url, observers=[Tracing(provider)]) as producer:
        with provider.get_tracer("app").start_as_current_span(
            "http request"
        ) as request:
            await producer.enqueue(traced_worker_flow, WORKER_STEPS, run_id="far")
        with out.open("wb") as sink:
            worker = subprocess.Popen(
                [
                    *(sys.executable, "-m", "resumable.cli", "worker", "--store", url),
                    *("--app", "traced_worker_app", "--traces", "--concurrency", "1"),
                ],
                env={
                    **os.environ,
                    "TRACED_SPANS": str(exported),
                    "PYTHONPATH": str(Path(__file__).parent),
                },
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        try:
            deadline = time.monotonic() + 60
            while (await producer.store.get_run("far")).status != "succeeded":  # type: ignore[union-attr]  # enqueued above
                assert worker.poll() is None, out.read_text()
                assert time.monotonic() < deadline, out.read_text()
                await asyncio.sleep(0.05)
        finally:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=30) == 0, out.read_text()
    found = [json.loads(line) for line in exported.read_text().splitlines()]
    (execution,) = [s for s in found if s["name"] == "resumable.run traced.worker"]
    context = request.get_span_context()
    assert execution["trace_id"] == f"{context.trace_id:032x}"
    assert execution["parent_id"] == f"{context.span_id:016x}"
    assert execution["attributes"]["resumable.run_id"] == "far"
    assert execution["attributes"]["resumable.outcome"] == "succeeded"
    steps = [s for s in found if s["name"] == "resumable.step traced_part"]
    assert sorted(s["attributes"]["resumable.seq"] for s in steps) == list(
        range(1, WORKER_STEPS + 1)
    )
    assert all(s["parent_id"] == execution["span_id"] for s in steps)
    assert {s["trace_id"] for s in steps} == {execution["trace_id"]}


FLAKY_ONCE = {"calls": 0}


@step(retry=Retry(attempts=2, initial_delay=0.01, jitter=0.0))
async def flaky_once(x: int) -> str:
    FLAKY_ONCE["calls"] += 1
    if FLAKY_ONCE["calls"] == 1:
        raise RuntimeError("a transient failure")
    return "y" * x


@workflow(name="traced.attempts")
async def attempts_flow(x: int) -> str:
    return await flaky_once(x)


async def test_each_attempt_span_carries_its_step_commit_and_retry_attributes(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    FLAKY_ONCE["calls"] = 0
    async with Engine("memory://", observers=[Tracing(provider)]) as engine:
        assert await engine.run(attempts_flow, 500, run_id="attempts") == "y" * 500
        (record,) = await engine.store.load_journal("attempts")
    first, second = sorted(
        by_name(exporter.get_finished_spans(), "resumable.step flaky_once"),
        key=lambda span: span.start_time or 0,
    )
    assert first.attributes is not None
    assert second.attributes is not None
    for attempt, span in enumerate((first, second), start=1):
        assert span.attributes is not None
        assert span.attributes["resumable.seq"] == 1
        assert span.attributes["resumable.step"] == "flaky_once"
        assert span.attributes["resumable.attempt"] == attempt
        assert span.attributes["resumable.idempotency_key"] == "attempts:1"
        assert span.attributes["resumable.checkpoint.duration_ms"] >= 0  # type: ignore[operator]
    # the failed attempt's record was committed too, then retried after its delay
    assert first.attributes["resumable.checkpoint.bytes"] > 0  # type: ignore[operator]
    assert first.attributes["resumable.retry_delay_s"] == pytest.approx(0.01)
    assert first.attributes["error.type"] == "RuntimeError"
    assert first.status.status_code is StatusCode.ERROR
    assert any(e.name == "exception" for e in first.events)
    assert second.attributes["resumable.checkpoint.bytes"] == len(
        record.output or b""
    ) + len(record.usage or b"")
    assert "resumable.retry_delay_s" not in second.attributes
    assert "error.type" not in second.attributes
    assert second.status.status_code is StatusCode.UNSET


@workflow(name="traced.child")
async def child_flow(x: int) -> int:
    return await enqueued_step(x * 10)


@workflow(name="traced.parent")
async def parent_flow(x: int) -> int:
    return await child_flow(x) + await enqueued_step(x)


async def test_a_child_runs_span_is_a_child_of_the_calling_steps_span(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    async with Engine("memory://", observers=[Tracing(provider)]) as engine:
        assert await engine.run(parent_flow, 2, run_id="parent") == 24
    finished = exporter.get_finished_spans()
    (parent,) = by_name(finished, "resumable.run traced.parent")
    (call,) = by_name(finished, "resumable.child")
    (child,) = by_name(finished, "resumable.run traced.child")
    assert parent_id(call) == parent.context.span_id
    assert parent_id(child) == call.context.span_id
    assert child.attributes is not None
    assert child.attributes["resumable.run_id"] == "parent/1"
    assert {s.context.trace_id for s in finished} == {parent.context.trace_id}


FLAKY = {"fail": True}


@step
async def ask(base_url: str, question: str) -> openai.types.chat.ChatCompletion:
    async with openai.AsyncOpenAI(
        base_url=f"{base_url}/v1", api_key="sk-test", max_retries=0
    ) as client:
        return await client.chat.completions.create(
            model="gpt-5-mini", messages=[{"role": "user", "content": question}]
        )


@step
async def then_fail(answer: str) -> str:
    if FLAKY["fail"]:
        raise RuntimeError("the downstream service is down")
    return answer.upper()


@workflow(name="traced.llm")
async def llm_flow(base_url: str) -> str:
    reply = await ask(base_url, "What is durable execution?")
    return await then_fail(reply.choices[0].message.content or "")


async def test_an_llm_call_span_carries_gen_ai_attributes_and_a_replay_reuses_them(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    with SimulatedProvider() as llm:
        async with Engine("memory://", observers=[Tracing(provider)]) as engine:
            FLAKY["fail"] = True
            with pytest.raises(WorkflowFailed):
                await engine.run(llm_flow, llm.base_url, run_id="llm")
            FLAKY["fail"] = False
            await engine.run(llm_flow, llm.base_url, run_id="llm")
            ledger = await engine.ledger("llm")
        (logged,) = llm.requests()
    finished = exporter.get_finished_spans()
    (ask_span,) = by_name(finished, "resumable.step ask")
    attributes = ask_span.attributes
    assert attributes is not None
    assert attributes["gen_ai.system"] == "openai"
    assert str(attributes["gen_ai.request.model"]).startswith("gpt-5-mini")
    assert logged.usage is not None
    assert attributes["gen_ai.usage.input_tokens"] == logged.usage.input_tokens
    assert attributes["gen_ai.usage.output_tokens"] == logged.usage.output_tokens
    assert attributes["resumable.cost_usd"] > 0  # type: ignore[operator]
    assert attributes["resumable.replayed"] is False
    first, second = by_name(finished, "resumable.run traced.llm")
    assert first.status.status_code is StatusCode.ERROR
    failed = by_name(finished, "resumable.step then_fail")[0]
    assert failed.attributes is not None
    assert failed.attributes["resumable.error_class"] == "StepFailed"
    assert failed.attributes["error.type"] == "RuntimeError"
    assert any(e.name == "exception" for e in failed.events)
    assert second.attributes is not None
    assert second.attributes["resumable.replayed_steps"] == 1
    assert second.attributes["resumable.reused.output_tokens"] == (
        logged.usage.output_tokens
    )
    assert ledger.incurred.calls == 1  # the call was made once, then reused


async def test_a_forks_first_execution_links_to_its_sources_last_execution(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    async with Engine("memory://", observers=[Tracing(provider)]) as engine:
        assert await engine.run(parent_flow, 2, run_id="fork-source") == 24
        fork_id = await engine.fork("fork-source", at_step=1, run_id="fork-copy")
        assert await engine.resume(fork_id) == 24
    finished = exporter.get_finished_spans()
    source, fork = (
        span
        for span in by_name(finished, "resumable.run traced.parent")
        if span.attributes is not None
        and span.attributes["resumable.run_id"] in ("fork-source", "fork-copy")
    )
    assert source.attributes is not None
    assert source.attributes["resumable.run_id"] == "fork-source"
    assert fork.attributes is not None
    assert fork.attributes["resumable.execution"] == 1
    assert fork.attributes["resumable.replayed_steps"] == 1  # the shared child call
    (link,) = fork.links
    assert link.context.span_id == source.context.span_id
    assert link.context.trace_id == source.context.trace_id
    assert link.attributes == {"resumable.link": "fork source execution"}


@step
async def ask_claude(base_url: str, question: str) -> anthropic.types.Message:
    async with anthropic.AsyncAnthropic(
        base_url=base_url, api_key="x", max_retries=0
    ) as client:
        return await client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=64,
            messages=[{"role": "user", "content": question}],
        )


@workflow(name="traced.claude")
async def claude_flow(base_url: str) -> str:
    reply = await ask_claude(base_url, "What is durable execution?")
    return "".join(block.text for block in reply.content if block.type == "text")


async def test_an_anthropic_call_span_carries_gen_ai_attributes(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """The real anthropic SDK against the simulator's messages API."""
    provider, exporter = spans
    with SimulatedProvider() as llm:
        async with Engine("memory://", observers=[Tracing(provider)]) as engine:
            assert await engine.run(claude_flow, llm.base_url, run_id="claude")
            spent = (await engine.ledger("claude")).incurred
        (logged,) = llm.requests()
    assert logged.api == "messages"
    (ask_span,) = by_name(exporter.get_finished_spans(), "resumable.step ask_claude")
    attributes = ask_span.attributes
    assert attributes is not None
    assert attributes["gen_ai.system"] == "anthropic"
    assert str(attributes["gen_ai.request.model"]).startswith("claude-haiku-4-5")
    assert logged.usage is not None
    assert spent.calls == 1
    assert logged.usage.input_tokens > 0
    assert attributes["gen_ai.usage.input_tokens"] == (
        spent.input_tokens + spent.cached_input_tokens + spent.cache_write_tokens
    )
    assert spent.input_tokens == logged.usage.input_tokens
    assert attributes["gen_ai.usage.output_tokens"] == logged.usage.output_tokens
    assert attributes["resumable.cost_usd"] == pytest.approx(spent.cost_usd)
    assert spent.cost_usd > 0
    assert attributes["resumable.replayed"] is False


def test_without_observers_nothing_of_opentelemetry_or_prometheus_is_imported(
    tmp_path: Path,
) -> None:
    code = (
        "import sys, asyncio\n"
        "from resumable import Engine, Retry, step, workflow\n"
        "import resumable.cli\n"
        "@step\nasync def s(x): return x\n"
        "@workflow\nasync def w(x): return await s(x)\n"
        f"engine = Engine('sqlite:///{tmp_path / 'plain.db'}')\n"
        "assert engine._runtime.observer is None\n"
        "assert asyncio.run(engine.run(w, 3)) == 3\n"
        "loaded = [m for m in sys.modules if m.startswith(('opentelemetry', "
        "'prometheus_client'))]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@step
async def streamed_words(n: int) -> AsyncIterator[str]:
    for i in range(n):
        yield f"w{i} "


@workflow
async def streaming_flow(n: int) -> str:
    await resumable.publish("phase", "streaming")
    return await streamed_words(n)


async def test_feed_writes_are_events_on_the_step_span_or_the_execution_span(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    async with Engine("memory://", observers=[Tracing(provider)]) as engine:
        await engine.run(streaming_flow, 5, run_id="streams")
    finished = exporter.get_finished_spans()
    (step_span,) = by_name(finished, "resumable.step streamed_words")
    kinds = [
        (event.attributes or {}).get("resumable.feed.kind")
        for event in step_span.events
        if event.name == "resumable.feed"
    ]
    assert kinds[0] == "attempt"
    assert set(kinds[1:]) == {"chunk"}
    (run_span,) = by_name(finished, "resumable.run")
    assert [
        (event.attributes or {}).get("resumable.feed.kind")
        for event in run_span.events
        if event.name == "resumable.feed"
    ] == ["event"]
