"""Token usage of LLM calls, read by duck typing from the user's own SDK objects.

resumable never imports `openai` or `anthropic`. `usage_from` recognises a
response by its wire-format markers (the `object` or `type` field) and reads
its `usage` by attribute name, so the SDK objects, their `model_dump()` dicts
and anything else of the same shape all work, whatever the SDK version.

The providers count input differently; `Usage` normalises them so that the
three input fields never overlap and cost is a plain sum over them::

    Usage field          OpenAI (Chat Completions / Responses)       Anthropic Messages
    input_tokens         prompt_tokens / input_tokens                input_tokens
                         minus cached_tokens, minus cache_write_tokens
    cached_input_tokens  *_tokens_details.cached_tokens              cache_read_input_tokens
    cache_write_tokens   *_tokens_details.cache_write_tokens         cache_creation_input_tokens
    output_tokens        completion_tokens / output_tokens           output_tokens

OpenAI's prompt count includes the cached (and cache-written) tokens;
Anthropic's `input_tokens` excludes both cache reads and cache writes. Output
tokens include reasoning tokens on both, as both bill them as output.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

_MAX_DEPTH = 4
"""How many containers deep `usage_from` looks (a list of dicts of tuples...)."""
_MAX_ITEMS = 1000
"""How many values `usage_from` examines at most, so a huge result stays cheap."""
_TOKEN_FIELDS = (
    "input_tokens",
    "cached_input_tokens",
    "cache_write_tokens",
    "output_tokens",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Tokens (and maybe a known cost) of one LLM call.

    The three input fields are disjoint: together they are every input token
    the provider billed. Construction validates the fields and raises
    ValueError for a negative count or a value of the wrong type.
    """

    model: str | None
    """The model the provider says answered, e.g. "gpt-4o-mini-2024-07-18"."""
    provider: str | None
    """"openai", "anthropic", or whatever the caller says."""
    input_tokens: int = 0
    """Input tokens neither read from nor written to a prompt cache."""
    cached_input_tokens: int = 0
    """Input tokens read from a prompt cache (usually billed at a discount)."""
    cache_write_tokens: int = 0
    """Input tokens written to a prompt cache (Anthropic bills these at a premium)."""
    output_tokens: int = 0
    """Output tokens, reasoning tokens included."""
    cost_usd: float | None = None
    """The call's cost in USD when the caller states it; never guessed here."""
    is_metered: bool = True
    """False for a call whose usage could not be known (a response without usage,
    a stream cut short): it is counted as a call, its tokens are unknown, and every
    view says "unmetered" instead of showing $0."""
    response_id: str | None = field(default=None, compare=False)
    """The provider's id of the response ("chatcmpl-...", "msg_..."), when the SDK
    meter saw it: a step that also returns that response is not counted twice.
    Which response it was, not how much it used: equality ignores it."""

    def __post_init__(self) -> None:
        if not isinstance(self.is_metered, bool):
            raise ValueError(
                f"Usage.is_metered must be a bool, got {self.is_metered!r}"
            )
        for name in ("model", "provider", "response_id"):
            text: object = getattr(self, name)
            if text is not None and not isinstance(text, str):
                raise ValueError(f"Usage.{name} must be a str or None, got {text!r}")
        for name in _TOKEN_FIELDS:
            count: object = getattr(self, name)
            if _count(count) is None:
                raise ValueError(
                    f"Usage.{name} must be a non-negative int, got {count!r}"
                )
        cost: object = self.cost_usd
        if cost is not None and _cost(cost) is None:
            raise ValueError(
                f"Usage.cost_usd must be a finite non-negative number or None, got {cost!r}"
            )

    @property
    def total_tokens(self) -> int:
        """Every input token (uncached, cache reads, cache writes) plus output tokens."""
        return (
            self.input_tokens
            + self.cached_input_tokens
            + self.cache_write_tokens
            + self.output_tokens
        )

    def to_dict(self) -> dict[str, object]:
        """A JSON-able dict for storage; `from_dict` reads it back.

        `is_metered` and `response_id` are written only when they differ from
        their defaults, so a record of a returned response or of `record_usage`
        reads the same in versions that predate them.
        """
        data: dict[str, object] = {
            "model": self.model,
            "provider": self.provider,
            "input_tokens": self.input_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
        }
        if not self.is_metered:
            data["is_metered"] = False
        if self.response_id is not None:
            data["response_id"] = self.response_id
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Usage:
        """Read a dict written by `to_dict`, by this or an older version.

        A missing (or null) key takes its default and an unknown key is
        ignored, so records stay readable as fields are added.

        Raises:
            ValueError: `data` is not a mapping, or a field has the wrong type
                or a negative value.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"usage must be a mapping, got {type(data).__name__}")
        cost = data.get("cost_usd")
        if cost is not None and _cost(cost) is None:
            raise ValueError(
                f"usage field 'cost_usd' must be a number or null, got {cost!r}"
            )
        return cls(
            model=_text_field(data, "model"),
            provider=_text_field(data, "provider"),
            input_tokens=_token_field(data, "input_tokens"),
            cached_input_tokens=_token_field(data, "cached_input_tokens"),
            cache_write_tokens=_token_field(data, "cache_write_tokens"),
            output_tokens=_token_field(data, "output_tokens"),
            cost_usd=_cost(cost),
            is_metered=_flag_field(data, "is_metered"),
            response_id=_text_field(data, "response_id"),
        )


def usage_from(value: object, *, skip_ids: Collection[str] = ()) -> list[Usage]:
    """Usage of every LLM response object found in a step's result; [] if none.

    Recognises, by their `object`/`type` markers, OpenAI chat completions (and
    the final chunk of a stream, which carries the usage), OpenAI Responses
    and Anthropic Messages: SDK objects, their `model_dump()` dicts, or any
    object of that shape, alone or inside lists, tuples and dicts, in the
    order found. It looks at most 4 containers deep and at 1,000 values, and
    does not look inside other objects (a dataclass holding a completion).

    Never raises: a response without usage, with null counts or with an
    unexpected shape is skipped, so reading usage can never fail a step.

    Args:
        value: a step's result.
        skip_ids: ids of responses already counted (by the SDK meter): a
            response whose `id` is one of them is not counted again.
    """
    if (
        value is None or type(value) in _SCALARS
    ):  # the hot path: most steps return these
        return []
    found: list[Usage] = []
    _Walk(found, skip_ids).visit(value, depth=0)
    return found


def response_usage(value: object, *, provider: str | None = None) -> Usage | None:
    """The usage of one response object, read as `usage_from` reads it; else None.

    For a caller that holds the response itself (the SDK meter): no walk into
    containers, and a value that is not a response with valid usage gives None.
    Never raises.

    Args:
        value: a response object (or its dict form).
        provider: the SDK that made it, when known: an Anthropic message is
            recognised by its `type` before its missing `object` is looked
            for (an SDK model raises inside to say it has no such field).
    """
    try:
        if provider == "anthropic" and _get(value, "type") == "message":
            return _anthropic_usage(value)
        reader = _reader_for(value)
        return None if reader is None else reader(value)
    except Exception:  # noqa: BLE001 - an odd object is no response, never a failed step
        return None


_ABSENT = object()
_SCALARS = frozenset({str, bytes, int, float, bool})


class _Walk:
    """One traversal of a step's result, with its budget of values to examine."""

    __slots__ = ("budget", "found", "skip_ids")

    def __init__(self, found: list[Usage], skip_ids: Collection[str]) -> None:
        self.found = found
        self.budget = _MAX_ITEMS
        self.skip_ids = skip_ids

    def visit(self, value: object, *, depth: int) -> None:
        if self.budget <= 0:
            return
        self.budget -= 1
        try:
            reader = _reader_for(value)
            if reader is not None:
                if self.skip_ids and _get(value, "id") in self.skip_ids:
                    return  # the SDK meter counted this response when it arrived
                usage = reader(value)
                if usage is not None:
                    self.found.append(usage)
                return
            children = self._children(value) if depth < _MAX_DEPTH else []
        except Exception:  # noqa: BLE001 - a step's result is arbitrary user data: skip what raises, never fail the step
            return
        for child in children:
            self.visit(child, depth=depth + 1)

    def _children(self, value: object) -> list[object]:
        items: Iterable[object]
        if isinstance(value, Mapping):
            items = value.values()
        elif isinstance(value, list | tuple):
            items = value
        else:
            return []
        # Bounded before it is copied, so a million-item list costs 1,000 reads.
        return list(itertools.islice(items, self.budget))


_Reader = Callable[[object], Usage | None]


def _reader_for(value: object) -> _Reader | None:
    marker = _get(value, "object")
    if marker in ("chat.completion", "chat.completion.chunk"):
        return _chat_completion_usage
    if marker == "response":
        return _responses_usage
    if _get(value, "type") == "message":
        return _anthropic_usage
    return None


def _chat_completion_usage(response: object) -> Usage | None:
    usage = _get(response, "usage")
    return _openai_usage(
        response,
        prompt=_get(usage, "prompt_tokens"),
        output=_get(usage, "completion_tokens"),
        details=_get(usage, "prompt_tokens_details"),
    )


def _responses_usage(response: object) -> Usage | None:
    usage = _get(response, "usage")
    return _openai_usage(
        response,
        prompt=_get(usage, "input_tokens"),
        output=_get(usage, "output_tokens"),
        details=_get(usage, "input_tokens_details"),
    )


def _openai_usage(
    response: object, *, prompt: object, output: object, details: object
) -> Usage | None:
    prompt_tokens, output_tokens = _count(prompt), _count(output)
    cached = _detail_count(details, "cached_tokens")
    written = _detail_count(details, "cache_write_tokens")
    if prompt_tokens is None or output_tokens is None or cached is None:
        return None
    if written is None:
        return None
    # OpenAI's prompt count includes the cached and cache-written tokens.
    uncached = prompt_tokens - cached - written
    if uncached < 0:
        return None
    return Usage(
        model=_model(response),
        response_id=_response_id(response),
        provider="openai",
        input_tokens=uncached,
        cached_input_tokens=cached,
        cache_write_tokens=written,
        output_tokens=output_tokens,
    )


def _anthropic_usage(message: object) -> Usage | None:
    usage = _get(message, "usage")
    input_tokens = _count(_get(usage, "input_tokens"))
    output_tokens = _count(_get(usage, "output_tokens"))
    read = _detail_count(usage, "cache_read_input_tokens")
    written = _detail_count(usage, "cache_creation_input_tokens")
    if input_tokens is None or output_tokens is None or read is None:
        return None
    if written is None:
        return None
    # Anthropic's input_tokens already excludes cache reads and cache writes.
    return Usage(
        model=_model(message),
        response_id=_response_id(message),
        provider="anthropic",
        input_tokens=input_tokens,
        cached_input_tokens=read,
        cache_write_tokens=written,
        output_tokens=output_tokens,
    )


def _get(value: object, name: str) -> object:
    """An attribute of an SDK object, or a key of its dict form; None if absent."""
    if value is None:
        return None
    if type(value) is dict:  # the dict form
        return value.get(name)
    found = getattr(
        value, name, _ABSENT
    )  # an SDK object: before Mapping, an ABC (slow)
    if found is not _ABSENT:
        return found
    return value.get(name) if isinstance(value, Mapping) else None


def _count(value: object) -> int | None:
    """`value` if it is a token count: a non-negative int that is not a bool."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _detail_count(details: object, name: str) -> int | None:
    """An optional count: 0 when absent or null, None when present but invalid."""
    value = _get(details, name)
    return 0 if value is None else _count(value)


def _cost(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return float(value)


def _response_id(response: object) -> str | None:
    response_id = _get(response, "id")
    return response_id if isinstance(response_id, str) else None


def _model(response: object) -> str | None:
    model = _get(response, "model")
    return model if isinstance(model, str) else None


def _text_field(data: Mapping[str, object], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"usage field {key!r} must be a string or null, got {value!r}")
    return value


def _flag_field(data: Mapping[str, object], key: str) -> bool:
    value = data.get(key, True)
    if value is None:
        return True
    if not isinstance(value, bool):
        raise ValueError(f"usage field {key!r} must be true or false, got {value!r}")
    return value


def _token_field(data: Mapping[str, object], key: str) -> int:
    value = data.get(key)
    if value is None:
        return 0
    count = _count(value)
    if count is None:
        raise ValueError(
            f"usage field {key!r} must be a non-negative integer, got {value!r}"
        )
    return count
