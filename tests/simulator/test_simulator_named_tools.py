"""Tools the instructions name are called in order, once each: a scripted agent path.

Agent frameworks (the OpenAI Agents SDK, Pydantic AI) are tested against the
simulator with several tools and handoffs; what the model calls is scripted by the
agent's own instructions. Driven through the real `openai` and `anthropic` SDKs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from resumable.simulator import SimulatedProvider

MODEL = "gpt-4o-mini"
SYSTEM = "You are a billing agent. First call lookup_invoice, then call issue_refund."
QUESTION = "Refund invoice 42 for Alice in Paris"


def _schema(name: str) -> dict[str, Any]:
    return {"type": "object", "properties": {name: {"type": "string"}}}


TOOLS = {"lookup_invoice": _schema("invoice"), "issue_refund": _schema("invoice")}
UNNAMED = {"send_email": _schema("to")}  # offered, never named: never called


@pytest.fixture
def provider() -> Iterator[SimulatedProvider]:
    with SimulatedProvider() as provider:
        yield provider


def test_chat_calls_the_named_tools_in_the_order_named_then_answers(
    provider: SimulatedProvider,
) -> None:
    tools: list[Any] = [
        {"type": "function", "function": {"name": n, "parameters": p}}
        for n, p in {**UNNAMED, **TOOLS}.items()
    ]
    messages: list[Any] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": QUESTION},
    ]
    called = []
    with openai.OpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    ) as client:
        for _ in range(4):
            reply = client.chat.completions.create(
                model=MODEL, messages=messages, tools=tools
            )
            calls = reply.choices[0].message.tool_calls or []
            if not calls:
                assert reply.choices[0].finish_reason == "stop"
                break
            call = calls[0]
            assert call.type == "function"
            called.append(call.function.name)
            messages.append(reply.choices[0].message.model_dump(exclude_none=True))
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": "done"}
            )
        assert called == ["lookup_invoice", "issue_refund"]
        # a new user turn starts the plan again
        messages.append({"role": "user", "content": "And invoice 43?"})
        again = client.chat.completions.create(
            model=MODEL, messages=messages, tools=tools
        )
        again_calls = again.choices[0].message.tool_calls or []
        assert [c.function.name for c in again_calls if c.type == "function"] == [
            "lookup_invoice"
        ]


def test_responses_api_follows_its_instructions_the_same_way(
    provider: SimulatedProvider,
) -> None:
    tools: list[Any] = [
        {"type": "function", "name": n, "parameters": p, "strict": False}
        for n, p in TOOLS.items()
    ]
    items: list[Any] = [{"role": "user", "content": QUESTION}]
    called = []
    with openai.OpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    ) as client:
        for _ in range(4):
            response = client.responses.create(
                model=MODEL, instructions=SYSTEM, input=items, tools=tools
            )
            item = response.output[0]
            if item.type != "function_call":
                assert response.output_text
                break
            called.append(item.name)
            items.append(item.model_dump(exclude_none=True))
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": item.call_id,
                    "output": "done",
                }
            )
    assert called == ["lookup_invoice", "issue_refund"]


def test_anthropic_messages_follow_the_system_prompt_the_same_way(
    provider: SimulatedProvider,
) -> None:
    tools: list[Any] = [{"name": n, "input_schema": p} for n, p in TOOLS.items()]
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    called = []
    with anthropic.Anthropic(
        base_url=provider.anthropic_base_url, api_key="sk-test", max_retries=0
    ) as client:
        for _ in range(4):
            message = client.messages.create(
                model="claude-haiku-4-5",
                max_tokens=512,
                system=SYSTEM,
                messages=messages,
                tools=tools,
            )
            uses = [b for b in message.content if b.type == "tool_use"]
            if not uses:
                assert message.stop_reason == "end_turn"
                break
            called.append(uses[0].name)
            messages.append(
                {"role": "assistant", "content": [b.model_dump() for b in uses]}
            )
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": uses[0].id,
                            "content": json.dumps({"ok": True}),
                        }
                    ],
                }
            )
    assert called == ["lookup_invoice", "issue_refund"]
