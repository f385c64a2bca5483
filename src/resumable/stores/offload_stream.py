"""Large payloads to and from an object store a chunk at a time (see `stores.offload`).

`upload` sends a sealed frame made on demand (a `SealedStream`) to a temporary
key as its chunks are made, hashing them as they pass, then moves the object to
its content address (the SHA-256 of those bytes): a server-side copy on S3, a
rename in a folder. Only then is the reference returned, and only then may the
row that holds it commit. A crash before the move leaves a temporary object, and
one after it an object no row references: both are deleted by `collect_garbage`
once older than its grace period.

`download` reads an object a chunk at a time, hashes each chunk and feeds it to
a frame reader (`Serde.reader`: decrypt, decompress into one buffer), and
returns the opened body only once the hash, the size and the frame's own check
(CRC-32 or GCM tag) all hold. The frame is never whole in memory on either side.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Final, Protocol

from resumable.errors import CheckpointWriteError, CorruptCheckpointError, StoreError
from resumable.stores.blobref import BlobRef
from resumable.stores.blobs import (
    BlobMissing,
    BlobStore,
    BlobUnavailable,
    StreamingBlobs,
    is_object_key,
    temp_key,
)

__all__ = [
    "STREAM_READ_OVER",
    "FrameSink",
    "Opener",
    "Sealed",
    "download",
    "fetch",
    "upload",
]

STREAM_READ_OVER: Final = 1 << 20
"""Objects longer than this are read a chunk at a time when a reader is given."""


class Sealed(Protocol):
    """A frame made on demand (`resumable.serde.SealedStream`)."""

    @property
    def flags(self) -> int:
        """The frame's flags byte."""
        ...

    @property
    def chunks(self) -> Callable[[], Iterator[bytes]]:
        """A new iterator over the frame's bytes each call."""
        ...


class FrameSink(Protocol):
    """Opens a frame fed a chunk at a time (`resumable.serde.chunked.FrameReader`)."""

    def feed(self, chunk: bytes | memoryview) -> None:
        """Take the next bytes of the frame."""
        ...

    def finish(self) -> bytearray:
        """The opened body, once the frame's checks hold."""
        ...


class Opener(Protocol):
    """Makes a `FrameSink` for a frame (`Serde.reader`)."""

    def __call__(self, *, frame_size: int, place: str) -> FrameSink:
        """A sink for a frame of `frame_size` bytes stored at `place`."""
        ...


class _Hashed:
    """The frame's chunks, made and hashed on a worker thread one at a time."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self.digest = hashlib.sha256()
        self.size = 0

    def _next(self) -> bytes | None:
        chunk = next(self._chunks, None)
        if chunk is not None:
            self.digest.update(chunk)
            self.size += len(chunk)
        return chunk

    async def next(self) -> bytes | None:
        """The next chunk; None at the end."""
        # compressing and encrypting a slice takes a while: off the event loop
        return await asyncio.to_thread(self._next)

    async def head(self, up_to: int) -> tuple[list[bytes], bool]:
        """The first chunks, until they pass `up_to` bytes, and whether that is all."""
        held: list[bytes] = []
        while self.size <= up_to:
            chunk = await self.next()
            if chunk is None:
                return held, True
            held.append(chunk)
        return held, False

    async def rest(self, held: list[bytes]) -> AsyncIterator[bytes]:
        """The chunks `head` held, then the others as they are made."""
        while held:
            yield held.pop(0)  # each goes once it is sent: the buffer drains
        while (chunk := await self.next()) is not None:
            yield chunk


async def upload(
    blobs: StreamingBlobs,
    sealed: Sealed,
    *,
    run_id: str,
    seq: int | None,
    inline_up_to: int,
) -> BlobRef | bytes:
    """Upload a frame made on demand; its reference once it is at its key.

    A frame of no more than `inline_up_to` bytes is not uploaded: it is
    returned whole, for the row to keep (it compressed that well). Only that
    many bytes are held before the upload opens, so a large frame is never
    whole in memory.

    Raises:
        CheckpointWriteError: the object store did not take it (transient: a
            retry makes the frame again).
    """
    hashed = _Hashed(sealed.chunks())
    held, is_whole = await hashed.head(inline_up_to)
    if is_whole:
        return b"".join(held)
    temp = temp_key()
    try:
        await blobs.put_stream(temp, hashed.rest(held))
        ref = BlobRef(sealed.flags, hashed.size, hashed.digest.digest())
        # the move refreshes the object's age, which is what keeps a collection
        # that started before this row committed from deleting it
        await blobs.move(temp, ref.key)
    except (BlobUnavailable, BlobMissing) as exc:
        with contextlib.suppress(BlobUnavailable):
            await blobs.delete(temp)  # else collect_garbage deletes it later
        raise CheckpointWriteError(
            run_id=run_id,
            seq=seq,
            detail=f"the object store did not take a payload of {hashed.size:,}+ "
            f"bytes (temporary object {temp}: {exc})",
        ) from exc
    return ref


class _Checked:
    """Hashes what is read and feeds it to the frame's reader, keeping its error."""

    def __init__(self, sink: FrameSink) -> None:
        self.sink = sink
        self.digest = hashlib.sha256()
        self.size = 0
        self.damage: CorruptCheckpointError | None = None

    def take(self, chunk: Any) -> None:
        self.digest.update(chunk)
        self.size += len(chunk)
        if self.damage is None:
            try:
                self.sink.feed(chunk)
            except CorruptCheckpointError as exc:
                # the hash decides first: a flipped bit is "fails its hash check"
                self.damage = exc


@contextlib.contextmanager
def reading(
    url: str,
    key: str,
    *,
    place: str,
    what: str = "object",
    missing: str = "deleted behind the store's back, or the reference was altered",
) -> Iterator[None]:
    """Report an object store's answers to a read of `key` as the engine's errors.

    Raises:
        CorruptCheckpointError: the object is missing (`missing` says what to do).
        StoreError: the object store did not answer.
    """
    if not is_object_key(key):  # checked before any object store sees it
        raise CorruptCheckpointError(
            place=place,
            detail=f"{what} key {str(key)[:80]!r} is not one this library writes "
            f"(the stored reference was altered): {missing}",
        )
    try:
        yield
    except BlobMissing:
        raise CorruptCheckpointError(
            place=place, detail=f"{what} {key} is missing from {url} ({missing})"
        ) from None
    except BlobUnavailable as exc:
        raise StoreError(
            store=url,
            detail=f"{place}: cannot read {what} {key} ({exc}); try again once "
            f"the object store is back",
        ) from exc


async def download(
    blobs: StreamingBlobs, ref: BlobRef, opener: Opener, *, place: str
) -> bytearray:
    """The opened body of the frame `ref` names (see the module docstring).

    Raises:
        CorruptCheckpointError: the object is missing, fails its hash check, or
            its frame does not open; the message names `place` and the key.
        StoreError: the object store did not answer.
    """
    checked = _Checked(opener(frame_size=ref.size, place=place))
    with reading(blobs.url, ref.key, place=place):
        async for chunk in await blobs.get_stream(ref.key):
            if checked.size + len(chunk) > ref.size:
                checked.size += len(chunk)
                break
            await asyncio.to_thread(checked.take, chunk)
            del chunk  # let it go before the next is asked for (segments.py's bound)
    if checked.size != ref.size or checked.digest.digest() != ref.sha256:
        raise CorruptCheckpointError(
            place=place,
            detail=f"object {ref.key} in {blobs.url} fails its hash check "
            f"({checked.size:,} bytes, the row says {ref.size:,})",
        )
    try:
        if checked.damage is not None:
            raise checked.damage
        return checked.sink.finish()
    except CorruptCheckpointError as exc:
        raise CorruptCheckpointError(
            place=place, detail=f"object {ref.key}: {exc.detail}"
        ) from None


async def fetch(blobs: BlobStore, ref: BlobRef, *, place: str) -> bytes | bytearray:
    """The frame an offloaded object holds, checked against its reference.

    Raises:
        CorruptCheckpointError: it is missing, or fails its hash check.
        StoreError: the object store did not answer.
    """
    with reading(blobs.url, ref.key, place=place):
        frame = await blobs.get(ref.key)
    if len(frame) != ref.size or hashlib.sha256(frame).digest() != ref.sha256:
        raise CorruptCheckpointError(
            place=place,
            detail=f"object {ref.key} in {blobs.url} fails its hash check "
            f"({len(frame):,} bytes, the row says {ref.size:,})",
        )
    if len(frame) > 1 and frame[1] != ref.codec:  # pragma: no cover - hash covers it
        raise CorruptCheckpointError(
            place=place, detail=f"object {ref.key}: codec differs"
        )
    return frame
