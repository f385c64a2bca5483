"""Tagged JSON: turns step results into bytes and back to the same types.

The body is UTF-8 JSON written with the "surrogatepass" error handler, so strings
with lone surrogates (common in LLM output) round-trip. JSON-native values are
stored as themselves: None, bool, int, float (NaN and +/-Infinity use the
`NaN`/`Infinity` tokens of Python's json module), str, list, and dicts whose keys
are all strings. Everything else is an object carrying the tag key `"~"`:

```
{"~": "tuple", "v": [1, 2]}                 built-in kinds: tags without a colon
{"~": "app.models:Invoice", "v": {...}}     registered types: "module:qualname"
{"~": "map", "v": [[1, "a"], [2, "b"]]}     a dict with a non-str key or a "~" key
```

A plain dict that has a `"~"` key of its own is stored as a `map`, so stored data
can never be mistaken for a tag. Decoding builds registered types only from the
`TypeRegistry` allowlist: a tag names a type, it never causes an import.

A step result that is one plain `str` (the common LLM step result) skips JSON: its
body is the byte 0x01 and then the text's UTF-8. No JSON document starts with that
byte, so the two forms never mix up; it costs one copy each way instead of a scan
for characters to escape.

Lossy on purpose, and documented: an aware datetime or time keeps its UTC offset
but a `zoneinfo` zone comes back as a fixed-offset `datetime.timezone`; pydantic
private attributes are not stored (as with `model_dump`); a dataclass or
NamedTuple is rebuilt through its constructor, so `__post_init__` runs again.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import types
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Final, cast
from uuid import UUID

from resumable.errors import SerializationError
from resumable.serde.registry import TypeInfo, TypeRegistry
from resumable.serde.streams import STREAM_OVER, Encoded, bytes_stream, text_stream

__all__ = ["Codec", "DecodeError", "Encoded", "TypeRegistry"]

# A JSON-ready tree: what the walk hands to json, and what json hands back.
Json = Any

_TAG = "~"
_TAG_KEY: Final = json.dumps(_TAG) + ":"  # how the tag shows as a key in JSON text
_VALUE = "v"
_EXTRA = "x"  # pydantic: extra fields (model_config extra="allow")
_FIELDS_SET = "s"  # pydantic: model_fields_set, when it is not every field

# Types json writes and reads back unchanged. Exact types only: a subclass (IntEnum,
# OrderedDict, a str subclass) must not silently come back as its base.
_PLAIN: frozenset[type] = frozenset({str, int, float, bool, type(None)})
# Python refuses int <-> decimal str conversion past sys.get_int_max_str_digits()
# (4300 digits by default), so huge ints are tagged as hex when that happens.
_PLAIN_SAFE: frozenset[type] = _PLAIN - {int}
_INT_PLAIN_LIMIT = 1 << 64

_DECODE_PATH = "stored value"
_TEXT: Final = b"\x01"  # a body of raw UTF-8 text follows (see the module docstring)
# how json writes one top-level bytes value, around its base64 (which needs no escapes)
_BYTES_OPEN: Final = b'{"~":"bytes","v":"'
_BYTES_CLOSE: Final = b'"}'


class DecodeError(ValueError):
    """The bytes are not a payload this codec wrote (malformed or damaged).

    Deliberately not a `ResumableError`: the integrity layer, which knows the run
    and step, turns it into `CorruptCheckpointError`.
    """


# ---------------------------------------------------------------- encoding


class _Unencodable(Exception):
    """Raised inside the walk; collects the path on its way out, innermost first."""

    def __init__(self, value: object, detail: str) -> None:
        super().__init__(detail)
        self.value = value  # the object at the level the path has reached
        self.detail = detail
        self.segments: list[str] = []

    def at(self, segment: str, container: object) -> None:
        self.segments.append(segment)
        self.value = container

    def path(self, root: str) -> str:
        return root + "".join(reversed(self.segments))


def _key_segment(key: object) -> str:
    if type(key) is str:
        return f"[{json.dumps(key, ensure_ascii=False)}]"
    return f"[{key!r}]"


def _index_of(items: list[Any] | tuple[Any, ...], child: object) -> int:
    return next((i for i, item in enumerate(items) if item is child), -1)


def _type_name(tp: type) -> str:
    return f"{getattr(tp, '__module__', '?')}:{getattr(tp, '__qualname__', '?')}"


def _not_serializable(value: object) -> str:
    tp = type(value)
    name = tp.__qualname__
    for base in (dict, list, tuple, set, frozenset, str, bytes, int, float):
        if issubclass(tp, base):
            return (
                f"{name} (a {base.__name__} subclass) is not serializable; "
                f"convert it to a plain {base.__name__}"
            )
    if isinstance(value, type | types.FunctionType | types.BuiltinFunctionType):
        return f"{name} {value.__qualname__!r} is not serializable"
    return f"{name} is not serializable"


def _not_registered(tag: str, kind: type) -> str:
    return (
        f"type {tag!r} is not registered, so a stored {kind.__qualname__} could not "
        f"be decoded back; name it in a step or workflow annotation, or call "
        f"resumable.register({kind.__qualname__})"
    )


_FLAT_TAGS: dict[type, bytes] = {
    str: b"s",
    int: b"i",
    float: b"d",
    bool: b"b",
    type(None): b"n",
}


_FLAT_TUPLE_BLAKE2B: Final = hashlib.blake2b(digest_size=8, person=b"flat-tuple")


def _flat_tuple_digest(values: tuple[Any, ...]) -> str | None:
    """The fingerprint of a tuple of scalars, without a JSON round; None otherwise.

    Each element is its type's tag, its length and its exact bytes (floats as
    float.hex, ints in decimal, text as UTF-8 with surrogates passed), so equal
    values of different types never collide and nothing depends on repr() or the
    Python version. A separate personalization keeps these digests apart from
    the JSON-based ones of every other value. An int past 64 bits, or anything
    but str, int, float, bool and None, makes it None: the caller takes the JSON
    route.
    """
    digest = _FLAT_TUPLE_BLAKE2B.copy()  # 3x cheaper than a new personalized one
    for value in values:
        kind = type(value)
        if kind is str:
            data = value.encode("utf-8", "surrogatepass")
        elif kind is int:
            if not -_INT_PLAIN_LIMIT < value < _INT_PLAIN_LIMIT:
                return None
            data = str(value).encode()
        elif kind is float:
            data = value.hex().encode()
        elif kind is bool:  # True is not 1 here: the tags differ
            data = b"1" if value else b"0"
        elif kind is type(None):
            data = b""
        else:
            return None
        digest.update(_FLAT_TAGS[kind] + len(data).to_bytes(4, "big") + data)
    return digest.hexdigest()


def _enc_int(value: int) -> Json:
    if -_INT_PLAIN_LIMIT < value < _INT_PLAIN_LIMIT:
        return value
    return {_TAG: "int", _VALUE: format(value, "x")}


# Values with no inner values: one function each, shared by encoder and fingerprint.
_LEAF_ENCODERS: dict[type, Callable[[Any], Json]] = {
    bytes: lambda v: {_TAG: "bytes", _VALUE: base64.b64encode(v).decode("ascii")},
    bytearray: lambda v: {
        _TAG: "bytearray",
        _VALUE: base64.b64encode(v).decode("ascii"),
    },
    datetime: lambda v: {_TAG: "datetime", _VALUE: v.isoformat()},
    date: lambda v: {_TAG: "date", _VALUE: v.isoformat()},
    time: lambda v: {_TAG: "time", _VALUE: v.isoformat()},
    timedelta: lambda v: {
        _TAG: "timedelta",
        _VALUE: [v.days, v.seconds, v.microseconds],
    },
    UUID: lambda v: {_TAG: "uuid", _VALUE: str(v)},
    Decimal: lambda v: {_TAG: "decimal", _VALUE: str(v)},
}


def _make_encoder(
    registry: TypeRegistry, *, safe_ints: bool
) -> Callable[[object], Json]:
    """Build the walk that turns a value into a JSON-ready tree.

    Built once per Codec: the closures read their helpers as cell variables, which
    is the cheapest lookup Python has, and nothing is allocated per call but the
    output tree.
    """
    plain = _PLAIN_SAFE if safe_ints else _PLAIN

    def enc(value: object) -> Json:
        kind = type(value)
        if kind in plain:
            return value
        handler = handlers.get(kind)
        if handler is not None:
            return handler(value)
        return enc_registered(value)

    is_plain = plain.issuperset
    str_only = frozenset({str}).issuperset

    def enc_items(items: list[Any] | tuple[Any, ...]) -> Json:
        # A C-level scan: lists of text or numbers (embeddings) are used as they
        # are, without a copy; json writes tuples as arrays too.
        if is_plain(map(type, items)):
            return items
        try:
            return [x if type(x) in plain else enc(x) for x in items]
        except _Unencodable as exc:
            exc.at(f"[{_index_of(items, exc.value)}]", items)
            raise

    def enc_set(items: set[Any] | frozenset[Any]) -> list[Json]:
        try:
            return [x if type(x) in plain else enc(x) for x in items]
        except _Unencodable as exc:
            exc.at("{item}", items)
            raise

    def enc_dict(value: dict[Any, Any]) -> Json:
        if _TAG in value:
            return enc_map(value)
        if is_plain(map(type, value.values())) and str_only(map(type, value)):
            return value
        out: dict[str, Json] = {}
        key: object = None
        try:
            for key, x in value.items():
                if type(key) is not str:
                    break
                out[key] = x if type(x) in plain else enc(x)
            else:
                return out
        except _Unencodable as exc:
            exc.at(_key_segment(key), value)
            raise
        return enc_map(value)

    def enc_map(value: dict[Any, Any]) -> Json:
        pairs: list[Json] = []
        for key, x in value.items():
            try:
                encoded_key = enc(key)
            except _Unencodable as exc:
                exc.at("[<key>]", value)
                raise
            try:
                pairs.append([encoded_key, enc(x)])
            except _Unencodable as exc:
                exc.at(_key_segment(key), value)
                raise
        return {_TAG: "map", _VALUE: pairs}

    enc_registered = _make_registered_encoder(registry, plain, enc, enc_dict)

    handlers: dict[type, Callable[[Any], Json]] = {
        dict: enc_dict,
        list: enc_items,
        tuple: lambda v: {_TAG: "tuple", _VALUE: enc_items(v)},
        set: lambda v: {_TAG: "set", _VALUE: enc_set(v)},
        frozenset: lambda v: {_TAG: "frozenset", _VALUE: enc_set(v)},
        **_LEAF_ENCODERS,
    }
    if safe_ints:
        handlers[int] = _enc_int
    return enc


def _make_registered_encoder(
    registry: TypeRegistry,
    plain: frozenset[type],
    enc: Callable[[object], Json],
    enc_dict: Callable[[dict[Any, Any]], Json],
) -> Callable[[object], Json]:
    """The encoder's part for enums, dataclasses, NamedTuples and pydantic models."""
    missing = object()

    def enc_fields(value: object, names: tuple[str, ...]) -> dict[str, Json]:
        out: dict[str, Json] = {}
        name = ""
        try:
            for name in names:
                x = getattr(value, name, missing)
                if x is not missing:
                    out[name] = x if type(x) in plain else enc(x)
        except _Unencodable as exc:
            exc.at(f".{name}", value)
            raise
        return out

    def enc_registered(value: object) -> Json:
        kind = type(value)
        entry = registry.info(kind)
        if entry is None:
            raise _Unencodable(value, _not_serializable(value))
        if registry.lookup(entry.tag) is not kind:
            # refused now: stored, it could never be decoded back
            raise _Unencodable(value, _not_registered(entry.tag, kind))
        if entry.kind == "enum":
            try:
                return {_TAG: entry.tag, _VALUE: enc(getattr(value, "value", None))}
            except _Unencodable as exc:
                exc.at(".value", value)
                raise
        fields = enc_fields(value, entry.fields)
        out = {_TAG: entry.tag, _VALUE: fields}
        if entry.kind == "pydantic":
            extra = getattr(value, "__pydantic_extra__", None)
            if extra:
                out[_EXTRA] = enc_dict(extra)
            fields_set = getattr(value, "__pydantic_fields_set__", None)
            # model_construct() marks every field it is given as set; store the
            # real set only when it differs, as exclude_unset dumps depend on it.
            if isinstance(fields_set, set) and fields_set != fields.keys():
                out[_FIELDS_SET] = sorted(fields_set)
        return out

    return enc_registered


class _Canonical:
    """The fingerprint walk: total (never raises) and independent of ordering.

    Differs from the encoder in that dict keys and set members are sorted by their
    canonical JSON, unencodable leaves become their type's name, reference cycles
    become a marker, and nothing is registered.
    """

    def __init__(self, registry: TypeRegistry, dumps: Callable[[Json], str]) -> None:
        self._registry = registry
        self._dumps = dumps
        # id() only detects a cycle within this walk; it never reaches the digest.
        self._active: set[int] = set()

    def walk(self, value: object) -> Json:
        kind = type(value)
        if kind in _PLAIN_SAFE:
            return value
        if kind is int:
            return _enc_int(cast("int", value))
        leaf = _LEAF_ENCODERS.get(kind)
        if leaf is not None:
            return leaf(value)
        if id(value) in self._active:
            return {_TAG: "cycle"}
        self._active.add(id(value))
        try:
            return self._inner(value)
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001 - a fingerprint never raises, by contract
            return self._opaque(kind)
        finally:
            self._active.discard(id(value))

    def _inner(self, value: Any) -> Json:
        walk = self.walk
        kind = type(value)
        if kind is list:
            return [walk(x) for x in value]
        if kind is dict:
            if _TAG not in value and all(type(k) is str for k in value):
                return {k: walk(x) for k, x in value.items()}
            pairs = [[walk(k), walk(x)] for k, x in value.items()]
            return {_TAG: "map", _VALUE: sorted(pairs, key=self._dumps)}
        if kind in (tuple, set, frozenset):
            members = [walk(x) for x in value]
            if kind is not tuple:
                members.sort(key=self._dumps)
            return {_TAG: kind.__name__, _VALUE: members}
        return self._registered(value, kind)

    def _registered(self, value: Any, kind: type) -> Json:
        entry = self._registry.info(kind)
        if entry is None:
            return self._opaque(kind)
        if entry.kind == "enum":
            return {_TAG: entry.tag, _VALUE: self.walk(value.value)}
        missing = object()
        fields = {}
        for name in entry.fields:
            x = getattr(value, name, missing)
            if x is not missing:
                fields[name] = self.walk(x)
        out = {_TAG: entry.tag, _VALUE: fields}
        extra = getattr(value, "__pydantic_extra__", None)
        if entry.kind == "pydantic" and extra:
            out[_EXTRA] = self.walk(extra)
        return out

    def _opaque(self, kind: type) -> Json:
        return {_TAG: "opaque", _VALUE: _type_name(kind)}


# ---------------------------------------------------------------- decoding


def _as_list(payload: object) -> list[Any]:
    if type(payload) is not list:
        raise TypeError("expected a list")
    return payload


def _as_str(payload: object) -> str:
    if type(payload) is not str:
        raise TypeError("expected a string")
    return payload


def _dec_map(payload: object) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for pair in _as_list(payload):
        if type(pair) is not list or len(pair) != 2:
            raise ValueError("a map entry is not a [key, value] pair")
        out[pair[0]] = pair[1]
    return out


def _dec_timedelta(payload: object) -> timedelta:
    parts = _as_list(payload)
    if len(parts) != 3 or not all(type(p) is int for p in parts):
        raise ValueError("expected [days, seconds, microseconds]")
    return timedelta(days=parts[0], seconds=parts[1], microseconds=parts[2])


_BUILTIN_DECODERS: dict[str, Callable[[Any], Any]] = {
    "tuple": lambda p: tuple(_as_list(p)),
    "set": lambda p: set(_as_list(p)),
    "frozenset": lambda p: frozenset(_as_list(p)),
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


def _make_object_hook(registry: TypeRegistry) -> Callable[[dict[str, Any]], Any]:
    """Build json's object_hook: called bottom-up on every decoded JSON object."""
    builtins = _BUILTIN_DECODERS

    def hook(obj: dict[str, Any]) -> Any:
        if _TAG not in obj:
            return obj
        tag = obj[_TAG]
        if type(tag) is not str:
            raise DecodeError("a type tag is not a string")
        decode = builtins.get(tag)
        if decode is None:
            return _rebuild(registry, tag, obj)
        if len(obj) != 2 or _VALUE not in obj:
            raise DecodeError(f"malformed {tag!r} value")
        try:
            return decode(obj[_VALUE])
        except (TypeError, ValueError, ArithmeticError) as exc:
            raise DecodeError(f"malformed {tag!r} value ({exc})") from exc

    return hook


def _rebuild(registry: TypeRegistry, tag: str, obj: dict[str, Any]) -> Any:
    tp = registry.lookup(tag)
    if tp is None:
        if ":" not in tag:
            raise DecodeError(f"unknown type tag {tag!r}")
        raise SerializationError(
            path=_DECODE_PATH,
            detail=(
                f"type {tag!r} is not registered, so it was not rebuilt; pass the "
                f"class to resumable.register() (or TypeRegistry.register) before "
                f"loading"
            ),
        )
    entry = registry.info(tp)
    if entry is None or _VALUE not in obj:
        raise DecodeError(f"malformed {tag!r} value")
    payload = obj[_VALUE]
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
            path=_DECODE_PATH,
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
    extra = obj.get(_EXTRA)
    if extra is not None:
        if type(extra) is not dict:
            raise DecodeError(f"malformed {tag!r} value")
        for key, x in extra.items():
            values.setdefault(key, x)
    fields_set: set[str] | None = None
    if _FIELDS_SET in obj:
        names = obj[_FIELDS_SET]
        if type(names) is not list or not all(type(n) is str for n in names):
            raise DecodeError(f"malformed {tag!r} value")
        fields_set = set(names)
    construct: Callable[..., object] = getattr(tp, "model_construct")  # noqa: B009 - tp is a pydantic model class typed as plain type
    return construct(_fields_set=fields_set, **values)


# ---------------------------------------------------------------- the codec


def _json_loads(decoder: json.JSONDecoder) -> Callable[[str], Any]:
    """`decoder.decode`, without its two whitespace scans when there is none.

    What `encode` wrote has no whitespace around the value: it is scanned once
    (not three times). Anything else goes to `decode`, which decides.
    """
    scan = decoder.scan_once  # type: ignore[attr-defined]  # json's documented-in-source scanner
    decode = decoder.decode

    def loads(text: str) -> Any:
        try:
            value, end = scan(text, 0)
        except StopIteration:
            return decode(text)  # raises the JSONDecodeError
        if end != len(text):
            return decode(text)
        return value

    return loads


def _top_level_bytes(data: bytes | memoryview) -> bytes | None:
    """The value of a body that is one `bytes` value, decoded from its base64 in place.

    None when the text between `_BYTES_OPEN` and `_BYTES_CLOSE` is not strict
    base64 (a quote, an escape, damage): the JSON parser then decides, so this
    returns a value only where the parser would return the same one.
    """
    try:
        return binascii.a2b_base64(
            memoryview(data)[len(_BYTES_OPEN) : -len(_BYTES_CLOSE)], strict_mode=True
        )
    except binascii.Error:
        return None


class Codec:
    """Tagged-JSON encoder and decoder over a `TypeRegistry` allowlist.

    Safe to share between threads and tasks: it holds no per-call state.
    """

    def __init__(self, registry: TypeRegistry) -> None:
        self.registry = registry
        options: dict[str, Any] = {
            "ensure_ascii": False,
            "check_circular": False,  # the walk builds a fresh acyclic tree
            "separators": (",", ":"),
        }
        # Built once and reused: json's encoder and decoder objects, and the walks.
        self._dumps = json.JSONEncoder(**options).encode
        self._canonical_dumps = json.JSONEncoder(sort_keys=True, **options).encode
        self._loads = _json_loads(
            json.JSONDecoder(object_hook=_make_object_hook(registry))
        )
        self._walk = _make_encoder(registry, safe_ints=False)
        self._walk_safe_ints = _make_encoder(registry, safe_ints=True)

    def __repr__(self) -> str:
        return f"Codec({self.registry!r})"

    def encode(self, value: object, *, root: str = "result") -> bytes:
        """Encode a value to bytes.

        Args:
            value: JSON-like data, bytes, datetimes, UUIDs, decimals, or instances
                of dataclasses, enums, NamedTuples and pydantic models whose types
                the registry allows (encoding registers nothing).
            root: How the value is named in error paths (`result["client"]`).

        Raises:
            SerializationError: Something inside cannot be encoded; `path` says
                where and `detail` says what.
        """
        if type(value) is str:  # the hot path: most LLM step results are text
            return _TEXT + value.encode("utf-8", "surrogatepass")
        return self._json_text(value, root).encode("utf-8", "surrogatepass")

    def _json_text(self, value: object, root: str) -> str:
        """The JSON text of any value but a plain `str` (which `encode` writes raw)."""
        try:
            return self._dumps(self._walk(value))
        except _Unencodable as exc:
            # from None: the internal exception adds nothing to path and detail.
            raise SerializationError(path=exc.path(root), detail=exc.detail) from None
        except RecursionError:
            raise SerializationError(
                path=root,
                detail="the value is nested too deeply or contains a reference cycle",
            ) from None
        except ValueError:
            # An int past sys.get_int_max_str_digits(): encode again, as hex.
            return self._dumps(self._walk_safe_ints(value))

    def encode_stream(self, value: object, *, root: str = "result") -> bytes | Encoded:
        """`encode(value)`, or for a large value the same as pieces made on demand.

        Bytes when the encoding is short (up to `STREAM_OVER`). Otherwise a `str`
        is encoded a slice at a time and a `bytes` value base64-encoded a slice
        at a time (slices of a multiple of 3 bytes, so their base64 joins to the
        whole's), so neither encoding is ever held whole; any other value's JSON
        text is made whole (json writes it in one go) and its UTF-8 a slice at a
        time.

        Raises:
            SerializationError: As `encode`.
        """
        kind = type(value)
        if kind is str or kind is bytes:
            if len(value) <= STREAM_OVER:  # type: ignore[arg-type]  # str or bytes
                return self.encode(value)
            if kind is bytes:
                return bytes_stream(
                    cast("bytes", value), prefix=_BYTES_OPEN, suffix=_BYTES_CLOSE
                )
            return text_stream(cast("str", value), prefix=_TEXT)
        text = self._json_text(value, root)
        if len(text) <= STREAM_OVER:
            return text.encode("utf-8", "surrogatepass")
        return text_stream(text, prefix=b"")

    def encode_json(self, value: dict[str, Any] | list[Any]) -> bytes:
        """`encode(value)` for a dict or list built only of JSON's own types.

        For data its caller builds of exact dicts with str keys, lists, str, int,
        float, bool and None (snapshot manifests): json writes them as the walk
        would hand them over, so the walk is only needed for a dict key equal to
        the tag, which it escapes and which then shows in the text. A manifest
        costs a third of `encode`. Anything else (a tuple, a subclass, a non-str
        key) would come back as another type: give it to `encode`.
        """
        text = self._dumps(value)
        if _TAG_KEY in text:
            return self.encode(value)
        return text.encode("utf-8", "surrogatepass")

    def decode(self, data: bytes | memoryview) -> Any:
        """Decode bytes written by `encode` back to the same types.

        `data` may be a memoryview (of a frame's body): nothing is copied from it
        but the value itself.

        Raises:
            DecodeError: The bytes are not a well-formed payload.
            SerializationError: The payload names a type that is not registered, or
                a registered type could not be rebuilt from its stored fields.
        """
        try:
            if data[:1] == _TEXT:
                if len(data) > STREAM_OVER:  # a slice of a view copies nothing
                    data = memoryview(data)
                return str(data[1:], "utf-8", "surrogatepass")
            if data[: len(_BYTES_OPEN)] == _BYTES_OPEN and data[-2:] == _BYTES_CLOSE:
                blob = _top_level_bytes(data)
                if blob is not None:
                    return blob
            return self._loads(str(data, "utf-8", "surrogatepass"))
        except DecodeError:
            raise
        except (ValueError, RecursionError) as exc:
            raise DecodeError(f"not a valid payload ({exc})") from exc

    def fingerprint(self, value: object) -> str:
        """A 16-hex-digit digest of the value's canonical encoding. Never raises.

        Equal values give equal digests in every process (dict and set order do not
        matter; nothing depends on id() or hash randomization). Values that cannot
        be encoded count as their type's name, so two clients of one class match.
        """
        try:
            if type(value) is str:
                text = self._canonical_dumps(value)
            else:
                # the common step call f(a, b), replayed thousands of times on resume
                flat = _flat_tuple_digest(value) if type(value) is tuple else None
                if flat is not None:
                    return flat
                walk = _Canonical(self.registry, self._canonical_dumps).walk
                text = self._canonical_dumps(walk(value))
        except RecursionError:
            text = f"<too deep {_type_name(type(value))}>"
        except Exception:  # noqa: BLE001 - a fingerprint never raises, by contract
            text = f"<{_type_name(type(value))}>"
        data = text.encode("utf-8", "surrogatepass")
        return hashlib.blake2b(data, digest_size=8).hexdigest()
