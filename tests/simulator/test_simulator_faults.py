from __future__ import annotations

import time
from collections.abc import Iterator

import openai
import pytest

from resumable.simulator import Fault, FaultPlan, FaultRule, SimulatedProvider
from resumable.simulator.faults import FaultInjector

MODEL = "gpt-4o-mini"


@pytest.fixture
def provider() -> Iterator[SimulatedProvider]:
    with SimulatedProvider() as provider:
        yield provider


@pytest.fixture
def client(provider: SimulatedProvider) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    ) as client:
        yield client


def ask(client: openai.OpenAI, text: str = "Summarize the report") -> str:
    completion = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": text}]
    )
    return completion.choices[0].message.content or ""


def outcomes(client: openai.OpenAI, n: int) -> list[str]:
    """What each of n calls ended as: "ok" or the SDK's error class name."""
    results = []
    for i in range(n):
        try:
            ask(client, f"prompt {i}")
            results.append("ok")
        except openai.APIError as exc:
            results.append(type(exc).__name__)
    return results


def test_scheduled_429_raises_rate_limit_error_with_configured_retry_headers(
    provider: SimulatedProvider, client: openai.OpenAI
) -> None:
    provider.set_faults(
        FaultPlan(
            schedule={3: Fault(kind="rate_limit", retry_after_s=2, retry_after_ms=1500)}
        )
    )

    ask(client)
    ask(client)
    with pytest.raises(openai.RateLimitError) as caught:
        ask(client)

    headers = caught.value.response.headers
    assert headers["retry-after"] == "2"
    assert headers["retry-after-ms"] == "1500"
    assert headers["content-type"] == "application/json"
    assert headers["x-request-id"].startswith("req_")
    assert caught.value.body == {
        "message": "Rate limit reached for requests (simulated). Please try again later.",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
    assert caught.value.code == "rate_limit_exceeded"
    assert ask(client)


def test_server_error_raises_internal_server_error(
    provider: SimulatedProvider, client: openai.OpenAI
) -> None:
    provider.set_faults(
        FaultPlan(schedule={1: Fault(kind="server_error", message="boom")})
    )

    with pytest.raises(openai.InternalServerError, match="boom") as caught:
        ask(client)

    assert caught.value.status_code == 500
    assert caught.value.type == "server_error"


def test_overloaded_on_the_openai_api_is_a_503(
    provider: SimulatedProvider, client: openai.OpenAI
) -> None:
    provider.set_faults(FaultPlan(schedule={1: Fault(kind="overloaded")}))

    with pytest.raises(openai.InternalServerError) as caught:
        ask(client)

    assert caught.value.status_code == 503


def test_status_override_and_should_retry_header(
    provider: SimulatedProvider, client: openai.OpenAI
) -> None:
    provider.set_faults(
        FaultPlan(
            schedule={1: Fault(kind="server_error", status=502, should_retry=False)}
        )
    )

    with pytest.raises(openai.InternalServerError) as caught:
        ask(client)

    assert caught.value.status_code == 502
    assert caught.value.response.headers["x-should-retry"] == "false"


def test_timeout_raises_api_timeout_error(provider: SimulatedProvider) -> None:
    provider.set_faults(FaultPlan(schedule={1: Fault(kind="timeout", delay_s=5.0)}))
    with openai.OpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0, timeout=0.2
    ) as client:
        started = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            ask(client)
        assert time.monotonic() - started < 2.0
        assert ask(client)  # the stalled handler does not block other requests

    (timed_out, answered) = provider.requests()
    assert (timed_out.fault, timed_out.status, timed_out.usage) == (
        "timeout",
        None,
        None,
    )
    assert (answered.fault, answered.status) == (None, 200)


def test_disconnect_raises_api_connection_error(
    provider: SimulatedProvider, client: openai.OpenAI
) -> None:
    ask(client)  # a pooled keep-alive connection the fault then drops
    provider.set_faults(FaultPlan(schedule={1: Fault(kind="disconnect")}))

    with pytest.raises(openai.APIConnectionError):
        ask(client)

    assert ask(client)
    assert [e.fault for e in provider.requests()] == [None, "disconnect", None]


def test_rule_fails_the_first_n_matching_prompts_then_lets_them_through(
    provider: SimulatedProvider, client: openai.OpenAI
) -> None:
    rule = FaultRule(fault=Fault(kind="rate_limit"), prompt_contains="doc-3", times=2)
    provider.set_faults(FaultPlan(rules=[rule]))

    assert ask(client, "summarize doc-1")
    for _ in range(2):
        with pytest.raises(openai.RateLimitError):
            ask(client, "summarize doc-3")
    assert ask(client, "summarize doc-3")
    assert ask(client, "summarize doc-2")

    assert provider.count("doc-3") == 1
    assert provider.count("doc-3", status=429) == 2
    assert provider.count("doc-3", status=None) == 3


def test_rule_skip_fires_on_a_later_match_and_api_filter_limits_it(
    provider: SimulatedProvider, client: openai.OpenAI
) -> None:
    provider.set_faults(
        FaultPlan(
            rules=[
                FaultRule(fault=Fault(kind="server_error"), skip=1, times=1),
                FaultRule(fault=Fault(kind="rate_limit"), api="messages"),
            ]
        )
    )

    assert outcomes(client, 3) == ["ok", "InternalServerError", "ok"]


def test_probability_faults_are_reproducible_with_the_same_seed(
    provider: SimulatedProvider, client: openai.OpenAI
) -> None:
    plan = FaultPlan(rate_limit_p=0.3, server_error_p=0.2, seed=42)
    provider.set_faults(plan)
    first = outcomes(client, 20)
    provider.set_faults(plan)  # a fresh plan numbers requests from 1 again
    second = outcomes(client, 20)

    assert first == second
    assert {"ok", "RateLimitError", "InternalServerError"} == set(first)


def test_different_seeds_fail_different_requests() -> None:
    def failing(seed: int) -> list[int]:
        injector = FaultInjector(FaultPlan(rate_limit_p=0.5, seed=seed))
        return [
            n for n in range(1, 41) if injector.next_fault(api="chat", prompt_text="x")
        ]

    assert failing(1) == failing(1)
    assert failing(1) != failing(2)
    assert 8 < len(failing(1)) < 32


def test_probabilistic_rate_limit_carries_the_plan_retry_after(
    provider: SimulatedProvider, client: openai.OpenAI
) -> None:
    provider.set_faults(
        FaultPlan(rate_limit_p=1.0, retry_after_s=None, retry_after_ms=250)
    )

    with pytest.raises(openai.RateLimitError) as caught:
        ask(client)

    assert "retry-after" not in caught.value.response.headers
    assert caught.value.response.headers["retry-after-ms"] == "250"


def test_sdk_retries_honour_retry_after_ms_and_then_succeed(
    provider: SimulatedProvider,
) -> None:
    provider.set_faults(
        FaultPlan(schedule={1: Fault(kind="rate_limit", retry_after_ms=20)})
    )
    with openai.OpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=1
    ) as client:
        assert ask(client)

    assert [entry.status for entry in provider.requests()] == [429, 200]


def test_latency_delays_every_answer(
    provider: SimulatedProvider, client: openai.OpenAI
) -> None:
    provider.set_latency(0.15)
    started = time.monotonic()
    ask(client)

    assert time.monotonic() - started >= 0.15


def test_fault_plan_from_dict_reads_json_like_data() -> None:
    plan = FaultPlan.from_dict(
        {
            "schedule": {"2": {"kind": "rate_limit", "retry_after_s": 3}},
            "rules": [
                {
                    "fault": {"kind": "timeout", "delay_s": 1},
                    "prompt_contains": "x",
                    "times": 1,
                }
            ],
            "disconnect_p": 0.1,
            "seed": 9,
        }
    )

    assert plan.schedule == {2: Fault(kind="rate_limit", retry_after_s=3)}
    assert plan.rules == (
        FaultRule(fault=Fault(kind="timeout", delay_s=1), prompt_contains="x", times=1),
    )
    assert (plan.disconnect_p, plan.seed) == (0.1, 9)


@pytest.mark.parametrize(
    "bad",
    [
        {"rate_limit_p": 0.7, "server_error_p": 0.7},
        {"timeout_p": -0.1},
        {"typo_p": 0.1},
        {"schedule": {"0": {"kind": "rate_limit"}}},
    ],
)
def test_fault_plan_rejects_impossible_settings(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"."):
        FaultPlan.from_dict(bad)


def test_fault_rejects_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown fault kind"):
        Fault(kind="meteor")  # type: ignore[arg-type]  # the point of the test
