"""What decoding one stored body may cost, in time and in objects, whatever its bytes.

The payload limit (`Engine(max_payload_bytes=...)`) bounds the bytes of a body,
but not what decoding them builds or how long that takes. Two shapes of data
break the link, and each has one rule here, applied on both sides: the encoder
refuses a value the rule would refuse on read (`SerializationError`, so nothing
is stored that cannot be read back), and the decoder and the generic view refuse
stored bytes that break it (`CorruptCheckpointError`), before they build them.

**Values per body** (`values_over`). Three bytes of JSON, `{},`, make a 64-byte
dict: 60 MiB of `[{},{},...]` built 1.6 GB of objects. A body may hold at most
one value per `BYTES_PER_VALUE` bytes of the payload limit (4 Mi values under the
default 64 MiB), where a body's values are counted as JSON text shows them: the
openers `[` and `{` and the commas outside strings, that is, for each container
the number of items it holds, an empty one counting as one. That bounds the
objects a decode builds (the costliest, a dict with one key, is under 200
bytes for its two values), so a decode's peak memory stays a small multiple of
the limit, and a body shorter than the bound is never even scanned. The same
number is counted on the encoder's JSON tree (`tree_values`) and on stored text
(`text_values`): json writes one opener per container and one comma between
items, and nothing else outside strings.

**Values sharing a hash** (`shared_hashes`). The `set`, `frozenset` and `map`
tags rebuild real sets and dicts, whose insertion costs a probe per earlier item
of the same hash. Hashes of `str` and `bytes` are salted per process, but those
of numbers, tuples and frozensets are not: the ints 7 + k*(2**61-1) all hash to 7,
so 40,000 of them (a 1 MB row) take minutes to insert. A set or map may hold at
most `MAX_SHARED_HASHES` items whose hash an earlier item already has. Then a
container of n items costs O(n) hashes plus at most `MAX_SHARED_HASHES`**2 / 2
comparisons, and as each such container needs that many items in the body, the
whole decode stays linear in the body's size. Counting distinct hashes is exact
(only an identical 64-bit hash makes probe sequences coincide) and cheap; sets
of strings, and of ints below 2**61 in magnitude (which hash to themselves), are
recognized in one C-level pass and never hashed twice, so common data decodes at
full speed. Legitimate data hardly ever has more than one pair of equal hashes
(-1 and -2 share one); a value that does is refused when written, with advice to
store a list.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Collection
from typing import Any, Final

__all__ = [
    "BYTES_PER_VALUE",
    "MAX_SHARED_HASHES",
    "max_values",
    "shared_hashes",
    "text_values",
    "too_many_values",
    "tree_values",
    "values_over",
]

BYTES_PER_VALUE: Final = 16
"""A body may hold one value per this many bytes of the payload limit."""
MAX_SHARED_HASHES: Final = 32
"""How many items of one set or map may hash like an earlier item."""

_SALTED: Final = frozenset({str, bytes})  # hash randomization covers these
_INT: Final = frozenset({int})
_MODULUS: Final = sys.hash_info.modulus  # 2**61 - 1: smaller ints hash to themselves
_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_CONTAINERS: Final = (dict, list, tuple)


def max_values(max_bytes: int) -> int:
    """How many values a body may hold under a payload limit of `max_bytes`."""
    return max(max_bytes // BYTES_PER_VALUE, 1)


def shared_hashes(items: Collection[Any]) -> int:
    """How many of `items` hash like an item before them.

    Raises:
        TypeError: An item cannot be hashed.
    """
    kinds = set(map(type, items))
    if kinds <= _SALTED:
        return 0
    if kinds == _INT and min(items) > -_MODULUS and max(items) < _MODULUS:
        return 0  # distinct hashes, but for -1 and -2
    return len(items) - len(set(map(hash, items)))


def text_values(body: bytes | bytearray) -> int:
    """The values a body of JSON text holds: openers and commas outside strings."""
    count = body.count(b",") + body.count(b"[") + body.count(b"{")
    if count and body.count(b'"'):
        # only now is the text scanned for strings (whose commas do not count)
        body = _STRING.sub(b"", body)
        count = body.count(b",") + body.count(b"[") + body.count(b"{")
    return count


def values_over(body: bytes | bytearray | memoryview, limit: int) -> int | None:
    """The number of values a body holds when it is over `limit`, else None.

    A body shorter than `limit` bytes cannot be over it, and is not scanned.
    """
    if len(body) <= limit:
        return None
    data = bytes(body) if type(body) is memoryview else body
    quick = data.count(b",") + data.count(b"[") + data.count(b"{")
    if quick <= limit:  # strings' commas counted too: an upper bound
        return None
    count = text_values(data)
    return count if count > limit else None


def tree_values(tree: Any) -> int:
    """`text_values` of the JSON that json writes for `tree`, counted on the tree."""
    count = 0
    pending = [tree]
    containers = _CONTAINERS
    while pending:
        node = pending.pop()
        items = node.values() if type(node) is dict else node
        count += len(items) or 1
        pending.extend(x for x in items if type(x) in containers)
    return count


def too_many_values(count: int, limit: int) -> str:
    """What a value (or a stored body) holding `count` values over `limit` is told."""
    return (
        f"it holds {count:,} values (items of its lists, dicts and sets), over the "
        f"limit of {limit:,}: one per {BYTES_PER_VALUE} bytes of the payload limit "
        f"(Engine(max_payload_bytes=...))"
    )
