"""Payload offload: large sealed payloads live in an object store, rows keep a reference.

`OffloadStore` wraps any `Store`. On the way in, a run's input or output, a
step's output or usage, or an input value whose sealed frame (already
compressed, and encrypted when encryption is on: the object store never sees
plaintext), or a saved state's, is longer than `offload_over` bytes is uploaded
first, under the SHA-256 of those bytes, and only then is the row written,
holding a 52-byte reference in place of the frame:

```
[magic: 00 "RBLOB1" (7)][codec (1)][size (8, big-endian)][sha256 (32)][crc32 (4)]
```

`codec` is the frame's flags byte (compressed, encrypted). On the way out, a
reference is resolved: the object is fetched and must have that size, that hash
and that codec, or the read is a `CorruptCheckpointError` naming the run, the
step and the object's key. The frame inside is then opened by the engine as any
other, so encryption's associated data still binds the payload to its row.

Commit before continue holds: the row is written only after its object is
durable, so a crash between the two leaves an object no row references, which
`collect_garbage` deletes once it is older than a grace period. An object store
that does not answer makes the write a `CheckpointWriteError` (the engine
retries it for `store_retry_s`, then stops the run; nothing committed is lost,
and running the same run_id again resumes once the object store is back).

Saved states (snapshot manifests, metadata and chunks, which is where LangGraph
checkpoints live) are offloaded the same way; their upload failures are
`StoreError`, as they belong to no run. Large results stream both ways (see
`stores.offload_stream`; one that seals to `offload_over` or less stays in its
row); other frames are held whole in memory.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

from resumable.errors import CheckpointWriteError, StoreError
from resumable.stores.archive import (
    Archived,
    ColdReader,
    Prepare,
    archive_due,
    restore_run,
    restore_thread,
)
from resumable.stores.blobref import (
    REFERENCE_MAGIC,
    REFERENCE_SIZE,
    BlobRef,
    is_member,
    is_reference,
    points_away,
)
from resumable.stores.blobs import (
    BlobStore,
    BlobUnavailable,
    StreamingBlobs,
)
from resumable.stores.offload_gc import collect_garbage, referenced_keys
from resumable.stores.offload_stream import (
    STREAM_READ_OVER,
    Opener,
    Sealed,
    download,
    fetch,
    upload,
)
from resumable.stores.places import payload_place, run_place, step_place
from resumable.stores.protocol import (
    NO_CHUNKS,
    DeleteResult,
    InputRecord,
    Lease,
    Payload,
    PayloadKind,
    QueuePolicy,
    RunQuery,
    RunRecord,
    RunUpdate,
    SnapshotRecord,
    StepRecord,
    Store,
    ThreadRecord,
)
from resumable.stores.step_cache import CacheEntry, SupportsStepCache
from resumable.stores.stubs import ArchiveStub, ThreadStub

__all__ = [
    "DEFAULT_OFFLOAD_OVER",
    "REFERENCE_MAGIC",
    "ArchiveStub",
    "Archived",
    "BlobRef",
    "OffloadStore",
    "Prepare",
    "ThreadStub",
    "is_reference",
]

DEFAULT_OFFLOAD_OVER: Final = 256 * 1024
"""Sealed payloads longer than this go to the object store (bytes)."""

_FETCH_BATCH: Final = 16


class OffloadStore:
    """A Store whose large payloads live in a `BlobStore` (see the module docstring).

    Args:
        inner: The store that keeps rows (and, for small payloads, the payloads).
        blobs: Where large payloads go.
        offload_over: Sealed payloads longer than this many bytes are offloaded.
    """

    def __init__(
        self,
        inner: Store,
        blobs: BlobStore,
        *,
        offload_over: int = DEFAULT_OFFLOAD_OVER,
    ) -> None:
        if offload_over < REFERENCE_SIZE:
            raise ValueError(
                f"offload_over={offload_over} is smaller than a reference "
                f"({REFERENCE_SIZE} bytes): offloading would grow the rows"
            )
        self.inner = inner
        self.blobs = blobs
        self.offload_over = offload_over
        self.url = inner.url
        self._cold = ColdReader(inner, blobs)
        self._opener: Opener | None = None
        # asked at every step's commit: a Protocol check is worth doing once
        self._streams = isinstance(blobs, StreamingBlobs)

    def __repr__(self) -> str:
        return f"OffloadStore({self.inner!r}, {self.blobs!r}, offload_over={self.offload_over})"

    def stream_with(self, opener: Opener) -> None:
        """Read large step results and run payloads through `opener`'s sinks.

        Their records then hold the opened body the sink returns, not the frame.
        """
        self._opener = opener

    @property
    def streams(self) -> bool:
        """Whether `put_sealed` can upload a frame a chunk at a time."""
        return self._streams

    async def put_sealed(
        self, sealed: Sealed, *, run_id: str, seq: int | None
    ) -> bytes:
        """What a row keeps of a frame made on demand (`offload_stream.upload`).

        Raises:
            CheckpointWriteError: the object store did not take it.
            TypeError: the object store does not stream (`streams` is False).
        """
        if not isinstance(self.blobs, StreamingBlobs):
            raise TypeError(f"{self.blobs!r} takes no streamed uploads")
        kept = await upload(
            self.blobs, sealed, run_id=run_id, seq=seq, inline_up_to=self.offload_over
        )
        return kept if isinstance(kept, bytes) else kept.encode()

    # --- the two crossings ------------------------------------------------------
    async def _offload(
        self, data: bytes | bytearray | None, *, run_id: str, seq: int | None
    ) -> bytes | None:
        """The bytes the row keeps: `data` itself, or a reference once it is uploaded."""
        if isinstance(data, bytearray):
            # a frame S3Blobs read into a bytearray, written again (a fork, a
            # rekey): stores and object stores are given bytes, as ever
            data = bytes(data)
        if data is None or len(data) <= self.offload_over:
            return data
        ref = BlobRef.of(data)
        try:
            # always uploaded, never skipped when the key exists: the upload
            # refreshes the object's age, which is what keeps a collection that
            # started before this row committed from deleting it
            await self.blobs.put(ref.key, data)
        except BlobUnavailable as exc:
            raise CheckpointWriteError(
                run_id=run_id,
                seq=seq,
                detail=f"the object store did not take object {ref.key} ({exc})",
            ) from exc
        return ref.encode()

    async def _resolve(self, data: Any, *, place: str, stream: bool = False) -> Any:
        """The sealed frame a row's payload stands for; anything else unchanged.

        With `stream`, a large object is read through the opener `stream_with`
        gave, and its opened body is returned instead.
        """
        if is_member(data):
            return await self._cold.member(bytes(data), place=place)
        if not is_reference(data):
            return data  # a frame (or damage), for the engine's envelope to judge
        ref = BlobRef.decode(bytes(data), place=place)
        if (
            stream
            and self._opener is not None
            and ref.size > STREAM_READ_OVER
            and isinstance(self.blobs, StreamingBlobs)
        ):
            return await download(self.blobs, ref, self._opener, place=place)
        return await fetch(self.blobs, ref, place=place)

    async def _resolve_run(self, run: RunRecord) -> RunRecord:
        if not (points_away(run.input) or points_away(run.output)):
            return run
        data, output = await asyncio.gather(
            self._resolve(run.input, place=run_place(run.run_id, "input"), stream=True),
            self._resolve(
                run.output, place=run_place(run.run_id, "output"), stream=True
            ),
        )
        return dataclasses.replace(run, input=data, output=output)

    async def _resolve_step(self, step: StepRecord) -> StepRecord:
        if not (points_away(step.output) or points_away(step.usage)):
            return step
        place = step_place(step.run_id, step.seq, step.name)
        output, usage = await asyncio.gather(
            self._resolve(step.output, place=place, stream=True),
            self._resolve(step.usage, place=place + " usage"),
        )
        return dataclasses.replace(step, output=output, usage=usage)

    # --- runs -------------------------------------------------------------------
    async def create_run(self, run: RunRecord) -> RunRecord:
        data, output = await asyncio.gather(
            self._offload(run.input, run_id=run.run_id, seq=None),
            self._offload(run.output, run_id=run.run_id, seq=None),
        )
        assert data is not None  # noqa: S101 - run.input is never None
        stored = await self.inner.create_run(
            dataclasses.replace(run, input=data, output=output)
        )
        return await self._resolve_run(stored)

    async def get_run(self, run_id: str) -> RunRecord | None:
        run = await self.inner.get_run(run_id)
        return None if run is None else await self._resolve_run(run)

    async def list_runs(self, query: RunQuery) -> list[RunRecord]:
        # listed runs' offloaded inputs and outputs are fetched (check and export
        # decode them), a batch at a time rather than all at once
        runs = await self.inner.list_runs(query)
        resolved: list[RunRecord] = []
        for start in range(0, len(runs), _FETCH_BATCH):
            batch = runs[start : start + _FETCH_BATCH]
            resolved.extend(
                await asyncio.gather(*(self._resolve_run(r) for r in batch))
            )
        return resolved

    async def count_runs(self, query: RunQuery) -> dict[tuple[str, str | None], int]:
        return await self.inner.count_runs(query)  # counting reads no payload

    async def acquire_lease(
        self,
        run_id: str,
        *,
        owner: str,
        now_ms: int,
        ttl_ms: int,
        take_over: str | None = None,
    ) -> Lease | None:
        return await self.inner.acquire_lease(
            run_id, owner=owner, now_ms=now_ms, ttl_ms=ttl_ms, take_over=take_over
        )

    async def renew_lease(
        self, run_id: str, *, fence: int, now_ms: int, ttl_ms: int
    ) -> None:
        await self.inner.renew_lease(run_id, fence=fence, now_ms=now_ms, ttl_ms=ttl_ms)

    async def update_run(self, run_id: str, *, fence: int, update: RunUpdate) -> None:
        output = await self._offload(update.output, run_id=run_id, seq=None)
        if output is not update.output:
            update = dataclasses.replace(update, output=output)
        await self.inner.update_run(run_id, fence=fence, update=update)

    async def cancel_run(self, run_id: str, *, now_ms: int) -> RunRecord:
        return await self._resolve_run(
            await self.inner.cancel_run(run_id, now_ms=now_ms)
        )

    async def reopen_run(self, run_id: str, *, now_ms: int) -> bool:
        if self._cold.runs is not None:
            # a retried run writes its journal again: its rows come back first, or
            # the new ones would hide the archived ones from every later replay
            await restore_run(self._cold.runs, self.blobs, run_id)
        return await self.inner.reopen_run(run_id, now_ms=now_ms)

    async def claim_runs(
        self,
        *,
        owner: str,
        now_ms: int,
        ttl_ms: int,
        limit: int,
        workflows: Collection[str],
        queues: Mapping[str, QueuePolicy],
        versions: Collection[str] | None = None,
    ) -> list[Lease]:
        return await self.inner.claim_runs(
            owner=owner,
            now_ms=now_ms,
            ttl_ms=ttl_ms,
            limit=limit,
            workflows=workflows,
            queues=queues,
            versions=versions,
        )

    async def delete_runs(self, run_ids: Collection[str]) -> DeleteResult:
        # their objects become garbage for collect_garbage
        return await self.inner.delete_runs(run_ids)

    # --- journal ----------------------------------------------------------------
    async def load_journal(
        self, run_id: str, *, up_to_seq: int | None = None
    ) -> list[StepRecord]:
        steps = await self.inner.load_journal(run_id, up_to_seq=up_to_seq)
        if not steps and self._cold.runs is not None:  # archived, or no step yet
            steps = await self._cold.steps(run_id, up_to_seq)
        if not any(points_away(s.output) or points_away(s.usage) for s in steps):
            return steps
        return list(await asyncio.gather(*(self._resolve_step(s) for s in steps)))

    async def commit_step(self, step: StepRecord, *, fence: int) -> None:
        output, usage = await asyncio.gather(
            self._offload(step.output, run_id=step.run_id, seq=step.seq),
            self._offload(step.usage, run_id=step.run_id, seq=step.seq),
        )
        if output is not step.output or usage is not step.usage:
            step = dataclasses.replace(step, output=output, usage=usage)
        await self.inner.commit_step(step, fence=fence)

    # --- step cache -----------------------------------------------------------------
    def _cache_index(self) -> SupportsStepCache:
        """The wrapped store's index (`Capabilities.of` asks only when it has one)."""
        if not isinstance(self.inner, SupportsStepCache):
            raise TypeError(f"{self.inner!r} keeps no step cache")
        return self.inner

    async def put_cache_entries(self, entries: Sequence[CacheEntry]) -> None:
        await self._cache_index().put_cache_entries(entries)

    async def lookup_cache(
        self, key: str, *, now_ms: int
    ) -> tuple[CacheEntry, StepRecord] | None:
        # the row as a journal read gives it: its value resolved from the object
        # store, which the engine decodes and commits again as the hit's own row
        found = await self._cache_index().lookup_cache(key, now_ms=now_ms)
        if found is None:
            return None
        entry, row = found
        return entry, await self._resolve_step(row)

    async def clear_cache(
        self, *, step: str | None = None, workflow: str | None = None
    ) -> int:
        return await self._cache_index().clear_cache(step=step, workflow=workflow)

    # --- inputs -----------------------------------------------------------------
    async def send_input(self, record: InputRecord) -> bool:
        value = await self._offload(record.value, run_id=record.run_id, seq=None)
        assert value is not None  # noqa: S101 - an input's value is never None
        return await self.inner.send_input(dataclasses.replace(record, value=value))

    async def get_inputs(self, run_id: str) -> dict[str, bytes]:
        inputs = await self.inner.get_inputs(run_id)
        if not inputs and self._cold.runs is not None:
            inputs = {r.key: r.value for r in await self._cold.inputs(run_id)}
        keys = list(inputs)
        values = await asyncio.gather(
            *(
                self._resolve(inputs[k], place=run_place(run_id, f"input {k!r}"))
                for k in keys
            )
        )
        return dict(zip(keys, values, strict=True))

    async def list_inputs(self, run_id: str) -> list[InputRecord]:
        records = await self.inner.list_inputs(run_id)
        if not records and self._cold.runs is not None:
            records = await self._cold.inputs(run_id)
        values = await asyncio.gather(
            *(
                self._resolve(r.value, place=run_place(run_id, f"input {r.key!r}"))
                for r in records
            )
        )
        return [
            dataclasses.replace(r, value=v)
            for r, v in zip(records, values, strict=True)
        ]

    # --- snapshots ----------------------------------------------------------------
    async def _offload_chunks(self, chunks: Mapping[str, bytes]) -> Mapping[str, bytes]:
        if not any(len(data) > self.offload_over for data in chunks.values()):
            return chunks
        digests = list(chunks)
        stored = await asyncio.gather(
            *(self._offload_other(chunks[d], what=f"chunk {d}") for d in digests)
        )
        return dict(zip(digests, stored, strict=True))

    async def _offload_other(self, data: bytes, *, what: str) -> bytes:
        """`_offload` for a payload of no run: StoreError when it cannot upload."""
        try:
            stored = await self._offload(data, run_id="", seq=None)
        except CheckpointWriteError as exc:
            raise StoreError(
                store=self.blobs.url, detail=f"{what}: {exc.detail}"
            ) from exc
        assert stored is not None  # noqa: S101 - data is bytes
        return stored

    async def _offload_snapshot(self, snapshot: SnapshotRecord) -> SnapshotRecord:
        what = f"thread {snapshot.thread_id!r} checkpoint {snapshot.checkpoint_id!r}"
        manifest = await self._offload_other(snapshot.manifest, what=what)
        metadata = snapshot.metadata
        if metadata is not None:
            metadata = await self._offload_other(metadata, what=what + " metadata")
        if manifest is snapshot.manifest and metadata is snapshot.metadata:
            return snapshot
        return dataclasses.replace(snapshot, manifest=manifest, metadata=metadata)

    async def _resolve_snapshot(self, snapshot: SnapshotRecord) -> SnapshotRecord:
        if not (points_away(snapshot.manifest) or points_away(snapshot.metadata)):
            return snapshot
        place = f"thread {snapshot.thread_id!r} checkpoint {snapshot.checkpoint_id!r}"
        manifest, metadata = await asyncio.gather(
            self._resolve(snapshot.manifest, place=place + " manifest"),
            self._resolve(snapshot.metadata, place=place + " metadata"),
        )
        return dataclasses.replace(snapshot, manifest=manifest, metadata=metadata)

    async def put_chunks(self, chunks: Mapping[str, bytes]) -> None:
        await self.inner.put_chunks(await self._offload_chunks(chunks))

    async def get_chunks(self, hashes: Collection[str]) -> dict[str, bytes]:
        chunks = await self.inner.get_chunks(hashes)
        if self._cold.threads is not None and len(chunks) < len(set(hashes)):
            # chunks of archived snapshots: in the objects those were read from
            chunks |= await self._cold.chunks(set(hashes) - chunks.keys())
        if not any(points_away(data) for data in chunks.values()):
            return chunks
        digests = list(chunks)
        data = await asyncio.gather(
            *(self._resolve(chunks[d], place=f"chunk {d}") for d in digests)
        )
        return dict(zip(digests, data, strict=True))

    async def save_snapshot(
        self, snapshot: SnapshotRecord, *, chunks: Mapping[str, bytes] = NO_CHUNKS
    ) -> None:
        snapshot, chunks = await asyncio.gather(
            self._offload_snapshot(snapshot), self._offload_chunks(chunks)
        )
        await self.inner.save_snapshot(snapshot, chunks=chunks)

    async def load_snapshot(
        self, thread_id: str, *, namespace: str = "", checkpoint_id: str | None = None
    ) -> SnapshotRecord | None:
        snapshot = await self.inner.load_snapshot(
            thread_id, namespace=namespace, checkpoint_id=checkpoint_id
        )
        snapshot = await self._cold.load(thread_id, namespace, checkpoint_id, snapshot)
        return None if snapshot is None else await self._resolve_snapshot(snapshot)

    async def list_snapshots(
        self,
        thread_id: str,
        *,
        namespace: str | None = "",
        before: str | None = None,
        limit: int | None = None,
    ) -> list[SnapshotRecord]:
        snapshots = await self.inner.list_snapshots(
            thread_id, namespace=namespace, before=before, limit=limit
        )
        snapshots = await self._cold.merge(
            thread_id, namespace, before, limit, snapshots
        )
        return list(
            await asyncio.gather(*(self._resolve_snapshot(s) for s in snapshots))
        )

    async def swap_snapshots(
        self,
        thread_id: str,
        old: Sequence[SnapshotRecord],
        *,
        by: SnapshotRecord | None,
        chunks: Mapping[str, bytes] = NO_CHUNKS,
        durable: bool = True,
    ) -> bool:
        stored = await self._as_stored(thread_id, old)
        if stored is None:
            return False
        new = None if by is None else await self._offload_snapshot(by)
        return await self.inner.swap_snapshots(
            thread_id,
            stored,
            by=new,
            chunks=await self._offload_chunks(chunks),
            durable=durable,
        )

    async def _as_stored(
        self, thread_id: str, old: Sequence[SnapshotRecord]
    ) -> list[SnapshotRecord] | None:
        """`old` as the wrapped store holds them; None if one is gone or changed.

        The engine names the records a swap replaces as it read them: resolved,
        their manifests the frames themselves. The wrapped store holds each
        manifest either as that frame or as the reference to its object, and
        compares what it holds.
        """
        held: dict[tuple[str, str], bytes] = {}
        for namespace in dict.fromkeys(record.namespace for record in old):
            for row in await self.inner.list_snapshots(thread_id, namespace=namespace):
                held[namespace, row.checkpoint_id] = row.manifest
        stored: list[SnapshotRecord] = []
        for record in old:
            raw = held.get((record.namespace, record.checkpoint_id))
            if raw is None:
                return None
            if raw != record.manifest:
                if not is_reference(raw) or raw != BlobRef.of(record.manifest).encode():
                    return None
                record = dataclasses.replace(record, manifest=raw)  # noqa: PLW2901 - as stored
            stored.append(record)
        return stored

    async def delete_snapshots(
        self, thread_id: str, keys: Collection[tuple[str, str]]
    ) -> int:
        return await self.inner.delete_snapshots(thread_id, keys)

    async def delete_thread(self, thread_id: str) -> int:
        return await self.inner.delete_thread(thread_id)

    async def delete_unreferenced_chunks(self, limit: int) -> int:
        return await self.inner.delete_unreferenced_chunks(limit)

    async def list_threads(
        self,
        *,
        prefix: str | None = None,
        after: tuple[int, str] | None = None,
        limit: int = 100,
    ) -> list[ThreadRecord]:
        return await self.inner.list_threads(prefix=prefix, after=after, limit=limit)

    # --- maintenance ------------------------------------------------------------
    async def scan_payloads(
        self, kind: PayloadKind, *, after: tuple[str | int, ...] | None, limit: int
    ) -> list[Payload]:
        payloads = await self.inner.scan_payloads(kind, after=after, limit=limit)
        return [
            dataclasses.replace(
                p, data=await self._resolve(p.data, place=payload_place(p))
            )
            if points_away(p.data)
            else p
            for p in payloads
        ]

    async def replace_payload(self, payload: Payload, *, data: bytes) -> bool:
        # `payload.data` is the frame scan_payloads resolved: the row holds either
        # it or its reference; the new frame is offloaded as any write is
        run_id = str(payload.key[0]) if payload.key else ""
        new = await self._offload(data, run_id=run_id, seq=None)
        assert new is not None  # noqa: S101 - data is bytes
        referenced = dataclasses.replace(
            payload, data=BlobRef.of(payload.data).encode()
        )
        if await self.inner.replace_payload(referenced, data=new):
            return True
        return await self.inner.replace_payload(payload, data=new)

    # --- archive and collection -------------------------------------------------
    async def archive_finished(
        self,
        *,
        updated_before_ms: int,
        limit: int,
        now_ms: int,
        prepare: Prepare | None = None,
    ) -> list[Archived]:
        """Archive up to `limit` finished runs and threads gone cold (`archive_due`)."""
        return await archive_due(
            self.inner,
            self.blobs,
            updated_before_ms=updated_before_ms,
            limit=limit,
            now_ms=now_ms,
            prepare=prepare,
        )

    async def restore_archived(self, run_id: str) -> ArchiveStub | None:
        """Put an archived run's rows back (`archive.restore_run`); None if not archived."""
        if self._cold.runs is None:
            return None
        return await restore_run(self._cold.runs, self.blobs, run_id)

    async def restore_archived_thread(self, thread_id: str) -> ThreadStub | None:
        """Put a thread's archived rows back (`archive.restore_thread`); None if none."""
        if self._cold.threads is None:
            return None
        return await restore_thread(self._cold.threads, self.blobs, thread_id)

    async def referenced_keys(self) -> set[str]:
        """The keys of every object a row or stub of the wrapped store references now."""
        return await referenced_keys(self.inner)

    async def collect_garbage(self, *, older_than_ms: int, now_ms: int) -> int:
        """Delete objects no row references, older than `older_than_ms` (`offload_gc`)."""
        return await collect_garbage(
            await self.referenced_keys(),
            self.blobs,
            older_than_ms=older_than_ms,
            now_ms=now_ms,
        )

    async def close(self) -> None:
        try:
            await self.inner.close()
        finally:
            await self.blobs.close()
