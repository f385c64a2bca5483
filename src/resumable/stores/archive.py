"""Cold history: a finished run's payloads moved to one compressed object.

`archive_run` gathers the sealed payloads a finished run still keeps in its rows
(its input and output, every step's output and usage, its inputs), writes them
one after another into one zlib-compressed object named by the SHA-256 of its
bytes, and only then replaces each payload in its row with a 112-byte member
reference, one compare-and-swap per row:

```
[magic: 00 "RARCH1" (7)][archive sha256 (32)][archive size (8)]
[unpacked size (8)][offset (8)][length (8)][member sha256 (32)][crc32 (4)]
```

The rows stay (status, timings, names: what `runs` lists and `show` prints),
so the run is still found, listed, shown, forked and checked as before: a read
through `OffloadStore` fetches the object (once for a whole journal), checks its
hash, inflates it into at most the unpacked size it declares, and returns each
member after checking its own hash. Frames are moved unchanged, so encryption's
associated data still binds each to its row.

A crash part way leaves some rows holding their frames and some a reference to
the object, which was durable before the first swap: every row reads, and
archiving the run again moves the rest. Payloads no longer than a reference, or
already offloaded, stay where they are.

`archive_thread` does the same for a thread's saved states: every snapshot's
manifest and metadata and the chunks they name go into one object, but for the
newest snapshot of each namespace and the chunks it names, which stay live. A chunk
shared with another thread moves too, and that thread then reads it from this
object (chunks are content-addressed, so it is the same bytes).
"""

from __future__ import annotations

import dataclasses
import hashlib
import struct
import zlib
from collections import OrderedDict
from typing import Final

from resumable.errors import CorruptCheckpointError, StoreError
from resumable.stores.blobref import REFERENCE_MAGIC
from resumable.stores.blobs import BlobMissing, BlobStore, BlobUnavailable
from resumable.stores.protocol import Payload, PayloadKind, SnapshotRecord, Store

__all__ = [
    "ARCHIVE_MAGIC",
    "ArchiveReader",
    "ArchiveRef",
    "Archived",
    "archive_run",
    "archive_thread",
    "is_member",
]

ARCHIVE_MAGIC: Final = b"\x00RARCH1"
_BODY: Final = struct.Struct(">7s32sQQQQ32s")
_CRC: Final = struct.Struct(">I")
MEMBER_SIZE: Final = _BODY.size + _CRC.size
_CACHED_ARCHIVES: Final = 2


@dataclasses.dataclass(frozen=True, slots=True)
class ArchiveRef:
    """Where in which archive object a payload now lives."""

    archive_sha256: bytes
    archive_size: int
    unpacked_size: int
    offset: int
    length: int
    sha256: bytes

    @property
    def key(self) -> str:
        """The archive object's key."""
        digest = self.archive_sha256.hex()
        return f"archive/{digest[:2]}/{digest}"

    def encode(self) -> bytes:
        """The bytes a row holds in place of the payload."""
        body = _BODY.pack(
            ARCHIVE_MAGIC,
            self.archive_sha256,
            self.archive_size,
            self.unpacked_size,
            self.offset,
            self.length,
            self.sha256,
        )
        return body + _CRC.pack(zlib.crc32(body))

    @classmethod
    def decode(cls, data: bytes, *, place: str) -> ArchiveRef:
        """Parse a member reference; CorruptCheckpointError if it was altered."""
        if len(data) != MEMBER_SIZE:
            raise CorruptCheckpointError(
                place=place,
                detail=f"its archive reference is {len(data)} bytes, not "
                f"{MEMBER_SIZE} (the row was altered)",
            )
        (stored,) = _CRC.unpack_from(data, _BODY.size)
        if zlib.crc32(data[: _BODY.size]) != stored:
            raise CorruptCheckpointError(
                place=place,
                detail="its archive reference fails its checksum (the row was altered)",
            )
        _, digest, size, unpacked, offset, length, sha = _BODY.unpack_from(data)
        if offset + length > unpacked:
            raise CorruptCheckpointError(
                place=place, detail="its archive reference points past the archive"
            )
        return cls(digest, size, unpacked, offset, length, sha)


def is_member(data: object) -> bool:
    """Whether a stored payload is a reference into an archive object."""
    if isinstance(data, memoryview):
        data = bytes(data[: len(ARCHIVE_MAGIC)])
    return isinstance(data, bytes | bytearray) and data[:7] == ARCHIVE_MAGIC


class ArchiveReader:
    """Reads members of archive objects, keeping the last few archives unpacked."""

    def __init__(self, blobs: BlobStore) -> None:
        self._blobs = blobs
        self._unpacked: OrderedDict[str, bytes] = OrderedDict()

    async def member(self, data: bytes, *, place: str) -> bytes:
        """The payload a member reference stands for.

        Raises:
            CorruptCheckpointError: the reference, the object or the member is
                damaged, or the object is missing.
            StoreError: the object store did not answer.
        """
        ref = ArchiveRef.decode(data, place=place)
        unpacked = self._unpacked.get(ref.key)
        if unpacked is None:
            unpacked = await self._fetch(ref, place)
            self._unpacked[ref.key] = unpacked
            while len(self._unpacked) > _CACHED_ARCHIVES:
                self._unpacked.popitem(last=False)
        else:
            self._unpacked.move_to_end(ref.key)
        member = unpacked[ref.offset : ref.offset + ref.length]
        if hashlib.sha256(member).digest() != ref.sha256:
            raise CorruptCheckpointError(
                place=place,
                detail=f"its member of archive {ref.key} fails its hash check",
            )
        return member

    async def _fetch(self, ref: ArchiveRef, place: str) -> bytes:
        try:
            packed = await self._blobs.get(ref.key)
        except BlobMissing:
            raise CorruptCheckpointError(
                place=place,
                detail=f"archive object {ref.key} is missing from {self._blobs.url}",
            ) from None
        except BlobUnavailable as exc:
            raise StoreError(
                store=self._blobs.url,
                detail=f"{place}: cannot read archive {ref.key} ({exc}); try again "
                f"once the object store is back",
            ) from exc
        if len(packed) != ref.archive_size or (
            hashlib.sha256(packed).digest() != ref.archive_sha256
        ):
            raise CorruptCheckpointError(
                place=place,
                detail=f"archive object {ref.key} in {self._blobs.url} fails its "
                f"hash check",
            )
        inflater = zlib.decompressobj()
        try:
            # never more than the row says: a damaged object cannot make it balloon
            unpacked = inflater.decompress(packed, ref.unpacked_size)
        except zlib.error as exc:  # pragma: no cover - the hash was checked
            raise CorruptCheckpointError(
                place=place, detail=f"archive {ref.key} does not inflate ({exc})"
            ) from exc
        if (
            len(unpacked) != ref.unpacked_size
        ):  # pragma: no cover - the hash was checked
            raise CorruptCheckpointError(
                place=place, detail=f"archive {ref.key} has the wrong size"
            )
        return unpacked


@dataclasses.dataclass(frozen=True, slots=True)
class Archived:
    """What archiving one run, or one thread's saved states, moved."""

    kind: str
    """"run" or "thread"."""
    name: str
    """The run id or the thread id."""
    payloads: int
    bytes_moved: int
    key: str | None
    """The archive object's key; None when nothing was left to move."""


class _Found:
    """The payloads still held in rows, with where each lives."""

    def __init__(self) -> None:
        self.payloads: list[Payload] = []

    def add(self, kind: PayloadKind, key: tuple[str | int, ...], data: object) -> None:
        if (
            isinstance(data, bytes)
            and len(data) > MEMBER_SIZE
            and data[:7] not in (ARCHIVE_MAGIC, REFERENCE_MAGIC)  # already away
        ):
            self.payloads.append(Payload(kind=kind, key=key, data=data))


async def _run_payloads(inner: Store, run_id: str) -> list[Payload]:
    found = _Found()
    run = await inner.get_run(run_id)
    if run is None:
        return found.payloads
    found.add("run.input", (run_id,), run.input)
    found.add("run.output", (run_id,), run.output)
    for step in await inner.load_journal(run_id):
        found.add("step.output", (run_id, step.seq, step.name), step.output)
        found.add("step.usage", (run_id, step.seq, step.name), step.usage)
    for name, value in (await inner.get_inputs(run_id)).items():
        found.add("input.value", (run_id, name), value)
    return found.payloads


async def _thread_payloads(inner: Store, thread_id: str) -> list[Payload]:
    found = _Found()
    snapshots = await inner.list_snapshots(thread_id, namespace=None)
    # the newest snapshot of each namespace stays live: loading a thread's latest
    # state (what a conversation resumes from) never waits for the object store
    newest: dict[str, SnapshotRecord] = {}
    for snap in snapshots:
        held = newest.get(snap.namespace)
        if held is None or snap.checkpoint_id > held.checkpoint_id:
            newest[snap.namespace] = snap
    live = {h for snap in newest.values() for h in snap.chunk_refs}
    hashes: dict[str, None] = {}
    for snap in snapshots:
        if newest[snap.namespace] is snap:
            continue
        key = (thread_id, snap.namespace, snap.checkpoint_id)
        found.add("snapshot.manifest", key, snap.manifest)
        found.add("snapshot.metadata", key, snap.metadata)
        hashes.update(dict.fromkeys(h for h in snap.chunk_refs if h not in live))
    # a chunk another thread shares moves too: that thread reads it from here
    for digest, data in sorted((await inner.get_chunks(list(hashes))).items()):
        found.add("chunk.data", (digest,), data)
    return found.payloads


async def archive_run(inner: Store, blobs: BlobStore, run_id: str) -> Archived:
    """Move a run's payloads into one archive object (see the module docstring).

    The caller checks that the run has finished.

    Raises:
        StoreError: the object store did not take the archive; nothing changed.
    """
    payloads = await _run_payloads(inner, run_id)
    return await _move(inner, blobs, "run", run_id, payloads)


async def archive_thread(inner: Store, blobs: BlobStore, thread_id: str) -> Archived:
    """Move every saved state of a thread (manifests, metadata, chunks) into one object.

    Raises:
        StoreError: the object store did not take the archive; nothing changed.
    """
    payloads = await _thread_payloads(inner, thread_id)
    return await _move(inner, blobs, "thread", thread_id, payloads)


async def _move(
    inner: Store, blobs: BlobStore, kind: str, name: str, payloads: list[Payload]
) -> Archived:
    if not payloads:
        return Archived(kind, name, 0, 0, None)
    unpacked = b"".join(p.data for p in payloads)
    packed = zlib.compress(unpacked, 6)
    digest = hashlib.sha256(packed).digest()
    offset = 0
    refs = []
    for payload in payloads:
        refs.append(
            ArchiveRef(
                digest,
                len(packed),
                len(unpacked),
                offset,
                len(payload.data),
                hashlib.sha256(payload.data).digest(),
            )
        )
        offset += len(payload.data)
    key = refs[0].key
    try:
        await blobs.put(key, packed)
    except BlobUnavailable as exc:
        raise StoreError(
            store=blobs.url,
            detail=f"{kind} {name!r}: the object store did not take archive {key} "
            f"({exc}); nothing was archived, try again",
        ) from exc
    moved = 0
    for payload, ref in zip(payloads, refs, strict=True):
        # a payload that changed meanwhile keeps its row (compare and swap)
        if await inner.replace_payload(payload, data=ref.encode()):
            moved += len(payload.data)
    return Archived(kind, name, len(payloads), moved, key)
