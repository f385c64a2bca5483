"""Read the three APIs' request bodies into one provider-neutral `Prompt`.

Chat Completions, Responses and Messages spell the same conversation three
ways. Everything downstream (the deterministic answer, token counts, fault
rules, the request log) works on the normalized form built here, so one
prompt reads the same whichever API carried it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

Api = Literal["chat", "responses", "messages"]
Role = Literal["system", "user", "assistant", "tool"]


class InvalidRequest(ValueError):
    """The request body is JSON but not a request this simulator can answer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """One message of the conversation, reduced to its role and text."""

    role: Role
    text: str
    tool_name: str | None = None  # for role "tool": which tool produced it, if known
    calls: tuple[str, ...] = ()  # for role "assistant": the tools it called, by name


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A function tool the caller offered: its name and JSON-schema parameters."""

    name: str
    parameters: Mapping[str, object]


@dataclass(frozen=True, slots=True, kw_only=True)
class Prompt:
    """A request of any of the three APIs, normalized."""

    api: Api
    model: str
    turns: tuple[Turn, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None
    is_stream: bool = False
    include_stream_usage: bool = False  # chat only: stream_options.include_usage
    output_schema: Mapping[str, object] | None = None
    """A JSON schema the answer must follow (structured outputs: Chat Completions'
    `response_format`, Responses' `text.format`); the answer is then JSON."""

    @property
    def digest(self) -> str:
        """A stable 16-hex-digit digest of the conversation (roles, texts, tool names).

        The model, the API and max_tokens are left out on purpose: the same
        conversation gets the same answer whichever API or model asks.
        """
        payload = json.dumps(
            {
                "turns": [[t.role, t.text] for t in self.turns],
                "tools": [t.name for t in self.tools],
            },
            sort_keys=True,
            ensure_ascii=False,
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    @property
    def last_user_text(self) -> str:
        """The text of the last user turn, or "" when there is none."""
        for turn in reversed(self.turns):
            if turn.role == "user":
                return turn.text
        return ""

    @property
    def last_turn(self) -> Turn | None:
        """The final turn of the conversation."""
        return self.turns[-1] if self.turns else None


def parse_prompt(api: Api, body: object) -> Prompt:
    """Normalize a decoded JSON request body of `api`.

    Raises:
        InvalidRequest: the body misses a field the real API requires.
    """
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("'model' is required and must be a string")
    if api == "chat":
        return _parse_chat(body, model)
    if api == "responses":
        return _parse_responses(body, model)
    return _parse_messages(body, model)


def _parse_chat(body: dict[str, object], model: str) -> Prompt:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("'messages' must be a non-empty array")
    turns = []
    for message in messages:
        if not isinstance(message, dict):
            raise InvalidRequest("each message must be an object")
        role = _role(message.get("role"))
        text = text_of(message.get("content"))
        calls: tuple[str, ...] = ()
        if role == "assistant" and isinstance(message.get("tool_calls"), list):
            text = (text + " " + text_of(message.get("tool_calls"))).strip()
            calls = _names(
                call.get("function") if isinstance(call, dict) else None
                for call in _list(message.get("tool_calls"))
            )
        turns.append(
            Turn(
                role=role,
                text=text,
                tool_name=_str_or_none(message.get("name")),
                calls=calls,
            )
        )
    tools = tuple(
        ToolSpec(
            name=str(fn.get("name", "tool")), parameters=_mapping(fn.get("parameters"))
        )
        for tool in _list(body.get("tools"))
        if isinstance(tool, dict) and isinstance(fn := tool.get("function"), dict)
    )
    stream_options = body.get("stream_options")
    return Prompt(
        api="chat",
        model=model,
        turns=tuple(turns),
        tools=tools,
        max_tokens=_int_or_none(
            body.get("max_completion_tokens", body.get("max_tokens"))
        ),
        is_stream=body.get("stream") is True,
        include_stream_usage=isinstance(stream_options, dict)
        and stream_options.get("include_usage") is True,
        output_schema=_chat_schema(body.get("response_format")),
    )


def _chat_schema(response_format: object) -> Mapping[str, object] | None:
    if not isinstance(response_format, dict):
        return None
    if response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema")
    return _mapping(spec.get("schema")) if isinstance(spec, dict) else None


def _responses_schema(text: object) -> Mapping[str, object] | None:
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return None
    return _mapping(fmt.get("schema"))


def _parse_responses(body: dict[str, object], model: str) -> Prompt:
    raw = body.get("input")
    turns: list[Turn] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        turns.append(Turn(role="system", text=instructions))
    if isinstance(raw, str):
        turns.append(Turn(role="user", text=raw))
    elif isinstance(raw, list) and raw:
        turns.extend(_responses_item(item) for item in raw)
    else:
        raise InvalidRequest("'input' must be a string or a non-empty array")
    tools = tuple(
        ToolSpec(
            name=str(tool.get("name", "tool")),
            parameters=_mapping(tool.get("parameters")),
        )
        for tool in _list(body.get("tools"))
        if isinstance(tool, dict) and tool.get("type") == "function"
    )
    return Prompt(
        api="responses",
        model=model,
        turns=tuple(turns),
        tools=tools,
        max_tokens=_int_or_none(body.get("max_output_tokens")),
        is_stream=body.get("stream") is True,
        output_schema=_responses_schema(body.get("text")),
    )


def _responses_item(item: object) -> Turn:
    if isinstance(item, str):
        return Turn(role="user", text=item)
    if not isinstance(item, dict):
        raise InvalidRequest("each input item must be a string or an object")
    kind = item.get("type", "message")
    if kind == "function_call_output":
        return Turn(role="tool", text=text_of(item.get("output")))
    if kind == "function_call":
        return Turn(
            role="assistant",
            text=f"{item.get('name', '')} {text_of(item.get('arguments'))}".strip(),
            calls=_names([item]),
        )
    return Turn(role=_role(item.get("role")), text=text_of(item.get("content")))


def _parse_messages(body: dict[str, object], model: str) -> Prompt:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("messages: field required and must be a non-empty array")
    max_tokens = _int_or_none(body.get("max_tokens"))
    if max_tokens is None:
        raise InvalidRequest("max_tokens: field required")
    turns: list[Turn] = []
    system = text_of(body.get("system"))
    if system:
        turns.append(Turn(role="system", text=system))
    for message in messages:
        if not isinstance(message, dict):
            raise InvalidRequest("each message must be an object")
        content = message.get("content")
        role = _role(message.get("role"))
        # A user message made of tool_result blocks is Anthropic's tool turn.
        if role == "user" and _is_tool_result(content):
            role = "tool"
        uses = [b for b in _list(content) if isinstance(b, dict)]
        calls = _names(b for b in uses if b.get("type") == "tool_use")
        turns.append(Turn(role=role, text=text_of(content), calls=calls))
    tools = tuple(
        ToolSpec(
            name=str(tool.get("name", "tool")),
            parameters=_mapping(tool.get("input_schema")),
        )
        for tool in _list(body.get("tools"))
        if isinstance(tool, dict)
    )
    return Prompt(
        api="messages",
        model=model,
        turns=tuple(turns),
        tools=tools,
        max_tokens=max_tokens,
        is_stream=body.get("stream") is True,
    )


def text_of(content: object) -> str:
    """Flatten any of the APIs' content shapes (string, parts, blocks) into text."""
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(part for part in (text_of(item) for item in content) if part)
    elif isinstance(content, dict):
        text = _block_text(content)
    else:
        text = json.dumps(content)
    return text


def _block_text(block: dict[str, object]) -> str:
    for key in ("text", "content", "output", "arguments"):
        if key in block:
            return text_of(block[key])
    for key in ("input", "function"):
        if key in block:
            return json.dumps(block[key], sort_keys=True)
    return ""


def _is_tool_result(content: object) -> bool:
    return (
        isinstance(content, list)
        and bool(content)
        and all(
            isinstance(block, dict) and block.get("type") == "tool_result"
            for block in content
        )
    )


def _role(value: object) -> Role:
    match value:
        case "system" | "developer":
            return "system"
        case "user":
            return "user"
        case "assistant":
            return "assistant"
        case "tool":
            return "tool"
        case _:
            raise InvalidRequest(f"unknown message role {value!r}")


def _names(blocks: Iterable[object]) -> tuple[str, ...]:
    """The string `name` of each object among `blocks` that has one."""
    return tuple(
        name
        for block in blocks
        if isinstance(block, dict) and isinstance(name := block.get("name"), str)
    )


def _list(value: object) -> Sequence[object]:
    return value if isinstance(value, list) else ()


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, dict) else {}


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int_or_none(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidRequest(f"max tokens must be a positive integer, got {value!r}")
    return value
