"""Decoding tagged JSON: json's object hook, rebuilding allowed types only.

A tag names a type in the `TypeRegistry` allowlist; it never causes an import.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, cast
from uuid import UUID

from resumable.errors import SerializationError
from resumable.serde.bounds import MAX_SHARED_HASHES, shared_hashes
from resumable.serde.registry import TypeInfo, TypeRegistry
from resumable.serde.tags import (
    BYTES_CLOSE,
    BYTES_OPEN,
    DECODE_PATH,
    EXTRA,
    FIELDS_SET,
    TAG,
    VALUE,
    DecodeError,
)


def _as_list(payload: object) -> list[Any]:
    if type(payload) is not list:
        raise TypeError("expected a list")
    return payload


def _as_str(payload: object) -> str:
    if type(payload) is not str:
        raise TypeError("expected a string")
    return payload


def _spread(items: list[Any]) -> list[Any]:
    """`items`, checked to be cheap to put in a set or dict (`bounds.shared_hashes`)."""
    shared = shared_hashes(items)
    if shared > MAX_SHARED_HASHES:
        raise ValueError(
            f"{shared:,} of its items hash like another one, over the limit of "
            f"{MAX_SHARED_HASHES}: rebuilding it would take quadratic time"
        )
    return items


_no_pair = object()  # what stands for a map entry that is not a pair


def _dec_map(payload: object) -> dict[Any, Any]:
    pairs = _as_list(payload)
    keys = [
        pair[0] if type(pair) is list and len(pair) == 2 else _no_pair for pair in pairs
    ]
    if _no_pair in keys:
        raise ValueError("a map entry is not a [key, value] pair")
    _spread(keys)
    return dict(pairs)


def _dec_timedelta(payload: object) -> timedelta:
    parts = _as_list(payload)
    if len(parts) != 3 or not all(type(p) is int for p in parts):
        raise ValueError("expected [days, seconds, microseconds]")
    return timedelta(days=parts[0], seconds=parts[1], microseconds=parts[2])


_BUILTIN_DECODERS: dict[str, Callable[[Any], Any]] = {
    "tuple": lambda p: tuple(_as_list(p)),
    "set": lambda p: set(_spread(_as_list(p))),
    "frozenset": lambda p: frozenset(_spread(_as_list(p))),
    "map": _dec_map,
    "bytes": lambda p: base64.b64decode(_as_str(p), validate=True),
    "bytearray": lambda p: bytearray(base64.b64decode(_as_str(p), validate=True)),
    "datetime": lambda p: datetime.fromisoformat(_as_str(p)),
    "date": lambda p: date.fromisoformat(_as_str(p)),
    "time": lambda p: time.fromisoformat(_as_str(p)),
    "timedelta": _dec_timedelta,
    "uuid": lambda p: UUID(_as_str(p)),
    "decimal": lambda p: Decimal(_as_str(p)),
    "int": lambda p: int(_as_str(p), 16),
}


def make_object_hook(registry: TypeRegistry) -> Callable[[dict[str, Any]], Any]:
    """Build json's object_hook: called bottom-up on every decoded JSON object."""
    builtins = _BUILTIN_DECODERS

    def hook(obj: dict[str, Any]) -> Any:
        if TAG not in obj:
            return obj
        tag = obj[TAG]
        if type(tag) is not str:
            raise DecodeError("a type tag is not a string")
        decode = builtins.get(tag)
        if decode is None:
            return _rebuild(registry, tag, obj)
        if len(obj) != 2 or VALUE not in obj:
            raise DecodeError(f"malformed {tag!r} value")
        try:
            return decode(obj[VALUE])
        except (TypeError, ValueError, ArithmeticError) as exc:
            raise DecodeError(f"malformed {tag!r} value ({exc})") from exc

    return hook


def _rebuild(registry: TypeRegistry, tag: str, obj: dict[str, Any]) -> Any:
    tp = registry.lookup(tag)
    if tp is None:
        if ":" not in tag:
            raise DecodeError(f"unknown type tag {tag!r}")
        raise SerializationError(
            path=DECODE_PATH,
            detail=(
                f"type {tag!r} is not registered, so it was not rebuilt; pass the "
                f"class to resumable.register() (or TypeRegistry.register) before "
                f"loading"
            ),
        )
    entry = registry.info(tp)
    if entry is None or VALUE not in obj:
        raise DecodeError(f"malformed {tag!r} value")
    payload = obj[VALUE]
    if entry.kind != "enum" and type(payload) is not dict:
        raise DecodeError(f"malformed {tag!r} value")
    try:
        if entry.kind == "enum":
            return tp(payload)
        if entry.kind == "dataclass":
            return _build_dataclass(tp, entry, payload)
        if entry.kind == "namedtuple":
            return tp(**{k: payload[k] for k in entry.fields if k in payload})
        return _build_model(tp, tag, obj, payload)
    except DecodeError:
        raise
    except Exception as exc:
        raise SerializationError(
            path=DECODE_PATH,
            detail=(
                f"could not rebuild {tag!r} from its stored fields "
                f"({type(exc).__name__}: {exc}); did the class change since it was "
                f"stored?"
            ),
        ) from exc


def _build_dataclass(tp: type, entry: TypeInfo, payload: dict[str, Any]) -> object:
    # Built through the constructor, as Temporal and LangGraph do, so __post_init__
    # sets up whatever is not a field; init=False fields are restored afterwards.
    if entry.has_init:
        obj = tp(
            **{
                name: payload[name]
                for name in entry.fields
                if name in payload and name not in entry.late
            }
        )
        names: tuple[str, ...] | frozenset[str] = entry.late
    else:
        new = cast("Callable[[type], object]", tp.__new__)  # tp is a class, not type
        obj = new(tp)
        names = entry.fields
    for name in names:
        if name in payload:
            # object.__setattr__ also works on frozen and slotted dataclasses.
            object.__setattr__(obj, name, payload[name])
    return obj


def _build_model(
    tp: type, tag: str, obj: dict[str, Any], payload: dict[str, Any]
) -> object:
    # Rebuilt with model_construct, not model_validate: the fields were encoded one
    # by one through this codec (nested models, subclasses, tuples keep their
    # types), and validators that transform values must not run a second time.
    values = dict(payload)
    extra = obj.get(EXTRA)
    if extra is not None:
        if type(extra) is not dict:
            raise DecodeError(f"malformed {tag!r} value")
        for key, x in extra.items():
            values.setdefault(key, x)
    fields_set: set[str] | None = None
    if FIELDS_SET in obj:
        names = obj[FIELDS_SET]
        if type(names) is not list or not all(type(n) is str for n in names):
            raise DecodeError(f"malformed {tag!r} value")
        fields_set = set(names)
    construct: Callable[..., object] = getattr(tp, "model_construct")  # noqa: B009 - tp is a pydantic model class typed as plain type
    return construct(_fields_set=fields_set, **values)


def top_level_bytes(data: bytes | bytearray | memoryview) -> bytes | None:
    """The value of a body that is one `bytes` value, decoded from its base64 in place.

    None when the text between `BYTES_OPEN` and `BYTES_CLOSE` is not strict
    base64 (a quote, an escape, damage): the JSON parser then decides, so this
    returns a value only where the parser would return the same one.
    """
    try:
        return binascii.a2b_base64(
            memoryview(data)[len(BYTES_OPEN) : -len(BYTES_CLOSE)], strict_mode=True
        )
    except binascii.Error:
        return None
