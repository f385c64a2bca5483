from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from anthropic.types import Message
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from resumable.simulator import SimulatedProvider
from resumable.usage import Usage, usage_from

OPENAI_MODEL = "gpt-4o-mini"
ANTHROPIC_MODEL = "claude-haiku-4-5"


@pytest.fixture(scope="module")
def provider() -> Iterator[SimulatedProvider]:
    with SimulatedProvider() as provider:
        yield provider


@pytest.fixture(scope="module")
def openai_client(provider: SimulatedProvider) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    ) as client:
        yield client


@pytest.fixture(scope="module")
def anthropic_client(provider: SimulatedProvider) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(
        base_url=provider.anthropic_base_url, api_key="x", max_retries=0
    ) as client:
        yield client


def chat(client: openai.OpenAI, text: str) -> ChatCompletion:
    return client.chat.completions.create(
        model=OPENAI_MODEL, messages=[{"role": "user", "content": text}]
    )


def respond(client: openai.OpenAI, text: str) -> Response:
    return client.responses.create(model=OPENAI_MODEL, input=text)


def message(client: anthropic.Anthropic, text: str) -> Message:
    return client.messages.create(
        model=ANTHROPIC_MODEL,
        max_tokens=256,
        messages=[{"role": "user", "content": text}],
    )


def logged_usage(provider: SimulatedProvider, *, model: str, vendor: str) -> Usage:
    """The usage the simulator says it reported for the last request."""
    logged = provider.requests()[-1].usage
    assert logged is not None
    return Usage(
        model=model,
        provider=vendor,
        input_tokens=logged.input_tokens,
        output_tokens=logged.output_tokens,
    )


# -- real SDK objects from the simulated provider ---------------------------------


def test_chat_completion_gives_the_usage_the_provider_reported(
    provider: SimulatedProvider, openai_client: openai.OpenAI
) -> None:
    completion = chat(openai_client, "Summarize the quarterly revenue report")

    assert usage_from(completion) == [
        logged_usage(provider, model=OPENAI_MODEL, vendor="openai")
    ]


def test_responses_call_gives_the_usage_the_provider_reported(
    provider: SimulatedProvider, openai_client: openai.OpenAI
) -> None:
    response = respond(openai_client, "Explain durable workflows in two lines")

    assert usage_from(response) == [
        logged_usage(provider, model=OPENAI_MODEL, vendor="openai")
    ]


def test_anthropic_message_gives_the_usage_the_provider_reported(
    provider: SimulatedProvider, anthropic_client: anthropic.Anthropic
) -> None:
    reply = message(anthropic_client, "Summarize the annual sustainability report")

    assert usage_from(reply) == [
        logged_usage(provider, model=ANTHROPIC_MODEL, vendor="anthropic")
    ]


def test_final_objects_of_streams_give_their_usage(
    provider: SimulatedProvider,
    openai_client: openai.OpenAI,
    anthropic_client: anthropic.Anthropic,
) -> None:
    with openai_client.chat.completions.stream(
        model=OPENAI_MODEL,
        messages=[{"role": "user", "content": "Stream the weekly digest"}],
        stream_options={"include_usage": True},
    ) as stream:
        parsed = stream.get_final_completion()
    assert usage_from(parsed) == [
        logged_usage(provider, model=OPENAI_MODEL, vendor="openai")
    ]

    with anthropic_client.messages.stream(
        model=ANTHROPIC_MODEL,
        max_tokens=256,
        messages=[{"role": "user", "content": "Stream the weekly digest"}],
    ) as stream_:
        final = stream_.get_final_message()
    assert usage_from(final) == [
        logged_usage(provider, model=ANTHROPIC_MODEL, vendor="anthropic")
    ]


def test_dict_forms_give_the_same_usage_as_the_objects(
    openai_client: openai.OpenAI, anthropic_client: anthropic.Anthropic
) -> None:
    responses = [
        chat(openai_client, "Compare the two contracts"),
        respond(openai_client, "Compare the two contracts"),
        message(anthropic_client, "Compare the two contracts"),
    ]

    for response in responses:
        expected = usage_from(response)
        assert len(expected) == 1
        assert usage_from(response.model_dump()) == expected
        # What a step's result looks like after a JSON round trip through a store.
        as_json = json.loads(response.model_dump_json())
        assert usage_from(as_json) == expected


def test_responses_nested_in_containers_are_all_found_in_order(
    openai_client: openai.OpenAI, anthropic_client: anthropic.Anthropic
) -> None:
    first = chat(openai_client, "Draft the first section")
    second = respond(openai_client, "Draft the second section")
    third = message(anthropic_client, "Draft the third section")
    result = [
        first,
        {"summary": "two drafts", "raw": [second.model_dump(), "text", 3]},
        (third,),
    ]

    found = usage_from(result)

    assert found == [*usage_from(first), *usage_from(second), *usage_from(third)]
    assert [usage.provider for usage in found] == ["openai", "openai", "anthropic"]


# -- normalisation of cached tokens -----------------------------------------------


def chat_completion(usage: dict[str, Any] | None) -> ChatCompletion:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "ok"},
            }
        ],
    }
    if usage is not None:
        body["usage"] = usage
    return ChatCompletion.model_validate(body)


def test_openai_chat_cached_tokens_are_taken_out_of_the_prompt_count() -> None:
    completion = chat_completion(
        {
            "prompt_tokens": 1200,
            "completion_tokens": 300,
            "total_tokens": 1500,
            "prompt_tokens_details": {"cached_tokens": 1024},
            "completion_tokens_details": {"reasoning_tokens": 200},
        }
    )

    assert usage_from(completion) == [
        Usage(
            model="gpt-4o-2024-08-06",
            provider="openai",
            input_tokens=176,
            cached_input_tokens=1024,
            output_tokens=300,
        )
    ]


def test_openai_cache_writes_are_taken_out_of_the_prompt_count_too() -> None:
    completion = chat_completion(
        {
            "prompt_tokens": 5000,
            "completion_tokens": 10,
            "total_tokens": 5010,
            "prompt_tokens_details": {
                "cached_tokens": 1000,
                "cache_write_tokens": 3000,
            },
        }
    )

    [usage] = usage_from(completion)

    assert (usage.input_tokens, usage.cached_input_tokens) == (1000, 1000)
    assert usage.cache_write_tokens == 3000
    assert usage.total_tokens == 5010


def test_openai_responses_cached_tokens_are_taken_out_of_the_input_count(
    openai_client: openai.OpenAI,
) -> None:
    body = respond(openai_client, "Review the pull request").model_dump()
    body["usage"] = {
        "input_tokens": 2048,
        "input_tokens_details": {"cached_tokens": 2000, "cache_write_tokens": 0},
        "output_tokens": 64,
        "output_tokens_details": {"reasoning_tokens": 32},
        "total_tokens": 2112,
    }

    [usage] = usage_from(Response.model_validate(body))

    assert usage == Usage(
        model=OPENAI_MODEL,
        provider="openai",
        input_tokens=48,
        cached_input_tokens=2000,
        output_tokens=64,
    )


def test_anthropic_cache_reads_and_writes_are_kept_apart_from_input(
    anthropic_client: anthropic.Anthropic,
) -> None:
    body = message(anthropic_client, "Review the pull request").model_dump()
    body["usage"] = {
        "input_tokens": 21,
        "cache_read_input_tokens": 188086,
        "cache_creation_input_tokens": 1500,
        "output_tokens": 393,
    }

    [usage] = usage_from(Message.model_validate(body))

    assert usage == Usage(
        model=ANTHROPIC_MODEL,
        provider="anthropic",
        input_tokens=21,
        cached_input_tokens=188086,
        cache_write_tokens=1500,
        output_tokens=393,
    )
    assert usage.total_tokens == 21 + 188086 + 1500 + 393


def test_anthropic_null_cache_counts_read_as_zero() -> None:
    reply = {
        "type": "message",
        "model": ANTHROPIC_MODEL,
        "usage": {
            "input_tokens": 7,
            "output_tokens": 9,
            "cache_read_input_tokens": None,
            "cache_creation_input_tokens": None,
        },
    }

    assert usage_from(reply) == [
        Usage(
            model=ANTHROPIC_MODEL, provider="anthropic", input_tokens=7, output_tokens=9
        )
    ]


# -- anything else gives [] and never raises --------------------------------------


class Exploding:
    """An object whose every attribute raises, as a broken proxy might."""

    def __getattr__(self, name: str) -> object:
        raise RuntimeError(f"no {name} for you")


class LooksLikeACompletion:
    object = "chat.completion"
    model = "gpt-4o"

    @property
    def usage(self) -> int:
        raise RuntimeError("usage is not loaded")


def nested(depth: int, leaf: object) -> object:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(None, id="none"),
        pytest.param("chat.completion", id="string"),
        pytest.param(42, id="int"),
        pytest.param(object(), id="random-object"),
        pytest.param(Exploding(), id="attributes-raise"),
        pytest.param(LooksLikeACompletion(), id="usage-property-raises"),
        pytest.param(ChatCompletion, id="sdk-class-not-instance"),
        pytest.param({}, id="empty-dict"),
        pytest.param([], id="empty-list"),
        pytest.param({"object": "chat.completion"}, id="completion-without-usage"),
        pytest.param(
            {"object": "chat.completion", "usage": None}, id="completion-usage-null"
        ),
        pytest.param(
            {
                "object": "chat.completion",
                "usage": {"prompt_tokens": "12", "completion_tokens": 3},
            },
            id="prompt-tokens-a-string",
        ),
        pytest.param(
            {
                "object": "chat.completion",
                "usage": {"prompt_tokens": 12.0, "completion_tokens": 3},
            },
            id="prompt-tokens-a-float",
        ),
        pytest.param(
            {
                "object": "chat.completion",
                "usage": {"prompt_tokens": True, "completion_tokens": 3},
            },
            id="prompt-tokens-a-bool",
        ),
        pytest.param(
            {
                "object": "chat.completion",
                "usage": {"prompt_tokens": -1, "completion_tokens": 3},
            },
            id="prompt-tokens-negative",
        ),
        pytest.param(
            {
                "object": "chat.completion",
                "usage": {
                    "prompt_tokens": 10,
                    "completion_tokens": 3,
                    "prompt_tokens_details": {"cached_tokens": 11},
                },
            },
            id="more-cached-than-prompt",
        ),
        pytest.param(
            {
                "object": "chat.completion",
                "usage": {
                    "prompt_tokens": 10,
                    "completion_tokens": 3,
                    "prompt_tokens_details": {"cached_tokens": "many"},
                },
            },
            id="cached-tokens-a-string",
        ),
        pytest.param(
            {"object": "response", "usage": {"input_tokens": 5}},
            id="responses-without-output-count",
        ),
        pytest.param(
            {"type": "message", "usage": {"input_tokens": None, "output_tokens": 4}},
            id="anthropic-input-null",
        ),
        pytest.param(
            {"type": "message", "role": "user", "content": "hi"},
            id="a-message-that-is-no-response",
        ),
        pytest.param(
            {"type": "message", "usage": ["input_tokens", 5]}, id="usage-a-list"
        ),
        pytest.param(nested(10_000, {"a": [object(), "x"]}), id="deeply-nested-junk"),
        pytest.param({"a": {"b": {"c": {"d": {"e": 1}}}}}, id="nested-dicts"),
    ],
)
def test_anything_but_a_response_with_valid_usage_gives_nothing(value: object) -> None:
    assert usage_from(value) == []


def test_a_cyclic_result_gives_nothing_and_terminates() -> None:
    loop: list[object] = []
    loop.append(loop)
    table: dict[str, object] = {}
    table["self"] = table

    assert usage_from([loop, table]) == []


def test_a_bad_response_does_not_hide_its_good_neighbours() -> None:
    good = chat_completion(
        {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    )

    found = usage_from(
        [Exploding(), chat_completion(None), good, LooksLikeACompletion()]
    )

    assert found == usage_from(good)
    assert len(found) == 1


def test_responses_are_looked_for_at_most_four_containers_deep() -> None:
    good = chat_completion(
        {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    )

    assert usage_from(nested(4, good)) == usage_from(good)
    assert usage_from(nested(5, good)) == []


def test_a_huge_result_is_read_only_up_to_its_budget() -> None:
    one = {
        "object": "chat.completion",
        "model": "m",
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }

    found = usage_from([one] * 100_000)

    assert 0 < len(found) < 1000


# -- Usage records ----------------------------------------------------------------


def test_usage_round_trips_through_json() -> None:
    usage = Usage(
        model="claude-sonnet-4-5",
        provider="anthropic",
        input_tokens=10,
        cached_input_tokens=20,
        cache_write_tokens=30,
        output_tokens=40,
        cost_usd=0.0125,
    )

    assert Usage.from_dict(json.loads(json.dumps(usage.to_dict()))) == usage
    assert usage.total_tokens == 100


def test_from_dict_fills_missing_keys_with_defaults_and_ignores_unknown_ones() -> None:
    assert Usage.from_dict({"output_tokens": 5, "added_later": "x"}) == Usage(
        model=None, provider=None, output_tokens=5
    )
    assert Usage.from_dict({"model": "gpt-5-mini", "cost_usd": 1}) == Usage(
        model="gpt-5-mini", provider=None, cost_usd=1.0
    )
    assert Usage.from_dict({"input_tokens": None, "cost_usd": None}) == Usage(
        model=None, provider=None
    )


@pytest.mark.parametrize(
    "data",
    [
        {"input_tokens": "10"},
        {"input_tokens": 1.5},
        {"output_tokens": True},
        {"cached_input_tokens": -1},
        {"cache_write_tokens": [1]},
        {"model": 4},
        {"provider": {"name": "openai"}},
        {"cost_usd": "0.10"},
        {"cost_usd": -0.5},
        {"cost_usd": float("nan")},
        {"cost_usd": False},
    ],
)
def test_from_dict_rejects_wrong_types(data: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="usage field"):
        Usage.from_dict(data)


def test_from_dict_rejects_what_is_not_a_mapping() -> None:
    with pytest.raises(ValueError, match="mapping"):
        Usage.from_dict([("input_tokens", 1)])  # type: ignore[arg-type]  # the wrong type is the point


def test_usage_rejects_negative_counts_and_costs() -> None:
    with pytest.raises(ValueError, match="output_tokens"):
        Usage(model=None, provider=None, output_tokens=-1)
    with pytest.raises(ValueError, match="cost_usd"):
        Usage(model=None, provider=None, cost_usd=float("inf"))


def test_reading_usage_and_prices_never_imports_an_sdk() -> None:
    # A fresh interpreter: this test session has imported both SDKs already.
    code = (
        "import sys, resumable.usage, resumable.pricing; "
        "print(sorted({'openai', 'anthropic'} & set(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
