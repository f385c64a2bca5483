"""Retries that know LLM errors: `Retry.llm()` and the default `on=`, pure and
against the simulated provider with the real openai and anthropic SDKs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from resumable import Engine, Retry, StepFailed, WorkflowFailed, step, workflow
from resumable._engine.retry import is_permanent, is_transient, next_delay
from resumable.simulator import Fault, FaultPlan, SimulatedProvider
from resumable.testing import FakeClock

TRANSIENT = [408, 409, 429, 500, 502, 503, 504, 529]
PERMANENT = [400, 401, 403, 404, 422]


def anthropic_error(status: int, headers: dict[str, str] | None = None) -> Exception:
    """An anthropic SDK status error on a real httpx2 response (the SDK's own HTTP library) of `status`."""
    request = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")
    response = httpx2.Response(status, headers=headers or {}, request=request)
    kind = anthropic.OverloadedError if status == 529 else anthropic.APIStatusError
    return kind(f"HTTP {status}", response=response, body=None)


@pytest.mark.parametrize("status", TRANSIENT)
def test_transient_statuses_of_the_anthropic_sdk_are_retried(status: int) -> None:
    error = anthropic_error(status)
    assert is_transient(error)
    assert not is_permanent(error)
    assert next_delay(Retry.llm(jitter=0), 1, error, lambda: 0.5) == 1.0


@pytest.mark.parametrize("status", PERMANENT)
def test_permanent_statuses_fail_at_once_under_llm_and_the_default(status: int) -> None:
    error = anthropic_error(status)
    assert is_permanent(error)
    assert not is_transient(error)
    assert next_delay(Retry.llm(), 1, error, lambda: 0.5) is None
    assert next_delay(Retry(), 1, error, lambda: 0.5) is None


def test_the_servers_should_retry_header_wins_over_the_status() -> None:
    assert is_transient(anthropic_error(400, {"x-should-retry": "true"}))
    assert is_permanent(anthropic_error(503, {"x-should-retry": "false"}))


def test_sdk_timeouts_and_connection_errors_are_transient() -> None:
    request = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")
    assert is_transient(anthropic.APITimeoutError(request=request))
    assert is_transient(anthropic.APIConnectionError(request=request))
    assert is_transient(TimeoutError())
    assert is_transient(ConnectionResetError())


def test_llm_retries_no_error_of_the_steps_own_code_but_the_default_does() -> None:
    assert next_delay(Retry.llm(), 1, ValueError("bad json"), lambda: 0.5) is None
    assert next_delay(Retry(jitter=0), 1, ValueError("bad json"), lambda: 0.5) == 1.0


def test_retry_after_is_honoured_and_capped_by_max_delay() -> None:
    policy = Retry.llm(max_delay=10)
    assert (
        next_delay(policy, 1, anthropic_error(429, {"retry-after": "3"}), lambda: 0)
        == 3
    )
    ms = anthropic_error(429, {"retry-after": "3", "retry-after-ms": "250"})
    assert next_delay(policy, 1, ms, lambda: 0) == 0.25
    long = anthropic_error(429, {"retry-after": "120"})
    assert next_delay(policy, 1, long, lambda: 0) == 10


def test_llm_schedule_backs_off_then_stops_after_its_attempts() -> None:
    policy = Retry.llm(attempts=4, initial_delay=1, max_delay=3, jitter=0)
    error = anthropic_error(503)
    delays = [next_delay(policy, n, error, lambda: 0.5) for n in range(1, 5)]
    assert delays == [1, 2, 3, None]


def test_on_refuses_what_is_neither_types_nor_a_predicate() -> None:
    with pytest.raises(ValueError, match=r"on=\(TimeoutError,\)"):
        Retry(on=("TimeoutError",))  # type: ignore[arg-type]  # the mistake under test


# --- the README's example, against the simulated provider ----------------------


@pytest.fixture
def provider() -> Iterator[SimulatedProvider]:
    with SimulatedProvider() as provider:
        yield provider


def test_the_readme_example_is_the_policy_tested_here() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text("utf-8")
    assert "@step(retry=Retry.llm(attempts=5))" in readme


@pytest.fixture
async def readme_flow(
    provider: SimulatedProvider,
) -> AsyncIterator[Callable[[list[str]], Coroutine[Any, Any, list[str]]]]:
    """The README's first example, its LLM call made with the real openai SDK."""
    client = openai.AsyncOpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    )

    @step(retry=Retry.llm(attempts=5))
    async def summarize(doc: str) -> str:
        r = await client.chat.completions.create(
            model="gpt-5-mini", messages=[{"role": "user", "content": doc}]
        )
        return r.choices[0].message.content or ""

    @workflow
    async def analyze(docs: list[str]) -> list[str]:
        return [await summarize(d) for d in docs]

    yield analyze
    await client.close()


async def test_readme_example_retries_a_429_after_its_retry_after(
    provider: SimulatedProvider,
    readme_flow: Callable[[list[str]], Coroutine[Any, Any, list[str]]],
) -> None:
    provider.set_faults(
        FaultPlan(schedule={1: Fault(kind="rate_limit", retry_after_ms=300)})
    )
    analyze = readme_flow
    async with Engine("memory://") as engine:
        result = await engine.run(analyze, ["doc one"], run_id="r429")
    assert result[0]
    first, second = provider.requests()
    assert (first.status, second.status) == (429, 200)
    assert second.at - first.at >= 0.3


async def test_readme_example_retries_a_503_and_anthropics_529(
    provider: SimulatedProvider,
    readme_flow: Callable[[list[str]], Coroutine[Any, Any, list[str]]],
) -> None:
    provider.set_faults(
        FaultPlan(
            schedule={
                1: Fault(kind="overloaded", retry_after_ms=0),
                3: Fault(kind="overloaded", retry_after_ms=250),
            }
        )
    )
    analyze = readme_flow
    async with Engine("memory://") as engine:
        await engine.run(analyze, ["doc one"], run_id="r503")
    assert [r.status for r in provider.requests()] == [503, 200]

    client = anthropic.AsyncAnthropic(
        base_url=provider.anthropic_base_url, api_key="x", max_retries=0
    )

    @step(retry=Retry.llm(attempts=5))
    async def ask_claude(doc: str) -> str:
        message = await client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=64,
            messages=[{"role": "user", "content": doc}],
        )
        block = message.content[0]
        return block.text if block.type == "text" else ""

    @workflow
    async def claude_flow(doc: str) -> str:
        return await ask_claude(doc)

    clock = FakeClock()
    async with Engine("memory://", clock=clock) as engine:
        assert await engine.run(claude_flow, "doc two", run_id="r529")
    assert [r.status for r in provider.requests()][2:] == [529, 200]
    assert clock.sleeps == [0.25]  # the 529's retry-after-ms, read by the real SDK
    await client.close()


async def test_readme_example_fails_at_once_on_a_401_from_either_sdk(
    provider: SimulatedProvider,
    readme_flow: Callable[[list[str]], Coroutine[Any, Any, list[str]]],
) -> None:
    provider.set_faults(
        FaultPlan(
            schedule={
                1: Fault(kind="server_error", status=401, message="Incorrect API key")
            }
        )
    )
    analyze = readme_flow
    async with Engine("memory://") as engine:
        with pytest.raises(WorkflowFailed) as caught:
            await engine.run(analyze, ["doc one"], run_id="r401")
    assert isinstance(caught.value.__cause__, StepFailed)
    assert caught.value.__cause__.attempts == 1
    assert caught.value.__cause__.error_type == "AuthenticationError"
    assert [r.status for r in provider.requests()] == [401]

    provider.set_faults(FaultPlan(schedule={1: Fault(kind="server_error", status=401)}))
    client = anthropic.AsyncAnthropic(
        base_url=provider.anthropic_base_url, api_key="x", max_retries=0
    )

    @step(retry=Retry.llm(attempts=5))
    async def ask_claude() -> str:
        await client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=64,
            messages=[{"role": "user", "content": "hi"}],
        )
        return "answered"

    @workflow
    async def claude_flow() -> str:
        return await ask_claude()

    async with Engine("memory://") as engine:
        with pytest.raises(WorkflowFailed) as caught:
            await engine.run(claude_flow, run_id="a401")
    assert isinstance(caught.value.__cause__, StepFailed)
    assert caught.value.__cause__.attempts == 1
    assert [r.status for r in provider.requests()] == [401, 401]
    await client.close()
