"""Cold objects: the one format archived runs and threads are written in.

An object holds records moved out of a store's rows as they are (sealed frames,
or references to offloaded objects), zlib-compressed and named by the SHA-256 of
its bytes. One codec, two variants. Before compression::

    [magic (7 or 8)][header length (4, big-endian)][header: JSON][payloads]

- a run (magic 00 "RCOLD1", key `runs/ab/abcd..`): every journal record of a
  finished run (steps, ledger entries, `map_steps` items) and every input sent
  to it; the header names the run and lists each record's fields with the
  length of each payload (-1 for None).
- a thread (magic 00 "RCOLDT1", key `threads/ab/abcd..`): a thread's archived
  snapshots and every chunk they name; the header names the thread and lists
  each snapshot's fields with the lengths of its manifest and metadata, and
  each chunk's hash and length.

The payloads follow the header in that order. `fetch_object` checks an object's
size and content address before anything decodes it, and `inflate` never
inflates past a bound, so a damaged object cannot balloon. `stores.archive`
moves records into objects and back; payload-level archive objects written by
earlier versions (`archive/ab/abcd..`, see `blobref.MemberRef`) are read through
the same `fetch_object` and `inflate`.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

from resumable.errors import CorruptCheckpointError, StoreError
from resumable.stores.blobs import BlobStore, BlobUnavailable
from resumable.stores.offload_stream import reading
from resumable.stores.protocol import InputRecord, SnapshotRecord, StepRecord
from resumable.stores.stubs import ArchiveStub, ThreadStub

__all__ = [
    "RUN_MAGIC",
    "THREAD_MAGIC",
    "ColdRun",
    "ColdThread",
    "Kind",
    "decode_cold_run",
    "decode_cold_thread",
    "encode_cold_run",
    "encode_cold_thread",
    "fetch_object",
    "inflate",
    "object_key",
    "put_object",
    "read_cold_run",
    "read_cold_thread",
]

RUN_MAGIC: Final = b"\x00RCOLD1"
THREAD_MAGIC: Final = b"\x00RCOLDT1"
_LENGTH: Final = struct.Struct(">I")
_MAX_UNPACKED: Final = 1 << 34
"""An inflated object larger than this is refused as damage (16 GiB)."""
Kind = Literal["run", "thread"]
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class ColdRun:
    """What one run object holds."""

    run_id: str
    steps: list[StepRecord]
    inputs: list[InputRecord]


@dataclass(frozen=True, slots=True)
class ColdThread:
    """What one thread object holds."""

    thread_id: str
    snapshots: list[SnapshotRecord]
    chunks: dict[str, bytes]


# --- the codec -------------------------------------------------------------------
def object_key(kind: Kind, packed: bytes) -> str:
    """The content address of an object of `kind`."""
    digest = hashlib.sha256(packed).hexdigest()
    return f"{kind}s/{digest[:2]}/{digest}"


def _length(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _pack(magic: bytes, header: dict[str, Any], payloads: Iterable[bytes]) -> bytes:
    head = json.dumps(header, separators=(",", ":")).encode("utf-8", "surrogatepass")
    return zlib.compress(b"".join([magic, _LENGTH.pack(len(head)), head, *payloads]), 6)


def inflate(packed: bytes, limit: int) -> bytes:
    """The inflated object, never more than `limit` bytes: damage cannot balloon."""
    inflater = zlib.decompressobj()
    try:
        body = inflater.decompress(packed, limit)
    except zlib.error as exc:
        raise ValueError(f"it does not inflate ({exc})") from exc
    if not inflater.eof or inflater.unconsumed_tail:
        raise ValueError("it is truncated, or larger than an archive may be")
    return body


class _Cursor:
    """The header, then payloads taken one after another from the object's tail."""

    def __init__(self, packed: bytes, magic: bytes, kind: Kind) -> None:
        body = inflate(packed, _MAX_UNPACKED)
        head = len(magic) + _LENGTH.size
        if not body.startswith(magic) or len(body) < head:
            raise ValueError(f"it is not an archive of a {kind}")
        (size,) = _LENGTH.unpack_from(body, len(magic))
        self.header: dict[str, Any] = json.loads(
            body[head : head + size].decode("utf-8", "surrogatepass")
        )
        self.body, self.offset = body, head + size

    def take(self, length: int) -> bytes | None:
        if length < 0:
            return None
        end = self.offset + length
        if end > len(self.body):
            raise ValueError("a payload runs past the end of the object")
        data, self.offset = self.body[self.offset : end], end
        return data

    def done(self, records: _T) -> _T:
        if self.offset != len(self.body):
            raise ValueError("it holds bytes no record accounts for")
        return records


def _decoding(decode: Callable[[bytes], _T], packed: bytes) -> _T:
    try:
        return decode(packed)
    except (KeyError, TypeError, IndexError, struct.error) as exc:
        raise ValueError(f"its header is damaged ({exc!r})") from exc


def encode_cold_run(cold: ColdRun) -> bytes:
    """The compressed object holding `cold` (see the module docstring)."""
    header = {
        "run_id": cold.run_id,
        "steps": [
            [
                s.seq,
                s.name,
                s.fingerprint,
                s.status,
                s.attempts,
                s.started_at_ms,
                s.finished_at_ms,
                _length(s.output),
                _length(s.usage),
            ]
            for s in cold.steps
        ],
        "inputs": [[i.key, i.sent_at_ms, len(i.value)] for i in cold.inputs],
    }
    payloads = [p for s in cold.steps for p in (s.output, s.usage) if p is not None]
    return _pack(RUN_MAGIC, header, [*payloads, *(i.value for i in cold.inputs)])


def decode_cold_run(packed: bytes) -> ColdRun:
    """The records a run object holds.

    Raises:
        ValueError: it is not a run object, or it is damaged.
    """
    return _decoding(_run_records, packed)


def _run_records(packed: bytes) -> ColdRun:
    cursor = _Cursor(packed, RUN_MAGIC, "run")
    run_id = str(cursor.header["run_id"])
    steps = []
    for fields in cursor.header["steps"]:
        seq, name, fingerprint, status, attempts, started, finished, out, use = fields
        steps.append(
            StepRecord(
                run_id=run_id,
                seq=int(seq),
                name=str(name),
                fingerprint=str(fingerprint),
                status=status,
                attempts=int(attempts),
                started_at_ms=int(started),
                finished_at_ms=int(finished),
                output=cursor.take(int(out)),
                usage=cursor.take(int(use)),
            )
        )
    inputs = [
        InputRecord(
            run_id=run_id,
            key=str(key),
            sent_at_ms=int(sent),
            value=cursor.take(int(length)) or b"",
        )
        for key, sent, length in cursor.header["inputs"]
    ]
    return cursor.done(ColdRun(run_id, steps, inputs))


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
                _length(s.metadata),
            ]
            for s in cold.snapshots
        ],
        "chunks": [[digest, len(data)] for digest, data in cold.chunks.items()],
    }
    payloads = [
        p for s in cold.snapshots for p in (s.manifest, s.metadata) if p is not None
    ]
    return _pack(THREAD_MAGIC, header, [*payloads, *cold.chunks.values()])


def decode_cold_thread(packed: bytes) -> ColdThread:
    """The records a thread object holds.

    Raises:
        ValueError: it is not a thread object, or it is damaged.
    """
    return _decoding(_thread_records, packed)


def _thread_records(packed: bytes) -> ColdThread:
    cursor = _Cursor(packed, THREAD_MAGIC, "thread")
    thread_id = str(cursor.header["thread_id"])
    snapshots: list[SnapshotRecord] = []
    for fields in cursor.header["snapshots"]:
        namespace, checkpoint_id, parent, created, label, refs, m_len, d_len = fields
        manifest = cursor.take(int(m_len))
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
                metadata=cursor.take(int(d_len)),
            )
        )
    chunks = {
        str(digest): cursor.take(int(length)) or b""
        for digest, length in cursor.header["chunks"]
    }
    return cursor.done(ColdThread(thread_id, snapshots, chunks))


# --- writing and reading objects -------------------------------------------------
async def put_object(blobs: BlobStore, kind: Kind, name: str, packed: bytes) -> str:
    """Upload an object of `kind` for the run or thread `name`; its key.

    Raises:
        StoreError: the object store did not take it.
    """
    key = object_key(kind, packed)
    try:
        # durable before the store changes; a re-upload refreshes its age, so a
        # collection that listed it old does not delete it under the new stub
        await blobs.put(key, packed)
    except BlobUnavailable as exc:
        raise StoreError(
            store=blobs.url,
            detail=f"{kind} {name!r}: the object store did not take archive {key} "
            f"({exc}); nothing was archived, try again",
        ) from exc
    return key


async def fetch_object(
    blobs: BlobStore, key: str, size: int, *, place: str, owner: str
) -> bytes:
    """An object's bytes, once its size and content address match what names it.

    Raises:
        CorruptCheckpointError: the object is missing or fails its checks.
        StoreError: the object store did not answer.
    """
    with reading(
        blobs.url,
        key,
        place=place,
        what="archive object",
        missing=f"restore it from a backup of the bucket, or delete {owner}",
    ):
        packed = await blobs.get(key)
    data = bytes(packed)
    digest = hashlib.sha256(data).hexdigest()
    if len(data) != size or key != f"{key.split('/', 1)[0]}/{digest[:2]}/{digest}":
        raise CorruptCheckpointError(
            place=place,
            detail=f"archive object {key} in {blobs.url} fails its hash check",
        )
    return data


async def read_cold_run(blobs: BlobStore, stub: ArchiveStub) -> ColdRun:
    """The records a run stub's object holds, checked against the stub.

    Raises:
        CorruptCheckpointError: the object is missing, damaged, or not this run's.
        StoreError: the object store did not answer.
    """
    place = f"run {stub.run_id!r} archived journal"
    cold = _checked(
        decode_cold_run,
        await fetch_object(blobs, stub.key, stub.size, place=place, owner="the run"),
        place=place,
        key=stub.key,
    )
    if (cold.run_id, len(cold.steps), len(cold.inputs)) != (
        stub.run_id,
        stub.steps,
        stub.inputs,
    ):
        raise CorruptCheckpointError(
            place=place, detail=f"archive object {stub.key} holds another run's records"
        )
    return cold


async def read_cold_thread(blobs: BlobStore, stub: ThreadStub) -> ColdThread:
    """The records a thread stub's object holds, checked against the stub.

    Raises:
        CorruptCheckpointError: the object is missing, damaged, or not this thread's.
        StoreError: the object store did not answer.
    """
    place = f"thread {stub.thread_id!r} archived snapshots"
    cold = _checked(
        decode_cold_thread,
        await fetch_object(blobs, stub.key, stub.size, place=place, owner="the thread"),
        place=place,
        key=stub.key,
    )
    if (cold.thread_id, len(cold.snapshots)) != (stub.thread_id, stub.snapshots):
        raise CorruptCheckpointError(
            place=place,
            detail=f"archive object {stub.key} holds another thread's records",
        )
    return cold


def _checked(
    decode: Callable[[bytes], _T], packed: bytes, *, place: str, key: str
) -> _T:
    try:
        return decode(packed)
    except ValueError as exc:
        raise CorruptCheckpointError(
            place=place, detail=f"archive object {key}: {exc}"
        ) from exc
