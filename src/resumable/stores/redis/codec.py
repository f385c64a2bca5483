"""How RedisStore encodes values: ids, numbers and packed records, as `lib.lua` reads them.

A packed record is its items length-prefixed (`lib.lua` reads the same format);
ids are any Python str, lone surrogates included, so they round-trip through
UTF-8 with surrogatepass. Numbers are stored as decimal text, as Lua's
`tonumber` reads them. Each record's own layout lives with its concept
(`runs`, `snapshots`, `archive`).
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

_LEN: Final = struct.Struct(">I")
_NONE_LEN: Final = 0xFFFFFFFF
_GLOB_SPECIAL: Final = frozenset(b"*?[]\\")


def to_bytes(text: str) -> bytes:
    """An id as the bytes a key or field holds."""
    return text.encode("utf-8", "surrogatepass")


def to_str(data: bytes) -> str:
    """An id back from the bytes a key or field holds."""
    return data.decode("utf-8", "surrogatepass")


def pack(items: Sequence[bytes | None]) -> bytes:
    """Length-prefixed items (None is length 0xFFFFFFFF); `lib.lua` reads the same."""
    out = bytearray()
    for item in items:
        if item is None:
            out += _LEN.pack(_NONE_LEN)
        else:
            out += _LEN.pack(len(item))
            out += item
    return bytes(out)


def unpack(data: bytes) -> list[bytes | None]:
    """The items `pack` packed."""
    items: list[bytes | None] = []
    pos = 0
    while pos < len(data):
        (size,) = _LEN.unpack_from(data, pos)
        pos += _LEN.size
        if size == _NONE_LEN:
            items.append(None)
            continue
        items.append(data[pos : pos + size])
        pos += size
    return items


def unpack_ids(
    data: bytes, *, skip: int, most: int, what: str = "ids"
) -> tuple[str, ...]:
    """The items `pack` packed after the first `skip`, as ids: at most `most` of them.

    Each id is decoded straight from `data`, with no `bytes` copy of it on the way:
    `n` ids cost their `n` strings, and a record listing more than `most` costs no
    more than one listing `most` would. (`unpack` stays a loop of its own: it
    reads every journal record, where a generator's frames would show.)

    Raises:
        ValueError: more than `most` items ("more than `most` `what`"), an item
            that is None, or not UTF-8.
    """
    ids: list[str] = []
    with memoryview(data) as view:
        for start, end in itertools.islice(_spans(data), skip, None):
            if len(ids) == most:
                raise ValueError(f"more than {most:,} {what}")
            if end is None:
                raise ValueError(f"item {skip + len(ids)} is None, not an id")
            ids.append(str(view[start:end], "utf-8", "surrogatepass"))
    return tuple(ids)


def unpack_first(data: bytes, count: int) -> list[bytes | None]:
    """The first `count` items `pack` packed (fewer if it packed fewer)."""
    return [
        None if end is None else data[start:end]
        for start, end in itertools.islice(_spans(data), count)
    ]


def _spans(data: bytes) -> Iterator[tuple[int, int | None]]:
    """Where each packed item lies in `data`: (start, end), end None for a None."""
    pos = 0
    while pos < len(data):
        (size,) = _LEN.unpack_from(data, pos)
        pos += _LEN.size
        if size == _NONE_LEN:
            yield pos, None
            continue
        yield pos, pos + size
        pos += size


def escape_glob(pattern: bytes) -> bytes:
    """`pattern` with SCAN's glob characters escaped, to match it literally."""
    return b"".join(
        b"\\" + bytes([c]) if c in _GLOB_SPECIAL else bytes([c]) for c in pattern
    )


def num(value: int) -> bytes:
    """A number as Redis stores it."""
    return str(int(value)).encode()


def text_or_none(item: bytes | None) -> str | None:
    """An optional id from its bytes."""
    return None if item is None else to_str(item)


def int_or_zero(item: bytes | None) -> int:
    """A stored number (missing: 0)."""
    return int(item or b"0")


def pairs(flat: Sequence[bytes]) -> dict[bytes, bytes]:
    """A flat [key, value, ...] reply as a dict."""
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


def bytes_dict(found: Mapping[Any, Any]) -> dict[bytes, bytes]:
    """A reply's mapping with keys and values as bytes."""
    return {as_bytes(key): as_bytes(value) for key, value in found.items()}


def as_bytes(value: bytes | str) -> bytes:
    """A reply's value as bytes (redis-py types replies as bytes | str)."""
    return value if isinstance(value, bytes) else to_bytes(value)
