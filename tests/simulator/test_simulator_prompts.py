from __future__ import annotations

import pytest

from resumable.simulator.prompts import Api, InvalidRequest, parse_prompt
from resumable.simulator.replies import count_tokens, make_reply


def test_the_three_apis_normalize_one_conversation_to_one_digest() -> None:
    chat = parse_prompt(
        "chat",
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "Summarize doc-7"}],
                },
            ],
        },
    )
    responses = parse_prompt(
        "responses",
        {
            "model": "m",
            "instructions": "Be brief.",
            "input": [
                {
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Summarize doc-7"}],
                }
            ],
        },
    )
    messages = parse_prompt(
        "messages",
        {
            "model": "m",
            "max_tokens": 100,
            "system": [{"type": "text", "text": "Be brief."}],
            "messages": [{"role": "user", "content": "Summarize doc-7"}],
        },
    )

    assert chat.digest == responses.digest == messages.digest
    assert chat.last_user_text == "Summarize doc-7"
    assert make_reply(chat).text == make_reply(messages).text
    assert make_reply(chat).usage == make_reply(responses).usage


def test_tokens_are_a_quarter_of_the_characters_rounded_up() -> None:
    assert [count_tokens(text) for text in ("", "a", "abcd", "abcde")] == [0, 1, 1, 2]


@pytest.mark.parametrize(
    ("api", "body", "complaint"),
    [
        ("chat", [], "JSON object"),
        ("chat", {"messages": [{"role": "user", "content": "x"}]}, "model"),
        ("chat", {"model": "m", "messages": []}, "messages"),
        (
            "chat",
            {"model": "m", "messages": [{"role": "robot", "content": "x"}]},
            "role",
        ),
        ("responses", {"model": "m", "input": 3}, "input"),
        (
            "messages",
            {"model": "m", "messages": [{"role": "user", "content": "x"}]},
            "max_tokens",
        ),
        (
            "messages",
            {
                "model": "m",
                "max_tokens": 0,
                "messages": [{"role": "user", "content": "x"}],
            },
            "positive",
        ),
    ],
)
def test_requests_the_real_api_would_refuse_are_invalid(
    api: Api, body: object, complaint: str
) -> None:
    with pytest.raises(InvalidRequest, match=complaint):
        parse_prompt(api, body)
