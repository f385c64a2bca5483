"""Cold threads: a thread's older saved states moved to one object, a stub left behind.

`archive_thread` reads a thread's snapshots (every namespace, packs included) but
those the caller keeps live (by default the newest of each namespace, so loading
a thread's latest state never waits for the object store), and every chunk they
name, writes them into one zlib-compressed object named by the SHA-256 of its
bytes, and only once the object store has taken it asks the store
(`SupportsThreadArchive.archive_snapshots`) to swap those rows for one
`ThreadStub`, in one transaction that also deletes the chunks no remaining row
names. A thread archived before has its old object's records carried into the
new one, so a thread always has one object.

The object holds every chunk its snapshots name, those that stay live too
(another thread, or a live row, shares them): reading an archived snapshot
needs nothing else, and putting it back (`restore_thread`) restores each chunk a
collection may have deleted meanwhile.

A crash before the swap leaves the rows and an object nothing references (a
collection deletes it after its grace period); a crash after it leaves the stub
and its object. Restoring puts rows and chunks back and deletes the stub in one
transaction, so again either stays. Payloads move as they are (sealed frames,
or references to offloaded objects, which the stub lists in `refers_to`).

The object, before compression::

    [magic 00 "RCOLDT1" (8)][header length (4, big-endian)][header: JSON][payloads]

The header names the thread, lists each snapshot's fields with the lengths of
its manifest and metadata (-1 for None), and each chunk's hash and length; the
payloads follow in that order.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from collections import OrderedDict
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from resumable.errors import CorruptCheckpointError, StoreError
from resumable.stores.archiving import SupportsThreadArchive, ThreadStub
from resumable.stores.blobs import BlobStore, BlobUnavailable
from resumable.stores.coldruns import fetch_archive, key_of
from resumable.stores.protocol import SnapshotRecord, Store

__all__ = [
    "ColdThread",
    "ColdThreads",
    "archive_thread",
    "decode_cold_thread",
    "encode_cold_thread",
    "newest_of_each_namespace",
    "restore_thread",
]

COLD_MAGIC: Final = b"\x00RCOLDT1"
_LENGTH: Final = struct.Struct(">I")
_HEAD: Final = len(COLD_MAGIC) + _LENGTH.size
_MAX_UNPACKED: Final = 1 << 34
"""An inflated object larger than this is refused as damage (16 GiB)."""
_CACHED: Final = 8
_REMEMBERED: Final = 256
_PAGE: Final = 500
Where = tuple[str, str]  # namespace, checkpoint_id


@dataclass(frozen=True, slots=True)
class ColdThread:
    """What one thread archive object holds."""

    thread_id: str
    snapshots: list[SnapshotRecord]
    chunks: dict[str, bytes]


def object_key(packed: bytes) -> str:
    """The content address of a thread archive object."""
    digest = hashlib.sha256(packed).hexdigest()
    return f"threads/{digest[:2]}/{digest}"


def encode_cold_thread(cold: ColdThread) -> bytes:
    """The compressed object holding `cold` (see the module docstring)."""
    header = {
        "thread_id": cold.thread_id,
        "snapshots": [
            [
                s.namespace,
                s.checkpoint_id,
                s.parent_id,
                s.created_at_ms,
                s.label,
                list(s.chunk_refs),
                len(s.manifest),
                -1 if s.metadata is None else len(s.metadata),
            ]
            for s in cold.snapshots
        ],
        "chunks": [[digest, len(data)] for digest, data in cold.chunks.items()],
    }
    head = json.dumps(header, separators=(",", ":")).encode("utf-8", "surrogatepass")
    parts = [COLD_MAGIC, _LENGTH.pack(len(head)), head]
    for s in cold.snapshots:
        parts.append(s.manifest)
        if s.metadata is not None:
            parts.append(s.metadata)
    parts.extend(cold.chunks.values())
    return zlib.compress(b"".join(parts), 6)


def decode_cold_thread(packed: bytes) -> ColdThread:
    """The records an object holds.

    Raises:
        ValueError: it is not a thread archive object, or it is damaged.
    """
    inflater = zlib.decompressobj()
    try:
        body = inflater.decompress(packed, _MAX_UNPACKED)
    except zlib.error as exc:
        raise ValueError(f"it does not inflate ({exc})") from exc
    if not inflater.eof or inflater.unconsumed_tail:
        raise ValueError("it is truncated, or larger than an archive may be")
    if not body.startswith(COLD_MAGIC) or len(body) < _HEAD:
        raise ValueError("it is not an archive of a thread")
    try:
        return _records(body)
    except (KeyError, TypeError, IndexError, struct.error) as exc:
        raise ValueError(f"its header is damaged ({exc!r})") from exc


def _take(body: bytes, offset: int, length: int) -> tuple[bytes | None, int]:
    if length < 0:
        return None, offset
    end = offset + length
    if end > len(body):
        raise ValueError("a payload runs past the end of the object")
    return body[offset:end], end


def _records(body: bytes) -> ColdThread:
    (size,) = _LENGTH.unpack_from(body, len(COLD_MAGIC))
    header: dict[str, Any] = json.loads(
        body[_HEAD : _HEAD + size].decode("utf-8", "surrogatepass")
    )
    offset = _HEAD + size
    thread_id = str(header["thread_id"])
    snapshots: list[SnapshotRecord] = []
    for fields in header["snapshots"]:
        namespace, checkpoint_id, parent, created, label, refs, m_len, d_len = fields
        manifest, offset = _take(body, offset, int(m_len))
        metadata, offset = _take(body, offset, int(d_len))
        snapshots.append(
            SnapshotRecord(
                thread_id=thread_id,
                namespace=str(namespace),
                checkpoint_id=str(checkpoint_id),
                parent_id=None if parent is None else str(parent),
                manifest=manifest or b"",
                chunk_refs=tuple(str(ref) for ref in refs),
                created_at_ms=int(created),
                label=None if label is None else str(label),
                metadata=metadata,
            )
        )
    chunks: dict[str, bytes] = {}
    for digest, length in header["chunks"]:
        data, offset = _take(body, offset, int(length))
        chunks[str(digest)] = data or b""
    if offset != len(body):
        raise ValueError("it holds bytes no record accounts for")
    return ColdThread(thread_id, snapshots, chunks)


def newest_of_each_namespace(snapshots: Iterable[SnapshotRecord]) -> set[Where]:
    """The default of what stays live: each namespace's newest snapshot."""
    newest: dict[str, str] = {}
    for snap in snapshots:
        held = newest.get(snap.namespace)
        if held is None or snap.checkpoint_id > held:
            newest[snap.namespace] = snap.checkpoint_id
    return set(newest.items())


def _referenced(cold: ColdThread) -> Iterator[str]:
    for snap in cold.snapshots:
        for data in (snap.manifest, snap.metadata):
            key = key_of(data)
            if key is not None:
                yield key
    for data in cold.chunks.values():
        key = key_of(data)
        if key is not None:
            yield key


def _stub_of(cold: ColdThread, key: str, size: int, now_ms: int) -> ThreadStub:
    newest: dict[str, str] = {}
    for snap in cold.snapshots:
        if snap.checkpoint_id > newest.get(snap.namespace, ""):
            newest[snap.namespace] = snap.checkpoint_id
    return ThreadStub(
        thread_id=cold.thread_id,
        key=key,
        size=size,
        snapshots=len(cold.snapshots),
        chunks=len(cold.chunks),
        archived_at_ms=now_ms,
        newest=tuple(sorted(newest.items())),
        refers_to=tuple(sorted(set(_referenced(cold)))),
    )


async def archive_thread(
    inner: Store,
    archive: SupportsThreadArchive,
    blobs: BlobStore,
    thread_id: str,
    *,
    now_ms: int,
    keep: Collection[Where] | None = None,
) -> ThreadStub | None:
    """Move a thread's snapshots but `keep` into one object (module docstring).

    `keep` defaults to `newest_of_each_namespace`. Returns the stub now in the
    store, or None when nothing is left to move or the thread changed while it
    was read (it is left as it was; archiving again tries again).

    Raises:
        StoreError: the object store did not take the object; nothing changed.
        CorruptCheckpointError: the thread's earlier object is missing or damaged.
    """
    held = await archive.load_thread_stub(thread_id)
    live = await inner.list_snapshots(thread_id, namespace=None)
    kept = newest_of_each_namespace(live) if keep is None else set(keep)
    moved = [s for s in live if (s.namespace, s.checkpoint_id) not in kept]
    if not moved:
        return None
    earlier = (
        ColdThread(thread_id, [], {})
        if held is None
        else await read_cold_thread(blobs, held)
    )
    moving = {(s.namespace, s.checkpoint_id) for s in moved}
    snapshots = [
        *(s for s in earlier.snapshots if (s.namespace, s.checkpoint_id) not in moving),
        *moved,
    ]
    names = dict.fromkeys(ref for s in snapshots for ref in s.chunk_refs)
    chunks = {h: earlier.chunks[h] for h in names if h in earlier.chunks}
    chunks.update(await inner.get_chunks([h for h in names if h not in chunks]))
    cold = ColdThread(thread_id, snapshots, chunks)
    packed = encode_cold_thread(cold)
    key = object_key(packed)
    try:
        # durable before the store changes; a re-upload refreshes its age, so a
        # collection that listed it old does not delete it under the new stub
        await blobs.put(key, packed)
    except BlobUnavailable as exc:
        raise StoreError(
            store=blobs.url,
            detail=f"thread {thread_id!r}: the object store did not take archive "
            f"{key} ({exc}); nothing was archived, try again",
        ) from exc
    stub = _stub_of(cold, key, len(packed), now_ms)
    released = dict.fromkeys(ref for s in moved for ref in s.chunk_refs)
    done = await archive.archive_snapshots(
        stub,
        moved=sorted(moving),
        chunks=list(released),
        replaces=None if held is None else held.key,
    )
    return stub if done else None


async def read_cold_thread(blobs: BlobStore, stub: ThreadStub) -> ColdThread:
    """The records a stub's object holds, checked against the stub.

    Raises:
        CorruptCheckpointError: the object is missing, damaged, or not this thread's.
        StoreError: the object store did not answer.
    """
    place = f"thread {stub.thread_id!r} archived snapshots"
    packed = await fetch_archive(
        blobs, stub.key, stub.size, place=place, owner="the thread", address=object_key
    )
    try:
        cold = decode_cold_thread(packed)
    except ValueError as exc:
        raise CorruptCheckpointError(
            place=place, detail=f"archive object {stub.key}: {exc}"
        ) from exc
    if (cold.thread_id, len(cold.snapshots)) != (stub.thread_id, stub.snapshots):
        raise CorruptCheckpointError(
            place=place,
            detail=f"archive object {stub.key} holds another thread's records",
        )
    return cold


async def restore_thread(
    archive: SupportsThreadArchive, blobs: BlobStore, thread_id: str
) -> ThreadStub | None:
    """Put a thread's archived snapshots and chunks back; None if none is archived.

    The object stays until a collection finds nothing references it.

    Raises:
        CorruptCheckpointError: its object is missing or damaged (the stub stays).
    """
    stub = await archive.load_thread_stub(thread_id)
    if stub is None:
        return None
    cold = await read_cold_thread(blobs, stub)
    if not await archive.restore_snapshots(stub, cold.snapshots, cold.chunks):
        return None  # restored, archived again or deleted meanwhile
    return stub


def _newest_first(records: Iterable[SnapshotRecord]) -> list[SnapshotRecord]:
    return sorted(records, key=lambda s: (s.checkpoint_id, s.namespace), reverse=True)


class ColdThreads:
    """Reads archived snapshots through their stubs, merged with the live rows.

    Keeps the last few objects unpacked, and remembers which stubs it read from
    lately: the engine reads a snapshot's chunks right after the snapshot.
    """

    def __init__(self, archive: SupportsThreadArchive, blobs: BlobStore) -> None:
        self._archive = archive
        self._blobs = blobs
        self._cached: OrderedDict[str, ColdThread] = OrderedDict()
        self._read_from: OrderedDict[str, ThreadStub] = OrderedDict()

    async def _read(self, stub: ThreadStub) -> ColdThread:
        cold = self._cached.get(stub.key)
        if cold is None:
            cold = await read_cold_thread(self._blobs, stub)
            self._cached[stub.key] = cold
            while len(self._cached) > _CACHED:
                self._cached.popitem(last=False)
        else:
            self._cached.move_to_end(stub.key)
        self._read_from[stub.key] = stub
        self._read_from.move_to_end(stub.key)
        while len(self._read_from) > _REMEMBERED:
            self._read_from.popitem(last=False)
        return cold

    async def load(
        self,
        thread_id: str,
        namespace: str,
        checkpoint_id: str | None,
        live: SnapshotRecord | None,
    ) -> SnapshotRecord | None:
        """`load_snapshot`, given what the live rows hold.

        A live latest is the latest: archiving keeps each namespace's newest row
        live, and later saves are newer still.
        """
        if live is not None:
            return live
        stub = await self._archive.load_thread_stub(thread_id)
        if stub is None or namespace not in dict(stub.newest):
            return None
        found = [
            s
            for s in (await self._read(stub)).snapshots
            if s.namespace == namespace
            and (checkpoint_id is None or s.checkpoint_id == checkpoint_id)
        ]
        return max(found, key=lambda s: s.checkpoint_id) if found else None

    async def merge(
        self,
        thread_id: str,
        namespace: str | None,
        before: str | None,
        limit: int | None,
        live: list[SnapshotRecord],
    ) -> list[SnapshotRecord]:
        """`list_snapshots`, given what the live rows hold."""
        stub = await self._archive.load_thread_stub(thread_id)
        if stub is None:
            return live
        newest = dict(stub.newest)
        wanted = list(newest) if namespace is None else [namespace]
        horizons = [newest[ns] for ns in wanted if ns in newest]
        if not horizons:
            return live
        if (
            limit is not None
            and len(live) >= limit
            and min(s.checkpoint_id for s in live[:limit]) > max(horizons)
        ):
            return live  # every archived record sorts after the page
        seen = {(s.namespace, s.checkpoint_id) for s in live}
        archived = [
            s
            for s in (await self._read(stub)).snapshots
            if (namespace is None or s.namespace == namespace)
            and (before is None or s.checkpoint_id < before)
            and (s.namespace, s.checkpoint_id) not in seen
        ]
        merged = _newest_first([*live, *archived])
        return merged if limit is None else merged[:limit]

    async def chunks(self, hashes: Collection[str]) -> dict[str, bytes]:
        """Those of `hashes` held by an object read lately (stored bytes)."""
        found: dict[str, bytes] = {}
        wanted = set(hashes)
        for key in reversed(list(self._read_from)):
            if not wanted:
                break
            cold = await self._read(self._read_from[key])
            for digest in [h for h in wanted if h in cold.chunks]:
                found[digest] = cold.chunks[digest]
                wanted.discard(digest)
        return found

    async def referenced_keys(self) -> set[str]:
        """Every thread stub's object and the objects its records reference."""
        keys: set[str] = set()
        after: str | None = None
        while True:
            page = await self._archive.list_thread_stubs(after=after, limit=_PAGE)
            for stub in page:
                keys.add(stub.key)
                keys.update(stub.refers_to)
            if len(page) < _PAGE:
                return keys
            after = page[-1].thread_id
