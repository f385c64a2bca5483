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

import hashlib
import json
import types
from collections.abc import Callable, Collection
from typing import Any, TypeVar, cast

from resumable.errors import SerializationError
from resumable.serde.bounds import (
    MAX_SHARED_HASHES,
    shared_hashes,
    too_many_values,
    tree_values,
    values_over,
)
from resumable.serde.chunked import Opened
from resumable.serde.decoding import make_object_hook, top_level_bytes
from resumable.serde.fingerprint import Canonical, flat_tuple_digest
from resumable.serde.json_stream import json_stream
from resumable.serde.registry import TypeRegistry
from resumable.serde.streams import STREAM_OVER, Encoded, bytes_stream, text_stream
from resumable.serde.tags import (
    BYTES_CLOSE,
    BYTES_OPEN,
    EXTRA,
    FIELDS_SET,
    LEAF_ENCODERS,
    PLAIN,
    PLAIN_SAFE,
    TAG,
    TAG_KEY,
    TEXT,
    VALUE,
    DecodeError,
    Json,
    enc_int,
    type_name,
)

__all__ = ["Codec", "DecodeError", "Encoded", "TypeRegistry"]

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


_Spread = TypeVar("_Spread", bound=Collection[Any])


def _spread(items: _Spread) -> _Spread:
    """A set, or a dict by its keys, checked to be cheap to rebuild (see bounds)."""
    shared = shared_hashes(items)
    if shared > MAX_SHARED_HASHES:
        raise _Unencodable(
            items,
            f"{shared:,} of its items hash like another one, over the limit of "
            f"{MAX_SHARED_HASHES} (rebuilding it on read would take quadratic "
            f"time); store them as a list",
        )
    return items


def _make_encoder(
    registry: TypeRegistry, *, safe_ints: bool
) -> Callable[[object], Json]:
    """Build the walk that turns a value into a JSON-ready tree.

    Built once per Codec: the closures read their helpers as cell variables, which
    is the cheapest lookup Python has, and nothing is allocated per call but the
    output tree.
    """
    plain = PLAIN_SAFE if safe_ints else PLAIN

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
        if TAG in value:
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
        for key, x in _spread(value).items():
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
        return {TAG: "map", VALUE: pairs}

    enc_registered = _make_registered_encoder(registry, plain, enc, enc_dict)

    handlers: dict[type, Callable[[Any], Json]] = {
        dict: enc_dict,
        list: enc_items,
        tuple: lambda v: {TAG: "tuple", VALUE: enc_items(v)},
        set: lambda v: {TAG: "set", VALUE: enc_set(_spread(v))},
        frozenset: lambda v: {TAG: "frozenset", VALUE: enc_set(_spread(v))},
        **LEAF_ENCODERS,
    }
    if safe_ints:
        handlers[int] = enc_int
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
                return {TAG: entry.tag, VALUE: enc(getattr(value, "value", None))}
            except _Unencodable as exc:
                exc.at(".value", value)
                raise
        fields = enc_fields(value, entry.fields)
        out = {TAG: entry.tag, VALUE: fields}
        if entry.kind == "pydantic":
            extra = getattr(value, "__pydantic_extra__", None)
            if extra:
                out[EXTRA] = enc_dict(extra)
            fields_set = getattr(value, "__pydantic_fields_set__", None)
            # model_construct() marks every field it is given as set; store the
            # real set only when it differs, as exclude_unset dumps depend on it.
            if isinstance(fields_set, set) and fields_set != fields.keys():
                out[FIELDS_SET] = sorted(fields_set)
        return out

    return enc_registered


# ---------------------------------------------------------------- the codec


class Codec:
    """Tagged-JSON encoder and decoder over a `TypeRegistry` allowlist.

    Safe to share between threads and tasks: it holds no per-call state.

    Args:
        registry: The allowlist of types to rebuild.
        max_values: Refuse to encode, and to decode, a body holding more values
            than this (`resumable.serde.bounds`). None: no limit.
    """

    def __init__(
        self, registry: TypeRegistry, *, max_values: int | None = None
    ) -> None:
        self.registry = registry
        self.max_values = max_values
        options: dict[str, Any] = {
            "ensure_ascii": False,
            "check_circular": False,  # the walk builds a fresh acyclic tree
            "separators": (",", ":"),
        }
        # Built once and reused: json's encoder and decoder objects, and the walks.
        self._dumps = json.JSONEncoder(**options).encode
        self._canonical_dumps = json.JSONEncoder(sort_keys=True, **options).encode
        self._loads = json.JSONDecoder(object_hook=make_object_hook(registry)).decode
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
            return TEXT + value.encode("utf-8", "surrogatepass")
        return self._json_text(value, root).encode("utf-8", "surrogatepass")

    def _json_text(self, value: object, root: str) -> str:
        """The JSON text of any value but a plain `str` (which `encode` writes raw)."""
        text = self._json(value, root, stream=False)
        assert type(text) is str  # noqa: S101 - for the type checker
        return text

    def _json(self, value: object, root: str, *, stream: bool) -> str | Encoded:
        """`_json_text`, or with `stream` its pieces where `json_stream` makes them."""
        try:
            tree = self._walk(value)
            text = self._dumps_tree(tree, stream=stream)
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
            tree = self._walk_safe_ints(value)
            text = self._dumps_tree(tree, stream=stream)
        self._check_values(tree, text, root)
        return text

    def _check_values(self, tree: Json, text: str | Encoded, root: str) -> None:
        """Refuse `tree` if it holds more values than `max_values` (see bounds)."""
        limit = self.max_values
        size = text.size if isinstance(text, Encoded) else len(text)
        if limit is None or size <= limit:  # each value takes a byte at least
            return
        count = tree_values(tree)
        if count > limit:
            raise SerializationError(path=root, detail=too_many_values(count, limit))

    def _dumps_tree(self, tree: Json, *, stream: bool) -> str | Encoded:
        encoded = json_stream(tree, self._dumps) if stream else None
        return self._dumps(tree) if encoded is None else encoded

    def encode_stream(self, value: object, *, root: str = "result") -> bytes | Encoded:
        """`encode(value)`, or for a large value the same as pieces made on demand.

        Bytes when the encoding is short (up to `STREAM_OVER`). Otherwise a `str`
        is encoded a slice at a time and a `bytes` value base64-encoded a slice
        at a time (slices of a multiple of 3 bytes, so their base64 joins to the
        whole's), so neither encoding is ever held whole. Any other value's JSON
        text is made a piece at a time when its bulk is in long strings or it
        holds a container of many items (`json_stream`); else it is made whole
        (json writes it in one go) and its UTF-8 a slice at a time.

        Raises:
            SerializationError: As `encode`.
        """
        kind = type(value)
        if kind is str or kind is bytes:
            if len(value) <= STREAM_OVER:  # type: ignore[arg-type]  # str or bytes
                return self.encode(value)
            if kind is bytes:
                return bytes_stream(
                    cast("bytes", value), prefix=BYTES_OPEN, suffix=BYTES_CLOSE
                )
            return text_stream(cast("str", value), prefix=TEXT)
        text = self._json(value, root, stream=True)
        if isinstance(text, Encoded):
            # many short items can make a short text: written as any short one
            return b"".join(text.pieces()) if text.size <= STREAM_OVER else text
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
        if TAG_KEY in text:
            return self.encode(value)
        self._check_values(value, text, "result")
        return text.encode("utf-8", "surrogatepass")

    def decode(self, data: bytes | memoryview | Opened) -> Any:
        """Decode bytes written by `encode` back to the same types.

        `data` may be a memoryview (of a frame's body): nothing is copied from it
        but the value itself. An `Opened` body's buffer is traded for its text
        before a JSON body is parsed (`Opened.take_text`), so the buffer, the
        text and the value are never all held at once.

        Raises:
            DecodeError: The bytes are not a well-formed payload.
            SerializationError: The payload names a type that is not registered, or
                a registered type could not be rebuilt from its stored fields.
        """
        try:
            if data[:1] == TEXT:
                if len(data) > STREAM_OVER:  # a slice of a view copies nothing
                    data = memoryview(data)
                return str(data[1:], "utf-8", "surrogatepass")
            if data[: len(BYTES_OPEN)] == BYTES_OPEN and data[-2:] == BYTES_CLOSE:
                blob = top_level_bytes(data)
                if blob is not None:
                    return blob
            if self.max_values is not None:
                count = values_over(data, self.max_values)
                if count is not None:
                    raise DecodeError(too_many_values(count, self.max_values))
            if type(data) is Opened:
                return self._loads(data.take_text())
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
                flat = flat_tuple_digest(value) if type(value) is tuple else None
                if flat is not None:
                    return flat
                walk = Canonical(self.registry, self._canonical_dumps).walk
                text = self._canonical_dumps(walk(value))
        except RecursionError:
            text = f"<too deep {type_name(type(value))}>"
        except Exception:  # noqa: BLE001 - a fingerprint never raises, by contract
            text = f"<{type_name(type(value))}>"
        data = text.encode("utf-8", "surrogatepass")
        return hashlib.blake2b(data, digest_size=8).hexdigest()
