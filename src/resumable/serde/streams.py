"""Large bodies a piece at a time: no joined copy of them is ever made.

The codec's encoding of a long `str` or `bytes` value is made a slice at a time
(`text_stream`, `bytes_stream`); the envelope compresses the pieces as they come
(`compressed`) and writes the frame into one growing buffer (`build`). Each
function here produces exactly the bytes of its one-shot counterpart, which the
tests in tests/serde/test_large_values.py compare.
"""

from __future__ import annotations

import base64
import io
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "STREAM_OVER",
    "Encoded",
    "build",
    "bytes_stream",
    "compressed",
    "text_stream",
]

STREAM_OVER: Final = 1 << 20
"""Bodies longer than this are sealed by `Envelope.seal_stream` and opened by
`Envelope.open_view` (see `Serde.dumps` and `Serde.loads`)."""
SLICE: Final = 1 << 22
"""Characters of a str, bytes of a body (a multiple of 3 for base64) per piece."""


@dataclass(frozen=True, slots=True)
class Encoded:
    """A value's encoding, made a piece at a time (`Codec.encode_stream`)."""

    size: int
    """The length of the whole encoding, in bytes."""
    pieces: Callable[[], Iterator[bytes]]
    """A new iterator over the pieces each call; joined, they are `encode(value)`."""


def text_stream(text: str, *, prefix: bytes) -> Encoded:
    """`prefix + text.encode("utf-8", "surrogatepass")`, a slice at a time."""

    def pieces() -> Iterator[bytes]:
        yield prefix
        for at in range(0, len(text), SLICE):
            # surrogatepass encodes each code point on its own: a slice never
            # splits one, so the pieces join to the whole text's encoding
            yield text[at : at + SLICE].encode("utf-8", "surrogatepass")

    if text.isascii():
        size = len(text)
    else:  # counted a slice at a time, never encoded whole
        size = sum(len(piece) for piece in pieces()) - len(prefix)
    return Encoded(len(prefix) + size, pieces)


def bytes_stream(data: bytes, *, prefix: bytes, suffix: bytes) -> Encoded:
    """`prefix + base64.b64encode(data) + suffix`, a slice at a time."""
    step = SLICE - SLICE % 3  # base64 of 3-byte-aligned slices joins to the whole's

    def pieces() -> Iterator[bytes]:
        yield prefix
        view = memoryview(data)
        for at in range(0, len(view), step):
            yield base64.b64encode(view[at : at + step])
        yield suffix

    size = len(prefix) + 4 * ((len(data) + 2) // 3) + len(suffix)
    return Encoded(size, pieces)


def compressed(compressor: Any, size: int, pieces: Iterable[bytes]) -> Iterator[bytes]:
    """`compressor.compress(b"".join(pieces))` in chunks, as a pledged-size stream writes it.

    Neither the joined input nor an output sized for the worst case (what a
    one-shot call allocates) is held. The content size is pledged, so the frame
    declares it, which `integrity._decompress` checks before allocating. The
    chunks do not depend on how the input is cut into pieces.

    Args:
        compressor: A `zstandard.ZstdCompressor`.
        size: The length of the joined pieces.
        pieces: The body.
    """
    stream = compressor.compressobj(size=size)
    for piece in pieces:
        view = memoryview(piece)
        for at in range(0, len(view), SLICE):
            chunk: bytes = stream.compress(view[at : at + SLICE])
            if chunk:
                yield chunk
    yield stream.flush()


def build(
    chunks: Iterable[bytes], reserve: int, crc: int
) -> tuple[io.BytesIO, int, int]:
    """(`reserve` zero bytes then the chunks in one buffer, their CRC-32, their size).

    `crc` is the CRC-32 to continue from (that of the header the caller writes
    into the reserved bytes). `getvalue()` of the buffer returns it without a copy.
    """
    out = io.BytesIO()
    out.write(bytes(reserve))
    size = 0
    for chunk in chunks:
        out.write(chunk)
        crc = zlib.crc32(chunk, crc)
        size += len(chunk)
    return out, crc, size
