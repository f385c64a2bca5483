"""The generic view: any stored value as plain JSON-like data, without its code.

`Codec.decode` rebuilds registered types only, so a process without the
application's modules (the CLI, a dashboard, an export) cannot read a step that
returned, say, an OpenAI `ChatCompletion`. The view reads the same tagged JSON
and builds nothing but dicts, lists, str, int, float, bool and None. It never
imports a module and never calls a constructor, so a tag naming any class (or
LangChain's `{"lc": 1, "type": "constructor", ...}`) is only shown, never acted
on. What the tags become:

```
registered type     {"$type": "openai.types.chat.chat_completion:ChatCompletion",
                     "id": ..., "choices": [...]}          fields (and pydantic extras)
enum                {"$type": "app:Color", "$value": 1}
tuple, set, frozenset {"$type": "tuple", "$items": [...]}
dict, non-str keys  {"$type": "map", "$items": [[key, value], ...]}
bytes, bytearray    {"$type": "bytes", "$size": 1234, "$head": "89504e47..."}
datetime, date, time, uuid, decimal      their stored ISO / canonical text
timedelta           {"$type": "timedelta", "$seconds": 5400.0}
int past 64 bits    the int (or {"$type": "int", "$hex": ..., "$bits": n} if huge)
NaN, +/-Infinity    {"$type": "float", "$value": "NaN"}        (keeps JSON strict)
unknown tag         {"$type": "<tag>", "$value": ...}          (a newer version's)
deeper than limit   {"$truncated": "nested deeper than 100 levels"}
```

Keys starting with "$" are the view's own. A stored dict key (or field name)
that starts with "$" is shown with one more: `"$ref"` becomes `"$$ref"`, so a
stored `{"$type": ...}` can never pass for a tag.

Bounded like every decode: a body over `ViewLimits.max_bytes`, or holding more
values than that allows (`resumable.serde.bounds`), is refused before it is
parsed, and the walk stops at `max_depth`. Every failure is a
`CorruptCheckpointError` naming the place, as when the same body is decoded.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from resumable.errors import CorruptCheckpointError
from resumable.serde.bounds import max_values, too_many_values, values_over
from resumable.serde.tags import EXTRA, FIELDS_SET, TAG, TEXT, VALUE

__all__ = ["TYPE_KEY", "ViewLimits", "escape_key", "one_line", "view_body"]

TYPE_KEY: Final = "$type"
"""The key that names a value's type in a view."""
_ITEMS: Final = "$items"
_VALUE_KEY: Final = "$value"
_TRUNCATED: Final = "$truncated"
# the keys the codec writes in a registered type's object
_REGISTERED_KEYS: Final = frozenset({TAG, VALUE, EXTRA, FIELDS_SET})
_SMALL_HEX: Final = 256  # a tagged int of up to 1024 bits is shown as the int


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewLimits:
    """How much of a stored value a view reads."""

    max_bytes: int = 64 * 1024 * 1024
    """A body (after the envelope is opened) larger than this is refused, and so
    is one holding more than one value per `bounds.BYTES_PER_VALUE` bytes of it."""
    max_depth: int = 100
    """Containers nested deeper than this are shown as a `$truncated` marker."""
    head_bytes: int = 16
    """How many leading bytes of a bytes value are shown, as hex."""


class _Malformed(Exception):
    """Raised inside the walk; the caller adds the place."""


def view_body(body: bytes, *, place: str, limits: ViewLimits | None = None) -> Any:
    """The view of an opened body (what `Envelope.open` returns).

    Raises:
        CorruptCheckpointError: The body is over the limit or not a payload the
            codec wrote.
    """
    limits = limits or ViewLimits()
    if len(body) > limits.max_bytes:
        raise CorruptCheckpointError(
            place=place,
            detail=f"the value is {len(body):,} bytes, over the {limits.max_bytes:,}"
            f"-byte limit for reading it (Engine(max_payload_bytes=...))",
        )
    if body[:1] != TEXT:
        limit = max_values(limits.max_bytes)
        count = values_over(body, limit)
        if count is not None:
            raise CorruptCheckpointError(
                place=place,
                detail=too_many_values(count, limit),
            )
    try:
        text = body.decode("utf-8", "surrogatepass")
        if body[:1] == TEXT:
            return text[1:]
        tree = json.loads(text)
        return _Viewer(limits).walk(tree, 0)
    except MemoryError:  # within the limits, yet too much for this process
        raise CorruptCheckpointError(
            place=place, detail="viewing it ran out of memory"
        ) from None
    except _Malformed as exc:
        raise CorruptCheckpointError(place=place, detail=str(exc)) from None
    except (ValueError, RecursionError) as exc:
        # json's own errors (and int digit limits) are ValueErrors; a nesting past
        # the interpreter's recursion limit cannot have been written by the codec
        detail = f"not a valid payload ({type(exc).__name__}: {str(exc)[:200]})"
        raise CorruptCheckpointError(place=place, detail=detail) from None


def escape_key(key: str) -> str:
    """A stored dict key as a view shows it: one more "$" if it starts with one."""
    return "$" + key if key[:1] == "$" else key


def _as_list(tag: str, payload: object) -> list[Any]:
    if type(payload) is not list:
        raise _Malformed(f"malformed {tag!r} value (expected a list)")
    return payload


def _as_str(tag: str, payload: object) -> str:
    if type(payload) is not str:
        raise _Malformed(f"malformed {tag!r} value (expected a string)")
    return payload


class _Viewer:
    """One walk over a parsed tree; holds only the limits."""

    def __init__(self, limits: ViewLimits) -> None:
        self._limits = limits
        self._builtins: dict[str, Callable[[str, Any, int], Any]] = {
            "tuple": self._items,
            "set": self._items,
            "frozenset": self._items,
            "map": self._map,
            "bytes": self._bytes,
            "bytearray": self._bytes,
            "datetime": self._text,
            "date": self._text,
            "time": self._text,
            "uuid": self._text,
            "decimal": self._text,
            "timedelta": self._timedelta,
            "int": self._int,
        }

    def walk(self, node: Any, depth: int) -> Any:
        kind = type(node)
        if kind is not dict and kind is not list:
            if kind is float and not math.isfinite(node):
                return {TYPE_KEY: "float", _VALUE_KEY: repr(node).replace("nan", "NaN")}
            return node  # str, int, float, bool, None: all json.loads makes besides
        if depth >= self._limits.max_depth:
            return {_TRUNCATED: f"nested deeper than {self._limits.max_depth} levels"}
        if kind is list:
            return [self.walk(x, depth + 1) for x in node]
        if TAG in node:
            return self._tagged(node, depth)
        return {escape_key(k): self.walk(x, depth + 1) for k, x in node.items()}

    def _tagged(self, node: dict[str, Any], depth: int) -> Any:
        tag = node[TAG]
        if type(tag) is not str:
            raise _Malformed("a type tag is not a string")
        builtin = self._builtins.get(tag)
        if builtin is not None:
            if len(node) != 2 or VALUE not in node:
                raise _Malformed(f"malformed {tag!r} value")
            return builtin(tag, node[VALUE], depth)
        if not node.keys() <= _REGISTERED_KEYS:
            raise _Malformed(f"malformed {tag[:100]!r} value (unknown keys)")
        out: dict[str, Any] = {TYPE_KEY: tag}
        payload = node.get(VALUE)
        if type(payload) is dict:  # a dataclass, NamedTuple or pydantic model
            for key, x in payload.items():
                out[escape_key(key)] = self.walk(x, depth + 1)
            extra = node.get(EXTRA)
            if type(extra) is dict:
                for key, x in extra.items():
                    out.setdefault(escape_key(key), self.walk(x, depth + 1))
        elif VALUE in node:  # an enum, or a tag this version does not know
            out[_VALUE_KEY] = self.walk(payload, depth + 1)
        return out

    def _items(self, tag: str, payload: Any, depth: int) -> Any:
        items = _as_list(tag, payload)
        return {TYPE_KEY: tag, _ITEMS: [self.walk(x, depth + 1) for x in items]}

    def _map(self, tag: str, payload: Any, depth: int) -> Any:
        pairs = []
        for pair in _as_list(tag, payload):
            if type(pair) is not list or len(pair) != 2:
                raise _Malformed("malformed 'map' value (an entry is not a pair)")
            pairs.append([self.walk(pair[0], depth + 1), self.walk(pair[1], depth + 1)])
        return {TYPE_KEY: tag, _ITEMS: pairs}

    def _bytes(self, tag: str, payload: Any, depth: int) -> Any:
        text = _as_str(tag, payload)
        if len(text) % 4:
            raise _Malformed(f"malformed {tag!r} value (not base64)")
        # only the head is decoded: the checksum already vouched for the rest
        chunk = -(-self._limits.head_bytes // 3) * 4
        try:
            head = base64.b64decode(text[:chunk], validate=True)
        except (binascii.Error, ValueError):
            raise _Malformed(f"malformed {tag!r} value (not base64)") from None
        size = len(text) // 4 * 3 - text[-2:].count("=")
        return {
            TYPE_KEY: tag,
            "$size": size,
            "$head": head[: self._limits.head_bytes].hex(),
        }

    def _text(self, tag: str, payload: Any, depth: int) -> Any:
        return _as_str(tag, payload)  # ISO text as stored: nothing is parsed

    def _timedelta(self, tag: str, payload: Any, depth: int) -> Any:
        parts = _as_list(tag, payload)
        if len(parts) != 3 or not all(type(p) is int for p in parts):
            raise _Malformed("malformed 'timedelta' value")
        days, seconds, micros = parts
        try:
            total = float(days * 86_400 + seconds) + micros / 1_000_000
        except OverflowError:
            raise _Malformed("malformed 'timedelta' value (out of range)") from None
        return {TYPE_KEY: tag, "$seconds": total}

    def _int(self, tag: str, payload: Any, depth: int) -> Any:
        digits = _as_str(tag, payload)
        sign, magnitude = ("-", digits[1:]) if digits[:1] == "-" else ("", digits)
        if not magnitude or magnitude.strip("0123456789abcdef"):
            raise _Malformed("malformed 'int' value (not hex)")
        if len(magnitude) <= _SMALL_HEX:
            return int(digits, 16)
        return {
            TYPE_KEY: tag,
            "$hex": sign + magnitude[:64] + "...",
            "$bits": len(magnitude) * 4,
        }


# ---------------------------------------------------------------- one line


class _Full(Exception):
    """The line reached its width."""


class _Line:
    """A bounded writer: stops the walk once `width` characters are written."""

    def __init__(self, width: int) -> None:
        self.parts: list[str] = []
        self.left = width

    def put(self, text: str) -> None:
        self.parts.append(text)
        self.left -= len(text)
        if self.left < 0:
            raise _Full


def one_line(value: Any, width: int) -> str:
    """A view as one line of at most `width` characters, for tables.

    Tagged values read like constructor calls (`Message(role="user", ...)`,
    `tuple(1, 2)`); the walk stops as soon as the line is full, so a huge value
    costs no more than a small one. A typed value too long for the line shows
    its type and its longest text instead (an LLM response's ids and flags
    would fill the line before its answer): `ChatCompletion: "The report..."`.
    """
    line = _Line(width)
    try:
        _put(line, value)
    except _Full:
        tag = value.get(TYPE_KEY) if type(value) is dict else None
        if type(tag) is str and ":" in tag:
            text = _longest_text(value)
            if text is not None:
                return _one_line_text(f"{tag.rpartition(':')[2]}: ", text, width)
        return "".join(line.parts)[: width - 1] + "…"
    return "".join(line.parts)


def _one_line_text(prefix: str, text: str, width: int) -> str:
    """`prefix` and then `text` quoted, clipped to `width` characters."""
    line = _Line(width)
    try:
        line.put(prefix)
        _put(line, text)
    except _Full:
        return "".join(line.parts)[: width - 1] + "…"
    return "".join(line.parts)


_HEADLINE_NODES: Final = 2000  # how much of a value the search for its text reads


def _longest_text(value: Any) -> str | None:
    """The longest string in a view (not a key, not a type name), in bounded time."""
    best: str | None = None
    pending = [value]
    for _ in range(_HEADLINE_NODES):
        if not pending:
            break
        item = pending.pop()
        kind = type(item)
        if kind is str:
            if best is None or len(item) > len(best):
                best = item
        elif kind is list:
            pending.extend(reversed(item))
        elif kind is dict:
            pending.extend(x for k, x in reversed(item.items()) if k != TYPE_KEY)
    return best


def _put(line: _Line, value: Any) -> None:
    kind = type(value)
    if kind is str:
        room = line.left + 2  # a longer string cannot fit: only its head is read
        line.put(json.dumps(" ".join(value[:room].split()), ensure_ascii=False))
        if len(value) > room:
            raise _Full
    elif kind is list:
        _put_all(line, "[", value, "]")
    elif kind is dict:
        _put_dict(line, value)
    else:
        line.put(json.dumps(value))


def _put_all(line: _Line, start: str, items: list[Any], end: str) -> None:
    line.put(start)
    for i, item in enumerate(items):
        if i:
            line.put(", ")
        _put(line, item)
    line.put(end)


def _put_dict(line: _Line, value: dict[str, Any]) -> None:
    tag = value.get(TYPE_KEY)
    if type(tag) is not str:
        line.put("{")
        for i, (key, item) in enumerate(value.items()):
            line.put((", " if i else "") + json.dumps(key, ensure_ascii=False) + ": ")
            _put(line, item)
        line.put("}")
        return
    name = tag.rpartition(":")[2] or tag
    if _ITEMS in value and tag != "map":
        _put_all(line, f"{name}(", value[_ITEMS], ")")
    elif tag in ("bytes", "bytearray"):
        line.put(f"<{name} {value.get('$size')} B {value.get('$head')}>")
    elif tag == "float":
        line.put(str(value.get(_VALUE_KEY)))
    elif tag == "timedelta":
        line.put(f"timedelta({value.get('$seconds')} s)")
    else:
        line.put(f"{name}(")
        for i, (key, item) in enumerate(value.items()):
            if key == TYPE_KEY:
                continue
            line.put(", " if i > 1 else "")
            if key not in (_VALUE_KEY, _ITEMS):
                line.put(f"{key}=")
            _put(line, item)
        line.put(")")
