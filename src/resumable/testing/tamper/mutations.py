"""The damage the tamper suite does: hostile values for each stored type.

`mutations_of(value)` lists the ways a bytes, text or number column is damaged:
truncations, flipped bits, wrong types, unknown type tags, a LangChain
constructor, decompression bombs, swaps with another run's row. `plain_frame`
and `decompression_bomb` build payloads a test of its own can write by hand.
"""

from __future__ import annotations

import dataclasses
import io
import json
import struct
import threading
import zlib
from typing import Any

__all__ = ["Mutation", "decompression_bomb", "mutations_of", "plain_frame"]

_BOMB_SIZE = 1 << 30


@dataclasses.dataclass(frozen=True, slots=True)
class Mutation:
    """One way to damage a value."""

    name: str
    value: Any
    swap: bool = False
    """Exchange the value with the same column of another run's row instead."""


def plain_frame(body: bytes, *, compressed: bool = False) -> bytes:
    """A plaintext frame around `body` with a valid checksum (see serde.integrity)."""
    header = bytes((1, 0x01 if compressed else 0))
    checksum = zlib.crc32(body, zlib.crc32(header))
    return header + struct.pack(">I", checksum) + body


_BOMBS: dict[bool, bytes] = {}
_BOMBS_LOCK = threading.Lock()


def decompression_bomb(*, declares_size: bool = True) -> bytes:
    """A ~32 KB zstd frame of 1 GiB of zeros; optionally without its declared size."""
    with _BOMBS_LOCK:
        if declares_size not in _BOMBS:
            import zstandard

            compressor = zstandard.ZstdCompressor(
                level=1, write_content_size=declares_size
            )
            out = io.BytesIO()
            zeros = bytes(1 << 20)
            size = _BOMB_SIZE if declares_size else -1
            with compressor.stream_writer(out, size=size, closefd=False) as writer:
                for _ in range(_BOMB_SIZE // len(zeros)):
                    writer.write(zeros)
            _BOMBS[declares_size] = out.getvalue()
        return _BOMBS[declares_size]


def _json_frame(value: object) -> bytes:
    return plain_frame(json.dumps(value).encode())


_LC_CONSTRUCTOR = {
    "lc": 1,
    "type": "constructor",
    "id": ["langchain_core", "messages", "ai", "AIMessage"],
    "kwargs": {"content": "injected"},
}


def _bytes_mutations(value: bytes) -> list[Mutation]:
    middle = len(value) // 2
    mutations = [
        Mutation("empty bytes", b""),
        Mutation("truncated to half", value[:middle]),
        Mutation("NULL", None),
        Mutation("text for bytes", value.decode("latin-1")),
        Mutation("unknown type tag", _json_frame({"~": "os:system", "v": {"x": 1}})),
        Mutation("unknown builtin tag", _json_frame({"~": "nope", "v": 1})),
        Mutation("LangChain constructor JSON", _json_frame(_LC_CONSTRUCTOR)),
        Mutation("list for an object", _json_frame([1, 2, 3])),
        Mutation("deeply nested", plain_frame(b"[" * 200_000 + b"]" * 200_000)),
        Mutation("not UTF-8", plain_frame(b"\xff\xfe{")),
        Mutation("huge number", _json_frame(10**4000)),
        Mutation("number for bytes", 7),
        Mutation("swapped with another run's", value, swap=True),
    ]
    if value:
        for at in sorted({0, middle, len(value) - 1}):
            flipped = bytearray(value)
            flipped[at] ^= 0x10
            mutations.append(Mutation(f"bit flipped at byte {at}", bytes(flipped)))
    if _has_zstd():
        mutations.append(
            Mutation("zstd bomb", plain_frame(decompression_bomb(), compressed=True))
        )
        mutations.append(
            Mutation(
                "zstd bomb of unstated size",
                plain_frame(decompression_bomb(declares_size=False), compressed=True),
            )
        )
    return mutations


def _text_mutations(value: str) -> list[Mutation]:
    return [
        Mutation("empty text", ""),
        Mutation("NULL", None),
        Mutation("long text", "x" * 100_000),
        Mutation("number for text", 12345),
        Mutation("JSON garbage", '{"~'),
        Mutation("text with NUL", value + "\x00"),
        Mutation("path traversal", "../" + value),
        Mutation(
            "bytes for text, not UTF-8",
            b"\xff\xfe" + value.encode("utf-8", "surrogatepass"),
        ),
        Mutation("swapped with another run's", value, swap=True),
    ]


def _number_mutations(value: float) -> list[Mutation]:
    return [
        Mutation("NULL", None),
        Mutation("negative", -1),
        Mutation("zero", 0),
        Mutation("huge", 2**63 - 1),
        Mutation("huge float", 1e300),
        Mutation("text for a number", "abc"),
        Mutation("fraction", 1.5),
        Mutation("swapped with another run's", value, swap=True),
    ]


def mutations_of(value: Any) -> list[Mutation]:
    """The ways the suite damages a stored value of this type."""
    if isinstance(value, bytes | bytearray | memoryview):
        return _bytes_mutations(bytes(value))
    if isinstance(value, str):
        return _text_mutations(value)
    if isinstance(value, int | float):
        return _number_mutations(value)
    return [Mutation("text for a NULL", "x"), Mutation("number for a NULL", 7)]


def _has_zstd() -> bool:
    try:
        import zstandard  # noqa: F401
    except ImportError:
        return False
    return True
