"""The fingerprint of a step call's arguments: a digest of their canonical encoding.

Equal values give equal digests in every process: dict keys and set members are
sorted by their canonical JSON, unencodable leaves count as their type's name, and
reference cycles as a marker. A tuple of scalars (the common call `f(a, b)`) is
digested without a JSON round, under its own personalization. Stored journals
hold these digests, so both encodings are part of the stored format.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Final, cast

from resumable.serde.registry import TypeRegistry
from resumable.serde.tags import (
    EXTRA,
    INT_PLAIN_LIMIT,
    LEAF_ENCODERS,
    PLAIN_SAFE,
    TAG,
    VALUE,
    Json,
    enc_int,
    type_name,
)

_FLAT_TAGS: dict[type, bytes] = {
    str: b"s",
    int: b"i",
    float: b"d",
    bool: b"b",
    type(None): b"n",
}


_FLAT_TUPLE_BLAKE2B: Final = hashlib.blake2b(digest_size=8, person=b"flat-tuple")


def flat_tuple_digest(values: tuple[Any, ...]) -> str | None:
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
            if not -INT_PLAIN_LIMIT < value < INT_PLAIN_LIMIT:
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


class Canonical:
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
        """The canonical JSON-ready tree of `value`."""
        kind = type(value)
        if kind in PLAIN_SAFE:
            return value
        if kind is int:
            return enc_int(cast("int", value))
        leaf = LEAF_ENCODERS.get(kind)
        if leaf is not None:
            return leaf(value)
        if id(value) in self._active:
            return {TAG: "cycle"}
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
            if TAG not in value and all(type(k) is str for k in value):
                return {k: walk(x) for k, x in value.items()}
            pairs = [[walk(k), walk(x)] for k, x in value.items()]
            return {TAG: "map", VALUE: sorted(pairs, key=self._dumps)}
        if kind in (tuple, set, frozenset):
            members = [walk(x) for x in value]
            if kind is not tuple:
                members.sort(key=self._dumps)
            return {TAG: kind.__name__, VALUE: members}
        return self._registered(value, kind)

    def _registered(self, value: Any, kind: type) -> Json:
        entry = self._registry.info(kind)
        if entry is None:
            return self._opaque(kind)
        if entry.kind == "enum":
            return {TAG: entry.tag, VALUE: self.walk(value.value)}
        missing = object()
        fields = {}
        for name in entry.fields:
            x = getattr(value, name, missing)
            if x is not missing:
                fields[name] = self.walk(x)
        out = {TAG: entry.tag, VALUE: fields}
        extra = getattr(value, "__pydantic_extra__", None)
        if entry.kind == "pydantic" and extra:
            out[EXTRA] = self.walk(extra)
        return out

    def _opaque(self, kind: type) -> Json:
        return {TAG: "opaque", VALUE: type_name(kind)}
