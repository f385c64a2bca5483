"""How RedisStore encodes ids and packed records: shared by the store and its rekey scan.

A packed record is its items length-prefixed (`lib.lua` reads the same format);
ids are any Python str, lone surrogates included, so they round-trip through
UTF-8 with surrogatepass.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

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


def escape_glob(pattern: bytes) -> bytes:
    """`pattern` with SCAN's glob characters escaped, to match it literally."""
    return b"".join(
        b"\\" + bytes([c]) if c in _GLOB_SPECIAL else bytes([c]) for c in pattern
    )
