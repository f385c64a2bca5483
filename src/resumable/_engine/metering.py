"""SDK metering: the usage of every `openai`/`anthropic` call a step attempt makes.

A step is metered where its calls happen, not from what it returns: a step that
returns `r.choices[0].message.content`, a parsed object, a streamed text or
nothing costs what its calls cost. While an attempt runs (the `_step` ContextVar
the attempt sets is the switch), each call made through either SDK adds one
`Usage` to the attempt's calls; outside a step the wrappers only delegate.

Where it hooks in, and why there: OpenTelemetry's GenAI instrumentations wrap
resource methods (`Completions.create`, `Messages.create`, ...). Both SDKs
route every resource method through one public method of their client,
`OpenAI.request` / `Anthropic.request` (and the async twins), looked up on the
client at each call: `create`, `parse`, the `stream()` helpers (which call the
client directly, not `create`), `with_raw_response` and `with_streaming_response`
(whose wrappers bind `create` when first used, and would keep an unwrapped one),
every client built before or after this runs, and frameworks that hold a client
(LangChain's ChatOpenAI, Pydantic AI, the OpenAI Agents SDK). One wrapper per
client class covers them all; a list of resource methods would miss each new
helper an SDK release adds. The SDKs have no public request/response hook
except a custom `http_client`, which needs user code. The wrapper reads only
public attributes: the request's `url` and `json_data` (the path and the body),
the result's fields, and a raw response's public `parse()` (cached by the SDK,
so the caller's own `parse()` returns the same object). What a result is (a
response, a stream, a raw response) and which markers a stream event's class
has are looked at once per class, not per call or chunk: looking for a field
an SDK model lacks makes pydantic raise and catch AttributeError inside.

A stream's usage arrives in its last events, so a streamed call is added as
unmetered when the stream is returned and replaced by its usage when the event
carrying it is iterated (`Stream.__iter__`/`__next__` and the async twins are
wrapped; only streams made inside a step are followed, by a weak map). A
stream cut short, or one whose request did not ask for usage (Chat Completions
without `stream_options={"include_usage": True}`), stays unmetered, as does a
response without usage. The meter never changes what a call sends or returns.

`install()` patches the SDKs already imported, once, for the whole process; the
engine calls it at every attempt (it compares the count of `sys.modules` with the
last one it saw, so this costs nothing when no module was imported since), so an
SDK imported later, even inside a step, is metered from its first call.
`Engine(metering=False)` or RESUMABLE_METERING=0 turns it off for an engine's
runs (the wrappers then only delegate).

What it cannot see: a call made on a thread that did not copy the step's
context (a plain `ThreadPoolExecutor`; `asyncio.to_thread`, LangChain's
executors and `contextvars.copy_context().run` do copy it), and a call through
any other client (use `current_run().record_usage`). A `with_streaming_response`
body read as raw bytes or lines, not through `parse()`, stays unmetered.
"""

from __future__ import annotations

import inspect
import os
import sys
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

from resumable._engine.context import _step
from resumable.usage import Usage, response_usage

_SDKS = {
    "openai": (("OpenAI", "AsyncOpenAI"), ("Stream", "AsyncStream")),
    "anthropic": (("Anthropic", "AsyncAnthropic"), ("Stream", "AsyncStream")),
}
_LLM_PATHS = ("/chat/completions", "/responses", "/messages", "/completions")
"""POSTs to these are LLM calls: metered, or counted as unmetered."""
_STREAM_DONE = frozenset(
    {"response.completed", "response.incomplete", "response.failed"}
)

_T = TypeVar("_T")

_patched: dict[str, list[tuple[type, str, Any, bool]]] = {}
"""SDK name -> (class, attribute, original, whether the class defined it itself)."""
_modules_seen = 0
"""How many modules were imported when `install` last looked for the SDKs."""
_stream_classes: tuple[type, ...] = ()
"""The SDKs' stream classes whose iteration is followed."""
_taps: weakref.WeakKeyDictionary[Any, _Tap] = weakref.WeakKeyDictionary()
"""The streams made inside a step, and where their usage goes."""


def metering_by_default() -> bool:
    """Whether an Engine meters when not told: yes, unless RESUMABLE_METERING=0."""
    value = os.environ.get("RESUMABLE_METERING", "").strip().lower()
    return value not in ("0", "false", "off", "no")


def install() -> None:
    """Meter the SDKs imported so far (each once); cheap when there is nothing new.

    Called at every attempt: when no module was imported since the last call
    (the count of `sys.modules` is unchanged), there is nothing to look at.
    """
    global _modules_seen  # noqa: PLW0603 - the process-wide patch's own bookkeeping
    if len(sys.modules) == _modules_seen or len(_patched) == len(_SDKS):
        return
    _modules_seen = len(sys.modules)
    for name, (clients, streams) in _SDKS.items():
        module = sys.modules.get(name)
        if module is not None and name not in _patched:
            _patch(name, module, clients, streams)


def uninstall() -> None:
    """Restore the SDKs' own methods (for benchmarks and tests of the meter)."""
    for patches in _patched.values():
        for cls, attr, original, owned in patches:
            if owned:
                setattr(cls, attr, original)
            else:
                delattr(cls, attr)
    _patched.clear()
    _kinds.clear()
    _markers.clear()
    global _stream_classes  # noqa: PLW0603 - the process-wide patch's own bookkeeping
    _stream_classes = ()
    global _modules_seen  # noqa: PLW0603 - the process-wide patch's own bookkeeping
    _modules_seen = 0


def _patch(
    provider: str, module: Any, clients: tuple[str, str], streams: tuple[str, str]
) -> None:
    patches: list[tuple[type, str, Any, bool]] = []
    sync_client, async_client = (getattr(module, n, None) for n in clients)
    sync_stream, async_stream = (getattr(module, n, None) for n in streams)
    plan: list[tuple[Any, str, Callable[[Any, str], Any]]] = [
        (sync_client, "request", _sync_request),
        (async_client, "request", _async_request),
        (sync_stream, "__iter__", _stream_iter),
        (sync_stream, "__next__", _stream_next),
        (async_stream, "__aiter__", _stream_aiter),
        (async_stream, "__anext__", _stream_anext),
    ]
    for cls, attr, wrap in plan:
        original = getattr(cls, attr, None) if isinstance(cls, type) else None
        if original is None:
            continue  # an SDK version without it: the rest still works
        patches.append((cls, attr, original, attr in vars(cls)))
        setattr(cls, attr, wrap(original, provider))
        if attr in ("__iter__", "__aiter__"):
            global _stream_classes  # noqa: PLW0603 - the process-wide patch's own bookkeeping
            _stream_classes = (*_stream_classes, cls)
    _patched[provider] = patches
    _kinds.clear()  # a class seen before may be one of the streams followed now


# --- calls ------------------------------------------------------------------------


def _attempt_calls() -> list[Usage] | None:
    """The calls list of the attempt running here, if metering is on for its run."""
    scope = _step.get()
    if scope is None or not scope[0].runtime.metering:
        return None
    return scope[4]


def _llm_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The request body of an LLM call (`request(cast_to, options, ...)`); else None."""
    options = args[1] if len(args) > 1 else kwargs.get("options")
    url = getattr(options, "url", None)
    if not isinstance(url, str):
        return None
    # the SDKs pass the bare path ("/chat/completions"): a query or a trailing
    # slash only where a caller built the URL itself
    if not url.endswith(_LLM_PATHS) and not url.partition("?")[0].rstrip("/").endswith(
        _LLM_PATHS
    ):
        return None
    if str(getattr(options, "method", "post")).lower() != "post":
        return None
    body = getattr(options, "json_data", None)
    return body if isinstance(body, dict) else {}


def _sync_request(original: Any, provider: str) -> Any:
    def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls = _attempt_calls()
        if calls is None:
            return original(self, *args, **kwargs)
        body = _llm_call(args, kwargs)
        result = original(self, *args, **kwargs)
        if body is not None:
            kind = _kind(result)
            if kind is _RAW:
                parsed = _parsed(result)
                _meter(calls, provider, body, parsed, _kind(parsed))
            else:
                _meter(calls, provider, body, result, kind)
        return result

    return request


def _async_request(original: Any, provider: str) -> Any:
    async def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls = _attempt_calls()
        if calls is None:
            return await original(self, *args, **kwargs)
        body = _llm_call(args, kwargs)
        result = await original(self, *args, **kwargs)
        if body is not None:
            kind = _kind(result)
            if kind is _RAW:
                parsed = _parsed(result)
                if inspect.isawaitable(parsed):  # `with_streaming_response`'s parse
                    try:
                        parsed = await parsed
                    except Exception:  # noqa: BLE001 - unreadable: counted as unmetered
                        parsed = None
                _meter(calls, provider, body, parsed, _kind(parsed))
            else:
                _meter(calls, provider, body, result, kind)
        return result

    return request


_RESPONSE, _STREAM, _RAW = "response", "stream", "raw"
"""What a call's result is: a response object, a stream to follow, or a raw
response (`with_raw_response`, `with_streaming_response`) to parse first."""
_kinds: dict[type, str] = {}
"""The kind of each class of result seen so far."""
_markers: dict[type, tuple[bool, bool]] = {}
"""Whether each class of stream event seen so far has a `type`, an `object` field."""
_CLASSES_KEPT = 256
"""At most this many classes in each (classes made on the fly are not kept without bound)."""


def _per_class(cache: dict[type, _T], value: Any, look: Callable[[Any], _T]) -> _T:
    """`look(value)`, looked at once per class of `value`.

    What a call's result or a stream's event is, and which fields it has, is a
    fact of its (SDK) class; and a field an SDK model lacks is slow to look for
    (pydantic raises AttributeError inside, twice).
    """
    found = cache.get(type(value))
    if found is None:
        if len(cache) >= _CLASSES_KEPT:
            cache.clear()
        found = cache[type(value)] = look(value)
    return found


def _kind(result: Any) -> str:
    return _per_class(_kinds, result, _kind_of)


def _kind_of(result: Any) -> str:
    if isinstance(result, _stream_classes):
        return _STREAM
    # the class first: a response model's own __getattr__ is slow to say no
    if callable(getattr(type(result), "parse", None)) and hasattr(
        result, "http_response"
    ):
        return _RAW
    return _RESPONSE


def _parsed(raw: Any) -> Any:
    """The response object of a raw response, as the SDK parses (and caches) it."""
    try:
        return raw.parse()
    except Exception:  # noqa: BLE001 - unreadable: counted as unmetered
        return None


def _meter(
    calls: list[Usage], provider: str, body: dict[str, Any], response: Any, kind: str
) -> None:
    """Add the call's usage, or an unmetered call to fill in when its stream ends."""
    if kind is _STREAM:
        pending = _unmetered(provider, body)
        _taps[response] = _Tap(calls, len(calls), pending)
        calls.append(pending)
        return
    found = response_usage(response, provider=provider)
    calls.append(found or _unmetered(provider, body))


def _unmetered(provider: str, body: dict[str, Any]) -> Usage:
    model = body.get("model")
    return Usage(
        model=model if isinstance(model, str) else None,
        provider=provider,
        is_metered=False,
    )


# --- streams ------------------------------------------------------------------------


class _Tap:
    """Where one stream's usage goes: a slot in its attempt's calls."""

    __slots__ = ("calls", "index", "start", "usage")

    def __init__(self, calls: list[Usage], index: int, usage: Usage) -> None:
        self.calls, self.index, self.usage = calls, index, usage
        self.start: Usage | None = None  # Anthropic's message_start usage

    def see(self, event: Any) -> None:
        """Read an event; the one that carries usage fills in the call."""
        try:
            found = self._usage(event)
        except Exception:  # noqa: BLE001 - an odd event never breaks the stream
            return
        if found is not None:
            self.calls[self.index] = found

    def _usage(self, event: Any) -> Usage | None:
        has_type, has_object = _per_class(_markers, event, _markers_of)
        kind = getattr(event, "type", None) if has_type else None
        if kind == "message_start":  # Anthropic: input now, output at message_delta
            message = getattr(event, "message", None)
            self.start = response_usage(message, provider="anthropic") or self.start
            return None
        if kind == "message_delta":
            return self._delta_usage(getattr(event, "usage", None))
        if kind in _STREAM_DONE:  # Responses: the final response carries usage
            return response_usage(getattr(event, "response", None))
        # Chat Completions: only the last chunk carries usage (when asked for)
        if (
            has_object
            and getattr(event, "object", None) == "chat.completion.chunk"
            and getattr(event, "usage", None) is not None
        ):
            return response_usage(event)
        return None

    def _delta_usage(self, delta: Any) -> Usage | None:
        """Anthropic's message_delta usage: the output count, and any input ones."""
        start, output = self.start, getattr(delta, "output_tokens", None)
        if start is None or not isinstance(output, int):
            return None
        counts = [
            getattr(delta, key, None)
            for key in (
                "input_tokens",
                "cache_read_input_tokens",
                "cache_creation_input_tokens",
            )
        ]
        given, read, written = (c if isinstance(c, int) else None for c in counts)
        return Usage(  # the start's, with what the delta counted
            model=start.model,
            provider=start.provider,
            response_id=start.response_id,
            cost_usd=start.cost_usd,
            is_metered=start.is_metered,
            input_tokens=start.input_tokens if given is None else given,
            cached_input_tokens=start.cached_input_tokens if read is None else read,
            cache_write_tokens=start.cache_write_tokens if written is None else written,
            output_tokens=output,
        )

    def follow(self, items: Iterator[Any]) -> Iterator[Any]:
        for item in items:
            self.see(item)
            yield item

    async def follow_async(self, items: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for item in items:
            self.see(item)
            yield item


def _markers_of(event: Any) -> tuple[bool, bool]:
    return hasattr(event, "type"), hasattr(event, "object")


def _stream_iter(original: Any, _: str) -> Any:
    def __iter__(self: Any) -> Iterator[Any]:  # noqa: N807 - the dunder it replaces
        items = original(self)
        tap = _taps.get(self)
        return items if tap is None else tap.follow(items)

    return __iter__


def _stream_next(original: Any, _: str) -> Any:
    def __next__(self: Any) -> Any:  # noqa: N807 - the dunder it replaces
        item = original(self)
        tap = _taps.get(self)
        if tap is not None:
            tap.see(item)
        return item

    return __next__


def _stream_aiter(original: Any, _: str) -> Any:
    def __aiter__(self: Any) -> AsyncIterator[Any]:  # noqa: N807 - the dunder it replaces
        items = original(self)
        tap = _taps.get(self)
        return items if tap is None else tap.follow_async(items)

    return __aiter__


def _stream_anext(original: Any, _: str) -> Any:
    async def __anext__(self: Any) -> Any:  # noqa: N807 - the dunder it replaces
        item = await original(self)
        tap = _taps.get(self)
        if tap is not None:
            tap.see(item)
        return item

    return __anext__
