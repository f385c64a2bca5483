from __future__ import annotations

import asyncio
import http.client
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionToolParam

from resumable.simulator import SimulatedProvider

MODEL = "gpt-4o-mini"
PROMPT = "Summarize the quarterly revenue report for Acme Corporation"
WEATHER_TOOL: ChatCompletionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


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


def ask(
    client: openai.OpenAI, text: str, max_tokens: int | None = None
) -> ChatCompletion:
    return client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": text}], max_tokens=max_tokens
    )


def test_chat_completion_parses_with_text_and_usage(client: openai.OpenAI) -> None:
    completion = ask(client, PROMPT)

    choice = completion.choices[0]
    assert completion.object == "chat.completion"
    assert completion.model == MODEL
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert choice.message.content
    assert "quarterly" in choice.message.content
    usage = completion.usage
    assert usage is not None
    assert usage.prompt_tokens == math.ceil(len(PROMPT) / 4)
    assert usage.completion_tokens == math.ceil(len(choice.message.content) / 4)
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == 0
    assert usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == 0


def test_same_prompt_gets_same_text_and_usage(client: openai.OpenAI) -> None:
    first, second = ask(client, PROMPT), ask(client, PROMPT)

    assert first.id != second.id
    assert first.choices[0].message.content == second.choices[0].message.content
    assert first.usage == second.usage


def test_different_prompts_get_different_text(client: openai.OpenAI) -> None:
    answers = {
        ask(client, f"Summarize document number {n}").choices[0].message.content
        for n in range(5)
    }

    assert len(answers) == 5


def test_input_tokens_count_every_message(client: openai.OpenAI) -> None:
    system = "You are a terse analyst."
    completion = client.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "system", "content": system},
            {"role": "user", "content": PROMPT},
        ],
    )

    assert completion.usage is not None
    assert completion.usage.prompt_tokens == math.ceil(len(system) / 4) + math.ceil(
        len(PROMPT) / 4
    )


def test_answers_are_the_same_in_another_process(client: openai.OpenAI) -> None:
    script = (
        "from resumable.simulator.prompts import parse_prompt\n"
        "from resumable.simulator.replies import make_reply\n"
        f"body = {{'model': 'm', 'messages': [{{'role': 'user', 'content': {PROMPT!r}}}]}}\n"
        "print(make_reply(parse_prompt('chat', body)).text)\n"
    )
    other = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )

    assert other.stdout.strip() == ask(client, PROMPT).choices[0].message.content


def test_max_tokens_cuts_the_answer_with_finish_reason_length(
    client: openai.OpenAI,
) -> None:
    completion = ask(client, PROMPT, max_tokens=3)

    assert completion.choices[0].finish_reason == "length"
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 3
    full = ask(client, PROMPT).choices[0].message.content or ""
    assert completion.choices[0].message.content == full[:12]


def test_weather_question_with_tools_gets_a_tool_call_then_text(
    client: openai.OpenAI,
) -> None:
    question = "What is the weather in Paris today?"
    first = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": question}],
        tools=[WEATHER_TOOL],
    )

    assert first.choices[0].finish_reason == "tool_calls"
    calls = first.choices[0].message.tool_calls
    assert calls is not None
    call = calls[0]
    assert call.type == "function"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}

    second = client.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "user", "content": question},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": "get_weather",
                            "arguments": call.function.arguments,
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21C"},
        ],
        tools=[WEATHER_TOOL],
    )

    assert second.choices[0].finish_reason == "stop"
    assert "sunny, 21C" in (second.choices[0].message.content or "")


def test_streamed_chat_matches_the_plain_answer(client: openai.OpenAI) -> None:
    plain = ask(client, PROMPT)
    pieces = []
    usage = None
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": PROMPT}],
        stream=True,
        stream_options={"include_usage": True},
    )
    with stream:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                pieces.append(chunk.choices[0].delta.content)
            usage = chunk.usage or usage

    assert "".join(pieces) == plain.choices[0].message.content
    assert usage == plain.usage


def test_responses_output_text_and_usage_are_deterministic(
    client: openai.OpenAI,
) -> None:
    first = client.responses.create(model=MODEL, input=PROMPT)
    second = client.responses.create(
        model=MODEL, input=[{"role": "user", "content": PROMPT}]
    )

    assert first.object == "response"
    assert first.status == "completed"
    assert first.output_text
    assert first.output_text == second.output_text
    assert first.usage is not None
    assert first.usage == second.usage
    assert first.usage.input_tokens == math.ceil(len(PROMPT) / 4)
    assert first.usage.output_tokens == math.ceil(len(first.output_text) / 4)
    assert first.usage.input_tokens_details.cached_tokens == 0
    assert first.usage.output_tokens_details.reasoning_tokens == 0
    assert (
        first.output_text
        != client.responses.create(
            model=MODEL, input="Another prompt entirely"
        ).output_text
    )


def test_the_same_prompt_gets_the_same_answer_on_chat_and_responses(
    client: openai.OpenAI,
) -> None:
    assert (
        client.responses.create(model=MODEL, input=PROMPT).output_text
        == ask(client, PROMPT).choices[0].message.content
    )


def test_responses_max_output_tokens_makes_an_incomplete_response(
    client: openai.OpenAI,
) -> None:
    response = client.responses.create(model=MODEL, input=PROMPT, max_output_tokens=16)

    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.usage is not None
    assert response.usage.output_tokens == 16


def test_streamed_responses_give_the_same_final_response(client: openai.OpenAI) -> None:
    plain = client.responses.create(model=MODEL, input=PROMPT)
    with client.responses.stream(model=MODEL, input=PROMPT) as stream:
        deltas = [
            event.delta
            for event in stream
            if event.type == "response.output_text.delta"
        ]
        final = stream.get_final_response()

    assert "".join(deltas) == plain.output_text
    assert final.output_text == plain.output_text
    assert final.usage == plain.usage


def test_responses_function_tool_gets_a_function_call(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model=MODEL,
        input="How is the weather in Berlin?",
        tools=[
            {
                "type": "function",
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                },
                "strict": False,
            }
        ],
    )

    item = response.output[0]
    assert item.type == "function_call"
    assert item.name == "get_weather"
    assert json.loads(item.arguments) == {"city": "Berlin"}


def test_every_answer_has_a_request_id_header(client: openai.OpenAI) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": PROMPT}]
    )

    assert raw.headers["content-type"] == "application/json"
    assert raw.headers["x-request-id"].startswith("req_")
    assert raw.parse().choices[0].message.content


def post(
    provider: SimulatedProvider, path: str, body: bytes
) -> tuple[int, dict[str, str], object]:
    connection = http.client.HTTPConnection("127.0.0.1", provider.port, timeout=5)
    try:
        connection.request(
            "POST", path, body=body, headers={"content-type": "application/json"}
        )
        response = connection.getresponse()
        payload = json.loads(response.read())
        return response.status, dict(response.getheaders()), payload
    finally:
        connection.close()


def test_unknown_path_is_a_404_json_error(provider: SimulatedProvider) -> None:
    status, headers, body = post(provider, "/v1/embeddings", b"{}")

    assert status == 404
    assert headers["content-type"] == "application/json"
    assert body == {
        "error": {
            "message": "Unknown request URL: POST /v1/embeddings (simulated provider)",
            "type": "invalid_request_error",
            "param": None,
            "code": "unknown_url",
        }
    }


def test_malformed_json_is_a_400_and_is_logged(provider: SimulatedProvider) -> None:
    status, headers, body = post(provider, "/v1/chat/completions", b"{not json")

    assert status == 400
    assert headers["x-request-id"].startswith("req_")
    assert isinstance(body, dict)
    assert body["error"]["type"] == "invalid_request_error"
    assert provider.count(status=400) == 1
    assert provider.count() == 0


def test_missing_messages_is_a_400_bad_request(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="messages"):
        client.chat.completions.create(model=MODEL, messages=[])


async def test_twenty_concurrent_async_calls_all_succeed(
    provider: SimulatedProvider,
) -> None:
    provider.set_latency(0.2)
    async with openai.AsyncOpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    ) as client:
        started = time.monotonic()
        completions = await asyncio.gather(
            *(
                client.chat.completions.create(
                    model=MODEL,
                    messages=[{"role": "user", "content": f"Summarize doc {n}"}],
                )
                for n in range(20)
            )
        )
        elapsed = time.monotonic() - started

    assert all(c.choices[0].message.content for c in completions)
    assert provider.count() == 20
    assert elapsed < 2.0  # served in parallel: one at a time would take 4 s


def test_structured_outputs_parse_into_the_requested_model(
    client: openai.OpenAI,
) -> None:
    from pydantic import BaseModel

    class Verdict(BaseModel):
        summary: str
        score: int
        is_final: bool

    chat = client.chat.completions.parse(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "judge the essay about coffee"}],
        response_format=Verdict,
    )
    verdict = chat.choices[0].message.parsed
    assert isinstance(verdict, Verdict)
    assert "coffee" in verdict.summary
    response = client.responses.parse(
        model="gpt-4o-mini", input="judge the essay about coffee", text_format=Verdict
    )
    assert response.output_parsed == verdict  # same conversation, same answer
