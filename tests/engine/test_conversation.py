from __future__ import annotations

import pytest

from resumable import Engine, ResumableError
from resumable._engine.conversation import complete_prefix
from resumable.stores.protocol import Store

USER = {"role": "user", "content": "What's the weather in Lisbon?"}
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "weather", "arguments": "{}"},
        },
        {
            "id": "call_2",
            "type": "function",
            "function": {"name": "time", "arguments": "{}"},
        },
    ],
}
RESULT_1 = {"role": "tool", "tool_call_id": "call_1", "content": "21C"}
RESULT_2 = {"role": "tool", "tool_call_id": "call_2", "content": "14:00"}
ANSWER = {"role": "assistant", "content": "21C and sunny at 14:00."}


async def test_a_tool_call_is_never_saved_without_its_results(store: Store) -> None:
    engine = Engine(store)
    conversation = await engine.conversation("chat")
    conversation.extend(
        [USER, CALL, RESULT_1]
    )  # the process dies before call_2 returns
    saved = await conversation.save()
    assert saved is not None
    assert conversation.pending == [CALL, RESULT_1]
    resumed = await Engine(store).conversation("chat")  # a new process
    assert resumed.messages == [USER]  # a valid thread to send to a provider

    conversation.extend([RESULT_2, ANSWER])
    await conversation.save(label="turn-1")
    again = await Engine(store).conversation("chat")
    assert again.messages == [USER, CALL, RESULT_1, RESULT_2, ANSWER]
    assert again.pending == []
    history = await engine.state_history("chat", namespace="conversation")
    assert [c.label for c in history] == ["turn-1", None]


def test_anthropic_tool_use_blocks_are_paired_too() -> None:
    use = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}},
        ],
    }
    result = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "21C"}
        ],
    }
    assert complete_prefix([USER, use]) == 1
    assert complete_prefix([USER, use, result]) == 3


def test_a_result_without_its_call_is_refused() -> None:
    with pytest.raises(ResumableError, match="answers no tool call"):
        complete_prefix([USER, RESULT_1])


async def test_nothing_complete_means_nothing_saved(store: Store) -> None:
    conversation = await Engine(store).conversation("empty")
    conversation.append(CALL)
    assert await conversation.save() is None
    assert conversation.pending == [CALL]
