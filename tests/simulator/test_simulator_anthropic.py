from __future__ import annotations

import math
from collections.abc import Iterator

import anthropic
import pytest

from resumable.simulator import Fault, FaultPlan, SimulatedProvider

MODEL = "claude-simulated"
PROMPT = "Summarize the annual sustainability report of Globex"


@pytest.fixture
def provider() -> Iterator[SimulatedProvider]:
    with SimulatedProvider() as provider:
        yield provider


@pytest.fixture
def client(provider: SimulatedProvider) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(
        base_url=provider.anthropic_base_url, api_key="x", max_retries=0
    ) as client:
        yield client


def ask(client: anthropic.Anthropic, text: str) -> anthropic.types.Message:
    return client.messages.create(
        model=MODEL, max_tokens=1024, messages=[{"role": "user", "content": text}]
    )


def text_of(message: anthropic.types.Message) -> str:
    block = message.content[0]
    assert block.type == "text"
    return block.text


def test_messages_parse_with_deterministic_text_and_usage(
    client: anthropic.Anthropic,
) -> None:
    first, second = ask(client, PROMPT), ask(client, PROMPT)

    assert first.type == "message"
    assert first.role == "assistant"
    assert first.model == MODEL
    assert first.stop_reason == "end_turn"
    assert "annual" in text_of(first)
    assert text_of(first) == text_of(second)
    assert first.usage == second.usage
    assert first.usage.input_tokens == math.ceil(len(PROMPT) / 4)
    assert first.usage.output_tokens == math.ceil(len(text_of(first)) / 4)
    assert first.usage.cache_read_input_tokens == 0
    assert first.usage.cache_creation_input_tokens == 0
    assert text_of(ask(client, "Something else entirely")) != text_of(first)


def test_system_prompt_counts_as_input(client: anthropic.Anthropic) -> None:
    system = "Answer in one line."
    message = client.messages.create(
        model=MODEL,
        max_tokens=1024,
        system=system,
        messages=[{"role": "user", "content": PROMPT}],
    )

    assert message.usage.input_tokens == math.ceil(len(system) / 4) + math.ceil(
        len(PROMPT) / 4
    )


def test_small_max_tokens_stops_with_max_tokens(client: anthropic.Anthropic) -> None:
    message = client.messages.create(
        model=MODEL, max_tokens=4, messages=[{"role": "user", "content": PROMPT}]
    )

    assert message.stop_reason == "max_tokens"
    assert message.usage.output_tokens == 4


def test_streamed_message_matches_the_plain_one(client: anthropic.Anthropic) -> None:
    plain = ask(client, PROMPT)
    with client.messages.stream(
        model=MODEL, max_tokens=1024, messages=[{"role": "user", "content": PROMPT}]
    ) as stream:
        streamed_text = "".join(stream.text_stream)
        final = stream.get_final_message()

    assert streamed_text == text_of(plain)
    assert text_of(final) == text_of(plain)
    assert final.usage.output_tokens == plain.usage.output_tokens


def test_weather_question_with_tools_gets_tool_use_then_text(
    client: anthropic.Anthropic,
) -> None:
    tools: list[anthropic.types.ToolParam] = [
        {
            "name": "get_weather",
            "input_schema": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
            },
        }
    ]
    question: anthropic.types.MessageParam = {
        "role": "user",
        "content": "What's the weather in Oslo?",
    }
    message = client.messages.create(
        model=MODEL, max_tokens=1024, tools=tools, messages=[question]
    )

    block = message.content[0]
    assert message.stop_reason == "tool_use"
    assert block.type == "tool_use"
    assert block.name == "get_weather"
    assert block.input == {"city": "Oslo"}

    answer = client.messages.create(
        model=MODEL,
        max_tokens=1024,
        tools=tools,
        messages=[
            question,
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": block.id,
                        "name": block.name,
                        "input": block.input,
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": block.id,
                        "content": "snow, -4C",
                    }
                ],
            },
        ],
    )

    assert answer.stop_reason == "end_turn"
    assert "snow, -4C" in text_of(answer)


def test_answers_carry_a_request_id_header(client: anthropic.Anthropic) -> None:
    raw = client.messages.with_raw_response.create(
        model=MODEL, max_tokens=64, messages=[{"role": "user", "content": PROMPT}]
    )

    assert raw.headers["request-id"].startswith("req_")
    assert raw.headers["content-type"] == "application/json"


def test_scheduled_429_raises_rate_limit_error_with_retry_headers(
    provider: SimulatedProvider, client: anthropic.Anthropic
) -> None:
    provider.set_faults(
        FaultPlan(
            schedule={1: Fault(kind="rate_limit", retry_after_s=7, retry_after_ms=6500)}
        )
    )

    with pytest.raises(anthropic.RateLimitError) as caught:
        ask(client, PROMPT)

    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.response.headers["retry-after-ms"] == "6500"
    assert caught.value.body == {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "Rate limit reached for requests (simulated). Please try again later.",
        },
        "request_id": caught.value.response.headers["request-id"],
    }
    assert text_of(ask(client, PROMPT))  # request 2 is not scheduled


def test_overloaded_fault_raises_overloaded_error_with_status_529(
    provider: SimulatedProvider, client: anthropic.Anthropic
) -> None:
    provider.set_faults(FaultPlan(schedule={1: Fault(kind="overloaded")}))

    with pytest.raises(anthropic.OverloadedError) as caught:
        ask(client, PROMPT)

    assert caught.value.status_code == 529
    assert provider.count(status=529) == 1


def test_server_error_raises_internal_server_error(
    provider: SimulatedProvider, client: anthropic.Anthropic
) -> None:
    provider.set_faults(FaultPlan(schedule={1: Fault(kind="server_error")}))

    with pytest.raises(anthropic.InternalServerError) as caught:
        ask(client, PROMPT)

    assert caught.value.status_code == 500
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["error"]["type"] == "api_error"


def test_disconnect_raises_api_connection_error(
    provider: SimulatedProvider, client: anthropic.Anthropic
) -> None:
    provider.set_faults(FaultPlan(schedule={1: Fault(kind="disconnect")}))

    with pytest.raises(anthropic.APIConnectionError):
        ask(client, PROMPT)

    assert text_of(ask(client, PROMPT))


def test_sdk_retries_honour_retry_after_and_then_succeed(
    provider: SimulatedProvider,
) -> None:
    provider.set_faults(
        FaultPlan(
            schedule={n: Fault(kind="overloaded", retry_after_ms=10) for n in (1, 2)}
        )
    )
    with anthropic.Anthropic(
        base_url=provider.anthropic_base_url, api_key="x", max_retries=2
    ) as client:
        message = ask(client, PROMPT)

    assert text_of(message)
    assert [entry.status for entry in provider.requests()] == [529, 529, 200]
