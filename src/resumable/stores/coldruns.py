"""Cold runs: a finished run's journal and inputs moved to one object, a stub left behind.

`archive_run` reads every journal record of a finished run (steps, ledger
entries, `map_steps` items: every record `load_journal` returns) and every input
sent to it, writes them into one zlib-compressed object named by the SHA-256 of
its bytes, and only once the object store has taken it asks the store
(`SupportsArchive.archive_journal`) to swap those rows for one `ArchiveStub`,
in one transaction. The run's own row stays (status, timings, names, its input
and output), so `runs` lists it and a finished run still returns its result.

A crash before the swap leaves the rows and an object nothing references (a
collection deletes it after its grace period); a crash after it leaves the stub
and its object. `restore_run` does the reverse: it reads the object and puts the
rows back while deleting the stub, in one transaction, so again either stays.
Payloads move as they are (sealed frames, or references to offloaded objects,
which the stub lists in `refers_to` so a collection keeps them).

The object, before compression::

    [magic 00 "RCOLD1" (7)][header length (4, big-endian)][header: JSON][payloads]

The header names the run and lists each record's fields, with the length of
each payload (-1 for None); the payloads follow in that order.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import struct
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from resumable.errors import CorruptCheckpointError, StoreError
from resumable.stores.archive import ArchiveRef, is_member
from resumable.stores.archiving import ArchiveStub, SupportsArchive
from resumable.stores.blobref import BlobRef, is_reference
from resumable.stores.blobs import BlobStore, BlobUnavailable
from resumable.stores.offload_stream import reading
from resumable.stores.protocol import (
    TERMINAL_STATUSES,
    InputRecord,
    RunQuery,
    StepRecord,
    Store,
)

__all__ = [
    "ColdReader",
    "ColdRun",
    "archive_due_runs",
    "archive_run",
    "decode_cold_run",
    "encode_cold_run",
    "key_of",
    "object_key",
    "read_cold_run",
    "restore_run",
]

COLD_MAGIC: Final = b"\x00RCOLD1"
_LENGTH: Final = struct.Struct(">I")
_HEAD: Final = len(COLD_MAGIC) + _LENGTH.size
_MAX_UNPACKED: Final = 1 << 34
"""An inflated object larger than this is refused as damage (16 GiB)."""
_CACHED_RUNS: Final = 4
_PAGE: Final = 500
_AT_ONCE: Final = 16


@dataclass(frozen=True, slots=True)
class ColdRun:
    """What one archive object holds."""

    run_id: str
    steps: list[StepRecord]
    inputs: list[InputRecord]


def object_key(packed: bytes) -> str:
    """The content address of an archive object."""
    digest = hashlib.sha256(packed).hexdigest()
    return f"runs/{digest[:2]}/{digest}"


def _length(data: bytes | None) -> int:
    return -1 if data is None else len(data)


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
    head = json.dumps(header, separators=(",", ":")).encode()
    parts = [COLD_MAGIC, _LENGTH.pack(len(head)), head]
    for s in cold.steps:
        parts.extend(p for p in (s.output, s.usage) if p is not None)
    parts.extend(i.value for i in cold.inputs)
    return zlib.compress(b"".join(parts), 6)


class _Cursor:
    """Payloads taken one after another from the object's tail."""

    def __init__(self, body: bytes, offset: int) -> None:
        self.body, self.offset = body, offset

    def take(self, length: int) -> bytes | None:
        if length < 0:
            return None
        end = self.offset + length
        if end > len(self.body):
            raise ValueError("a payload runs past the end of the object")
        data, self.offset = self.body[self.offset : end], end
        return data


def decode_cold_run(packed: bytes) -> ColdRun:
    """The records an object holds.

    Raises:
        ValueError: it is not an archive object, or it is damaged.
    """
    inflater = zlib.decompressobj()
    try:
        body = inflater.decompress(packed, _MAX_UNPACKED)
    except zlib.error as exc:
        raise ValueError(f"it does not inflate ({exc})") from exc
    if not inflater.eof or inflater.unconsumed_tail:
        raise ValueError("it is truncated, or larger than an archive may be")
    if not body.startswith(COLD_MAGIC) or len(body) < _HEAD:
        raise ValueError("it is not an archive of a run")
    try:
        return _records(body)
    except (KeyError, TypeError, struct.error) as exc:
        raise ValueError(f"its header is damaged ({exc!r})") from exc


def _records(body: bytes) -> ColdRun:
    (size,) = _LENGTH.unpack_from(body, len(COLD_MAGIC))
    header: dict[str, Any] = json.loads(body[_HEAD : _HEAD + size])
    cursor = _Cursor(body, _HEAD + size)
    run_id = str(header["run_id"])
    steps = [_step(run_id, fields, cursor) for fields in header["steps"]]
    inputs = [
        InputRecord(
            run_id=run_id,
            key=str(key),
            sent_at_ms=int(sent),
            value=cursor.take(int(length)) or b"",
        )
        for key, sent, length in header["inputs"]
    ]
    if cursor.offset != len(body):
        raise ValueError("it holds bytes no record accounts for")
    return ColdRun(run_id, steps, inputs)


def _step(run_id: str, fields: list[Any], cursor: _Cursor) -> StepRecord:
    seq, name, fingerprint, status, attempts, started, finished, out, use = fields
    return StepRecord(
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


def key_of(data: object) -> str | None:
    """The object a stored payload references; None for a frame or damage."""
    if not isinstance(data, bytes | bytearray | memoryview):
        return None
    try:
        if is_reference(data):
            return BlobRef.decode(bytes(data), place="").key
        if is_member(data):
            return ArchiveRef.decode(bytes(data), place="").key
    except CorruptCheckpointError:
        pass  # a damaged reference references nothing
    return None


def _referenced(cold: ColdRun) -> Iterator[str]:
    for step in cold.steps:
        for data in (step.output, step.usage):
            key = key_of(data)
            if key is not None:
                yield key
    for record in cold.inputs:
        key = key_of(record.value)
        if key is not None:
            yield key


async def archive_run(
    inner: Store,
    archive: SupportsArchive,
    blobs: BlobStore,
    run_id: str,
    *,
    now_ms: int,
) -> ArchiveStub | None:
    """Move a finished run's journal and inputs into one object (module docstring).

    Returns the stub now in the store, or None when the run is not finished,
    is archived already, holds nothing to move, or changed while it was read
    (it is left as it was; archiving again tries again).

    Raises:
        StoreError: the object store did not take the object; nothing changed.
    """
    run = await inner.get_run(run_id)
    if run is None or not run.is_terminal:
        return None
    if await archive.load_archive_stub(run_id) is not None:
        return None
    cold = ColdRun(
        run_id, await inner.load_journal(run_id), await inner.list_inputs(run_id)
    )
    if not cold.steps and not cold.inputs:
        return None
    packed = encode_cold_run(cold)
    key = object_key(packed)
    try:
        # durable before the store changes; a re-upload refreshes its age, so a
        # collection that listed it old does not delete it under the new stub
        await blobs.put(key, packed)
    except BlobUnavailable as exc:
        raise StoreError(
            store=blobs.url,
            detail=f"run {run_id!r}: the object store did not take archive {key} "
            f"({exc}); nothing was archived, try again",
        ) from exc
    stub = ArchiveStub(
        run_id=run_id,
        key=key,
        size=len(packed),
        steps=len(cold.steps),
        inputs=len(cold.inputs),
        fence=run.fence,
        archived_at_ms=now_ms,
        refers_to=tuple(sorted(set(_referenced(cold)))),
    )
    return stub if await archive.archive_journal(stub) else None


async def archive_due_runs(
    inner: Store,
    archive: SupportsArchive,
    blobs: BlobStore,
    *,
    updated_before_ms: int,
    limit: int,
    now_ms: int,
) -> list[ArchiveStub]:
    """Archive up to `limit` runs that finished and last changed before the cutoff.

    Runs are read newest first, a page at a time, and archived a few at once.

    Raises:
        StoreError: the object store did not take an object (runs archived
            before it stay archived).
    """
    done: list[ArchiveStub] = []
    query = RunQuery(
        status=tuple(TERMINAL_STATUSES),
        updated_before_ms=updated_before_ms,
        limit=_PAGE,
    )
    # runs archived before are listed too: page past them to find `limit` due
    while len(done) < limit:
        page = await inner.list_runs(query)
        waiting = page
        while waiting and len(done) < limit:
            # a few at once, never more than are still wanted
            batch = waiting[: min(_AT_ONCE, limit - len(done))]
            waiting = waiting[len(batch) :]
            stubs = await asyncio.gather(
                *(
                    archive_run(inner, archive, blobs, r.run_id, now_ms=now_ms)
                    for r in batch
                )
            )
            done.extend(stub for stub in stubs if stub is not None)
        if len(page) < _PAGE:
            return done
        query = dataclasses.replace(
            query, after=(page[-1].created_at_ms, page[-1].run_id)
        )
    return done


async def fetch_archive(
    blobs: BlobStore,
    key: str,
    size: int,
    *,
    place: str,
    owner: str,
    address: Callable[[bytes], str] = object_key,
) -> bytes:
    """An archive object's bytes, once its size and content address match its stub.

    `owner` names what to delete if the object is lost ("the run", "the thread");
    `address` gives the key its bytes must have (`object_key` of its kind).

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
    if len(data) != size or address(data) != key:
        raise CorruptCheckpointError(
            place=place,
            detail=f"archive object {key} in {blobs.url} fails its hash check",
        )
    return data


async def read_cold_run(blobs: BlobStore, stub: ArchiveStub) -> ColdRun:
    """The records a stub's object holds, checked against the stub.

    Raises:
        CorruptCheckpointError: the object is missing, damaged, or not this run's.
        StoreError: the object store did not answer.
    """
    place = f"run {stub.run_id!r} archived journal"
    packed = await fetch_archive(
        blobs, stub.key, stub.size, place=place, owner="the run"
    )
    try:
        cold = decode_cold_run(packed)
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptCheckpointError(
            place=place, detail=f"archive object {stub.key}: {exc}"
        ) from exc
    if (cold.run_id, len(cold.steps), len(cold.inputs)) != (
        stub.run_id,
        stub.steps,
        stub.inputs,
    ):
        raise CorruptCheckpointError(
            place=place,
            detail=f"archive object {stub.key} holds another run's records",
        )
    return cold


async def restore_run(
    archive: SupportsArchive, blobs: BlobStore, run_id: str
) -> ArchiveStub | None:
    """Put an archived run's journal and inputs back in the store; None if not archived.

    The object stays until a collection finds nothing references it.

    Raises:
        CorruptCheckpointError: its object is missing or damaged (the stub stays).
    """
    stub = await archive.load_archive_stub(run_id)
    if stub is None:
        return None
    cold = await read_cold_run(blobs, stub)
    if not await archive.restore_journal(stub, cold.steps, cold.inputs):
        return None  # restored or deleted meanwhile
    return stub


class ColdReader:
    """Reads archived runs through their stubs, keeping the last few unpacked."""

    def __init__(self, archive: SupportsArchive, blobs: BlobStore) -> None:
        self._archive = archive
        self._blobs = blobs
        self._cached: OrderedDict[str, ColdRun] = OrderedDict()

    async def read(self, run_id: str) -> ColdRun | None:
        """The archived records of the run; None when it has no stub.

        Raises:
            CorruptCheckpointError: its object is missing or damaged.
            StoreError: the object store did not answer.
        """
        stub = await self._archive.load_archive_stub(run_id)
        if stub is None:
            return None
        cold = self._cached.get(stub.key)
        if cold is None:
            cold = await read_cold_run(self._blobs, stub)
            self._cached[stub.key] = cold
            while len(self._cached) > _CACHED_RUNS:
                self._cached.popitem(last=False)
        else:
            self._cached.move_to_end(stub.key)
        return cold

    async def steps(self, run_id: str, up_to_seq: int | None) -> list[StepRecord]:
        """The archived journal of the run, as `Store.load_journal` returns it."""
        cold = await self.read(run_id)
        if cold is None:
            return []
        return [s for s in cold.steps if up_to_seq is None or s.seq <= up_to_seq]

    async def inputs(self, run_id: str) -> list[InputRecord]:
        """The archived inputs of the run, oldest first."""
        cold = await self.read(run_id)
        return [] if cold is None else list(cold.inputs)

    async def referenced_keys(self) -> set[str]:
        """Every stub's object and the objects its records reference."""
        keys: set[str] = set()
        after: str | None = None
        while True:
            page = await self._archive.list_archive_stubs(after=after, limit=_PAGE)
            for stub in page:
                keys.add(stub.key)
                keys.update(stub.refers_to)
            if len(page) < _PAGE:
                return keys
            after = page[-1].run_id
