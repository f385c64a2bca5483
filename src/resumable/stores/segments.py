"""A streamed object kept as plain objects and a manifest: no multipart upload.

An S3 multipart upload cut short by a crash leaves parts no listing shows and
no other process can abort (obstore offers neither). So `S3Blobs.put_stream`
sends an object of unknown length as segments of `SEGMENT_BYTES`, each a plain
PUT (whole or absent, never partial) at its own content address
(`seg/ab/abcd…`), then puts at the object's key a manifest naming them:

```
[magic: 00 "RSEGS1" (7)][count (4)][count x (size (8), sha256 (32))][crc32 (4)]
```

A crash part way leaves whole segments no manifest a row references names:
`collect_garbage` deletes them once older than its grace period, as any other
unreferenced object. A manifest begins with a zero byte, which no sealed frame
does (their version byte is 1), so a reader tells the two apart by content.
An object of one segment or less is put as it is, without a manifest.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import hashlib
import itertools
import struct
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, Final

__all__ = [
    "MANIFEST_MAGIC",
    "MANIFEST_MAX",
    "SEGMENT_BYTES",
    "SEGMENT_PREFIX",
    "Manifest",
    "put_segmented",
    "segment_chunks",
    "segment_key",
]

SEGMENT_BYTES: Final = 8 * 1024 * 1024
"""Bytes per segment of a streamed object (the last may be shorter)."""
SEGMENT_PREFIX: Final = "seg/"
"""Where segments live (apart from `sha256/`, so `collect_garbage` tells them apart)."""
MANIFEST_MAGIC: Final = b"\x00RSEGS1"
_COUNT: Final = struct.Struct(">I")
_ENTRY: Final = struct.Struct(">Q32s")
_CRC: Final = struct.Struct(">I")
MANIFEST_MAX: Final = 64 * 1024
"""No manifest is longer (about 1,600 segments: 13 GB); objects past it are never one."""


def segment_key(sha256: bytes) -> str:
    """The content address of a segment."""
    digest = sha256.hex()
    return f"{SEGMENT_PREFIX}{digest[:2]}/{digest}"


@dataclasses.dataclass(frozen=True, slots=True)
class Manifest:
    """The segments whose bytes, joined in order, are the object."""

    segments: tuple[tuple[int, bytes], ...]
    """(size, sha256) of each segment, in order."""

    @property
    def size(self) -> int:
        """The whole object's length."""
        return sum(size for size, _ in self.segments)

    @property
    def keys(self) -> list[str]:
        """The segments' keys, in order."""
        return [segment_key(sha256) for _, sha256 in self.segments]

    def encode(self) -> bytes:
        """The manifest object's bytes."""
        body = b"".join(
            [MANIFEST_MAGIC, _COUNT.pack(len(self.segments))]
            + [_ENTRY.pack(size, sha256) for size, sha256 in self.segments]
        )
        if len(body) + _CRC.size > MANIFEST_MAX:
            raise ValueError(
                f"{len(self.segments)} segments: past the {MANIFEST_MAX:,}-byte "
                f"manifest limit"
            )
        return body + _CRC.pack(zlib.crc32(body))

    @classmethod
    def parse(cls, data: bytes | bytearray | memoryview) -> Manifest | None:
        """The manifest `data` is; None when it is something else (a frame, damage)."""
        data = bytes(data)
        header = len(MANIFEST_MAGIC) + _COUNT.size
        if not data.startswith(MANIFEST_MAGIC) or len(data) < header + _CRC.size:
            return None
        (count,) = _COUNT.unpack_from(data, len(MANIFEST_MAGIC))
        end = header + count * _ENTRY.size
        if len(data) != end + _CRC.size:
            return None
        if zlib.crc32(data[:end]) != _CRC.unpack_from(data, end)[0]:
            return None
        segments = tuple(
            _ENTRY.unpack_from(data, header + i * _ENTRY.size) for i in range(count)
        )
        return cls(segments)

    @staticmethod
    def entry(segment: bytes | bytearray) -> tuple[int, bytes]:
        """(size, sha256) of a segment's bytes."""
        return len(segment), hashlib.sha256(segment).digest()


Put = Callable[[str, bytes | bytearray], Coroutine[Any, Any, None]]
"""A plain, whole-or-nothing write of one object (`S3Blobs.put`)."""


async def put_segmented(
    put: Put, key: str, chunks: AsyncIterator[bytes], *, in_flight: int
) -> None:
    """Store the chunks' bytes under `key`: whole if short, else segments and a manifest.

    Each segment is filled in one buffer of its size (the chunks are copied in
    once) and sent as it fills, up to `in_flight` at once. A failure leaves
    whole segments and no manifest (garbage for `collect_garbage`); it is
    raised as `put` raised it.
    """
    entries: list[tuple[int, bytes]] = []
    sending: set[asyncio.Task[None]] = set()

    async def send(segment: bytearray) -> None:
        entry = await asyncio.to_thread(Manifest.entry, segment)
        entries.append(entry)
        while len(sending) >= in_flight:
            done, _ = await asyncio.wait(sending, return_when=asyncio.FIRST_COMPLETED)
            sending.difference_update(done)
            for task in done:
                task.result()  # the first failure stops the upload
        sending.add(asyncio.create_task(put(segment_key(entry[1]), segment)))

    segment = bytearray()
    try:
        async for chunk in chunks:
            view = memoryview(chunk)
            while len(segment) + len(view) >= SEGMENT_BYTES:
                room = SEGMENT_BYTES - len(segment)
                segment += view[:room]
                view = view[room:]
                await send(segment)
                segment = bytearray()
            segment += view
        if not entries:  # one segment or less: the object itself, no manifest
            await put(key, segment)
            return
        if segment:
            await send(segment)
        await asyncio.gather(*sending)
        sending.clear()
        await put(key, Manifest(tuple(entries)).encode())
    finally:
        for task in sending:
            task.cancel()
        if sending:
            await asyncio.gather(*sending, return_exceptions=True)


Get = Callable[[str], Awaitable[bytes | bytearray | memoryview]]
"""Reads one plain object whole (`S3Blobs.segment`: the response's own buffer)."""


async def segment_chunks(
    get: Get, manifest: Manifest, *, ahead: int
) -> AsyncIterator[bytes | memoryview]:
    """The bytes of the object a manifest stands for, a segment at a time.

    Segments are requested in order, `ahead` at once, so one request's latency
    hides behind another: no more than `ahead` segments (`ahead` x
    `SEGMENT_BYTES`) are held at any time, the one the caller is given
    included (the next request starts only once the caller has let it go and
    asks for more). A missing segment raises as `get` does (`BlobMissing`
    naming its key); the reader's hash of the whole object catches any other
    damage.
    """
    keys = iter(manifest.keys)
    reading: collections.deque[asyncio.Task[bytes | bytearray | memoryview]] = (
        collections.deque()
    )
    try:
        for key in itertools.islice(keys, ahead):
            reading.append(asyncio.ensure_future(get(key)))
        while reading:
            segment = await reading[0]
            # given as it is, never copied (a bytearray one is not changed while
            # it is held)
            yield segment if isinstance(segment, bytes) else memoryview(segment)
            del segment
            reading.popleft()
            following = next(keys, None)
            if following is not None:
                reading.append(asyncio.ensure_future(get(following)))
    finally:
        for task in reading:
            task.cancel()
        if reading:
            await asyncio.gather(*reading, return_exceptions=True)
