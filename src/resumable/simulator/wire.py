"""The three APIs' wire formats: answers, server-sent event streams and errors.

Shapes follow what the real `openai` and `anthropic` SDKs parse, field for
field, so `completion.usage.prompt_tokens_details.cached_tokens`,
`response.output_text` and `message.usage.cache_read_input_tokens` all work.
Prompt caching and reasoning are not simulated: those counts are always 0.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Literal

from resumable.simulator.faults import Fault
from resumable.simulator.prompts import Api, Prompt
from resumable.simulator.replies import Reply, Usage

Family = Literal["openai", "anthropic"]
JSONObject = dict[str, object]

_PIECE = re.compile(r"\S+\s*")


def family_of(api: Api) -> Family:
    """Which error format and request-id header an API uses."""
    return "anthropic" if api == "messages" else "openai"


def request_id_header(family: Family) -> str:
    """The response header that carries the request id."""
    return "request-id" if family == "anthropic" else "x-request-id"


# -- answers ---------------------------------------------------------------------


def render(prompt: Prompt, reply: Reply, *, rid: str, created: int) -> JSONObject:
    """The non-streaming response body for `prompt`, answered with `reply`."""
    if prompt.api == "chat":
        return _chat_completion(prompt, reply, rid=rid, created=created)
    if prompt.api == "responses":
        return _response(
            prompt, reply, rid=rid, created=created, status=_response_status(reply)
        )
    return _message(prompt, reply, rid=rid)


def render_stream(prompt: Prompt, reply: Reply, *, rid: str, created: int) -> bytes:
    """The whole server-sent event stream for `prompt`, answered with `reply`.

    The answer is known up front, so the stream is sent with a Content-Length
    and the connection stays reusable.
    """
    if prompt.api == "chat":
        events = (
            (None, chunk)
            for chunk in _chat_chunks(prompt, reply, rid=rid, created=created)
        )
        return _sse(events) + b"data: [DONE]\n\n"
    if prompt.api == "responses":
        return _sse(_response_events(prompt, reply, rid=rid, created=created))
    return _sse(_message_events(prompt, reply, rid=rid))


def _sse(events: Iterator[tuple[str | None, JSONObject]]) -> bytes:
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        out.append(f"{head}data: {json.dumps(data)}\n\n")
    return "".join(out).encode()


def _pieces(text: str) -> list[str]:
    words = _PIECE.findall(text)
    return ["".join(words[i : i + 3]) for i in range(0, len(words), 3)] or [text]


# Chat Completions


def _chat_usage(usage: Usage) -> JSONObject:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _chat_finish_reason(reply: Reply) -> str:
    if reply.tool_call is not None:
        return "tool_calls"
    return "length" if reply.is_truncated else "stop"


def _chat_tool_calls(reply: Reply) -> list[JSONObject]:
    if reply.tool_call is None:
        return []
    call = reply.tool_call
    return [
        {
            "id": f"call_{call.call_id}",
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments_json},
        }
    ]


def _chat_completion(
    prompt: Prompt, reply: Reply, *, rid: str, created: int
) -> JSONObject:
    message: JSONObject = {
        "role": "assistant",
        "content": None if reply.tool_call else reply.text,
        "refusal": None,
        "annotations": [],
    }
    if reply.tool_call is not None:
        message["tool_calls"] = _chat_tool_calls(reply)
    return {
        "id": f"chatcmpl-{rid}",
        "object": "chat.completion",
        "created": created,
        "model": prompt.model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _chat_finish_reason(reply),
            }
        ],
        "usage": _chat_usage(reply.usage),
        "service_tier": "default",
        "system_fingerprint": "fp_simulated",
    }


def _chat_chunks(
    prompt: Prompt, reply: Reply, *, rid: str, created: int
) -> Iterator[JSONObject]:
    def chunk(delta: JSONObject, finish_reason: str | None = None) -> JSONObject:
        body: JSONObject = {
            "id": f"chatcmpl-{rid}",
            "object": "chat.completion.chunk",
            "created": created,
            "model": prompt.model,
            "system_fingerprint": "fp_simulated",
            "choices": [
                {
                    "index": 0,
                    "delta": delta,
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
        }
        if prompt.include_stream_usage:
            body["usage"] = None
        return body

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    if reply.tool_call is not None:
        calls = _chat_tool_calls(reply)
        yield chunk({"tool_calls": [{"index": 0, **calls[0]}]})
    else:
        for piece in _pieces(reply.text):
            yield chunk({"content": piece})
    yield chunk({}, _chat_finish_reason(reply))
    if prompt.include_stream_usage:
        last = chunk({})
        last["choices"] = []
        last["usage"] = _chat_usage(reply.usage)
        yield last


# Responses


def _response_status(reply: Reply) -> str:
    return "incomplete" if reply.is_truncated else "completed"


def _response_usage(usage: Usage) -> JSONObject:
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.total_tokens,
    }


def _response_item(
    reply: Reply, *, rid: str, status: str, text: str | None = None
) -> JSONObject:
    if reply.tool_call is not None:
        call = reply.tool_call
        return {
            "id": f"fc_{rid}",
            "type": "function_call",
            "status": status,
            "call_id": f"call_{call.call_id}",
            "name": call.name,
            "arguments": call.arguments_json if text is None else text,
        }
    content = [] if text == "" else [_output_text(reply.text if text is None else text)]
    return {
        "id": f"msg_{rid}",
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content,
    }


def _output_text(text: str) -> JSONObject:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _response(
    prompt: Prompt,
    reply: Reply,
    *,
    rid: str,
    created: int,
    status: str,
    is_done: bool = True,
) -> JSONObject:
    return {
        "id": f"resp_{rid}",
        "object": "response",
        "created_at": created,
        "status": status,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"}
        if status == "incomplete"
        else None,
        "instructions": None,
        "max_output_tokens": prompt.max_tokens,
        "model": prompt.model,
        "output": [_response_item(reply, rid=rid, status=status)] if is_done else [],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": _response_usage(reply.usage) if is_done else None,
        "user": None,
        "metadata": {},
    }


def _response_events(
    prompt: Prompt, reply: Reply, *, rid: str, created: int
) -> Iterator[tuple[str | None, JSONObject]]:
    status = _response_status(reply)
    item_id = f"fc_{rid}" if reply.tool_call else f"msg_{rid}"
    where: JSONObject = {"item_id": item_id, "output_index": 0}
    events: list[JSONObject] = []

    def emit(kind: str, **fields: object) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    pending = _response(
        prompt, reply, rid=rid, created=created, status="in_progress", is_done=False
    )
    emit("response.created", response=pending)
    emit("response.in_progress", response=pending)
    emit(
        "response.output_item.added",
        output_index=0,
        item=_response_item(reply, rid=rid, status="in_progress", text=""),
    )
    if reply.tool_call is not None:
        arguments = reply.tool_call.arguments_json
        emit("response.function_call_arguments.delta", **where, delta=arguments)
        emit("response.function_call_arguments.done", **where, arguments=arguments)
    else:
        text_at: JSONObject = {**where, "content_index": 0}
        emit("response.content_part.added", **text_at, part=_output_text(""))
        for piece in _pieces(reply.text):
            emit("response.output_text.delta", **text_at, delta=piece, logprobs=[])
        emit("response.output_text.done", **text_at, text=reply.text, logprobs=[])
        emit("response.content_part.done", **text_at, part=_output_text(reply.text))
    emit(
        "response.output_item.done",
        output_index=0,
        item=_response_item(reply, rid=rid, status=status),
    )
    done = _response(prompt, reply, rid=rid, created=created, status=status)
    emit(
        "response.incomplete" if reply.is_truncated else "response.completed",
        response=done,
    )
    for event in events:
        yield str(event["type"]), event


# Anthropic Messages


def _stop_reason(reply: Reply) -> str:
    if reply.tool_call is not None:
        return "tool_use"
    return "max_tokens" if reply.is_truncated else "end_turn"


def _message_usage(usage: Usage, *, output_tokens: int | None = None) -> JSONObject:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens
        if output_tokens is None
        else output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "service_tier": "standard",
    }


def _content_block(reply: Reply, *, is_empty: bool = False) -> JSONObject:
    if reply.tool_call is not None:
        call = reply.tool_call
        arguments = {} if is_empty else dict(call.arguments)
        return {
            "type": "tool_use",
            "id": f"toolu_{call.call_id}",
            "name": call.name,
            "input": arguments,
        }
    return {"type": "text", "text": "" if is_empty else reply.text}


def _message(prompt: Prompt, reply: Reply, *, rid: str) -> JSONObject:
    return {
        "id": f"msg_{rid}",
        "type": "message",
        "role": "assistant",
        "model": prompt.model,
        "content": [_content_block(reply)],
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": _message_usage(reply.usage),
    }


def _message_events(
    prompt: Prompt, reply: Reply, *, rid: str
) -> Iterator[tuple[str | None, JSONObject]]:
    def event(kind: str, **fields: object) -> tuple[str, JSONObject]:
        return kind, {"type": kind, **fields}

    start = _message(prompt, reply, rid=rid)
    start.update(
        content=[], stop_reason=None, usage=_message_usage(reply.usage, output_tokens=1)
    )
    yield event("message_start", message=start)
    yield event(
        "content_block_start",
        index=0,
        content_block=_content_block(reply, is_empty=True),
    )
    yield event("ping")
    if reply.tool_call is not None:
        delta: JSONObject = {
            "type": "input_json_delta",
            "partial_json": reply.tool_call.arguments_json,
        }
        yield event("content_block_delta", index=0, delta=delta)
    else:
        for piece in _pieces(reply.text):
            yield event(
                "content_block_delta",
                index=0,
                delta={"type": "text_delta", "text": piece},
            )
    yield event("content_block_stop", index=0)
    yield event(
        "message_delta",
        delta={"stop_reason": _stop_reason(reply), "stop_sequence": None},
        usage={"output_tokens": reply.usage.output_tokens},
    )
    yield event("message_stop")


# -- errors ----------------------------------------------------------------------


def fault_status(fault: Fault, family: Family) -> int:
    """The HTTP status of an error fault on an API family."""
    if fault.status is not None:
        return fault.status
    match fault.kind:
        case "rate_limit":
            return 429
        case "overloaded":
            return 529 if family == "anthropic" else 503
        case _:
            return 500


def fault_headers(fault: Fault) -> dict[str, str]:
    """The retry headers a fault carries."""
    headers = {}
    if fault.retry_after_s is not None:
        headers["retry-after"] = f"{fault.retry_after_s:g}"
    if fault.retry_after_ms is not None:
        headers["retry-after-ms"] = str(fault.retry_after_ms)
    if fault.should_retry is not None:
        headers["x-should-retry"] = "true" if fault.should_retry else "false"
    return headers


def fault_message(fault: Fault, status: int) -> str:
    """The error message of a fault, unless the fault names its own."""
    if fault.message is not None:
        return fault.message
    if status == 429:
        return "Rate limit reached for requests (simulated). Please try again later."
    if status in (503, 529):
        return "Overloaded (simulated). Please try again later."
    return "The server had an error while processing your request (simulated)."


def error_body(family: Family, status: int, message: str, *, rid: str) -> JSONObject:
    """An error body in the API family's own format."""
    if family == "anthropic":
        kind = {
            400: "invalid_request_error",
            404: "not_found_error",
            429: "rate_limit_error",
            529: "overloaded_error",
        }.get(status, "api_error")
        return {
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": f"req_{rid}",
        }
    if status in (400, 404):
        kind, code = "invalid_request_error", "unknown_url" if status == 404 else None
    elif status == 429:
        kind, code = "requests", "rate_limit_exceeded"
    else:
        kind, code = "server_error", None
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}
