"""Archiving: finished runs' journals and old saved states moved to objects, stubs left.

`archive_run` reads every journal record and input of a finished run,
`archive_thread` a thread's snapshots but those kept live (by default the newest
of each namespace, so loading a thread's latest state never waits for the
object store) and every chunk they name; each writes them into one object
(`stores.cold`), and only once the object store has taken it asks the store to
swap those rows for one stub, in one transaction (`stores.stubs`). The run's own
row stays (status, timings, names, input and output), so `runs` lists it and a
finished run returns its result. A thread archived again has its earlier
object's records carried into the new one, so a thread has one object; that
object holds every chunk its snapshots name, those that stay live too, so
restoring puts back a chunk a collection deleted meanwhile.

A crash before the swap leaves the rows and an object nothing references (a
collection deletes it after its grace period); a crash after it leaves the stub
and its object. `restore_run` and `restore_thread` put the rows back and delete
the stub in one transaction, so again either stays. The stub lists in
`refers_to` the offloaded objects its records reference, so a collection keeps
them. `archive_due` picks the runs and threads gone cold; `ColdReader` reads
archived records back for `OffloadStore`, merged with the live rows.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Final, TypeVar

from resumable.errors import CapabilityMissing, CorruptCheckpointError
from resumable.stores.blobref import MemberRef, key_of
from resumable.stores.blobs import BlobStore
from resumable.stores.cold import (
    ColdRun,
    ColdThread,
    encode_cold_run,
    encode_cold_thread,
    fetch_object,
    inflate,
    put_object,
    read_cold_run,
    read_cold_thread,
)
from resumable.stores.protocol import (
    TERMINAL_STATUSES,
    InputRecord,
    RunQuery,
    SnapshotRecord,
    StepRecord,
    Store,
)
from resumable.stores.stubs import (
    ArchiveStub,
    SupportsArchive,
    SupportsThreadArchive,
    ThreadStub,
)

__all__ = [
    "Archived",
    "ColdReader",
    "Prepare",
    "archive_due",
    "archive_run",
    "archive_thread",
    "newest_of_each_namespace",
    "restore_run",
    "restore_thread",
]

_PAGE: Final = 500
_AT_ONCE: Final = 16
_CACHED: Final = 8
_REMEMBERED: Final = 256
Where = tuple[str, str]  # namespace, checkpoint_id
_T = TypeVar("_T")

Prepare = Callable[[str], Awaitable[Collection[Where] | None]]
"""Called before a thread is archived: the (namespace, checkpoint_id) of the
snapshots to keep live, or None for the newest of each namespace."""


@dataclass(frozen=True, slots=True)
class Archived:
    """What archiving moved for one run or one thread (`Engine.archive`)."""

    kind: str
    """"run" or "thread"."""
    name: str
    """The run id or the thread id."""
    payloads: int
    """How many records moved: journal records and inputs, or snapshots and chunks."""
    bytes_moved: int
    """The size of the object they moved into."""
    key: str | None
    """The object's key; None when nothing was left to move."""


def _referenced(payloads: Iterable[bytes | None]) -> tuple[str, ...]:
    keys = {key_of(data) for data in payloads}
    return tuple(sorted(key for key in keys if key is not None))


def newest_of_each_namespace(snapshots: Iterable[SnapshotRecord]) -> set[Where]:
    """The default of what stays live: each namespace's newest snapshot."""
    newest: dict[str, str] = {}
    for snap in snapshots:
        held = newest.get(snap.namespace)
        if held is None or snap.checkpoint_id > held:
            newest[snap.namespace] = snap.checkpoint_id
    return set(newest.items())


async def archive_run(
    inner: Store,
    archive: SupportsArchive,
    blobs: BlobStore,
    run_id: str,
    *,
    now_ms: int,
) -> ArchiveStub | None:
    """Move a finished run's journal and inputs into one object (see the module docstring).

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
    stub = ArchiveStub(
        run_id=run_id,
        key=await put_object(blobs, "run", run_id, packed),
        size=len(packed),
        steps=len(cold.steps),
        inputs=len(cold.inputs),
        fence=run.fence,
        archived_at_ms=now_ms,
        refers_to=_referenced(
            [p for s in cold.steps for p in (s.output, s.usage)]
            + [i.value for i in cold.inputs]
        ),
    )
    return stub if await archive.archive_journal(stub) else None


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
    packed = encode_cold_thread(ColdThread(thread_id, snapshots, chunks))
    stub = ThreadStub(
        thread_id=thread_id,
        key=await put_object(blobs, "thread", thread_id, packed),
        size=len(packed),
        snapshots=len(snapshots),
        chunks=len(chunks),
        archived_at_ms=now_ms,
        newest=tuple(sorted(newest_of_each_namespace(snapshots))),
        refers_to=_referenced(
            [p for s in snapshots for p in (s.manifest, s.metadata)]
            + list(chunks.values())
        ),
    )
    done = await archive.archive_snapshots(
        stub,
        moved=sorted(moving),
        chunks=list(dict.fromkeys(ref for s in moved for ref in s.chunk_refs)),
        replaces=None if held is None else held.key,
    )
    return stub if done else None


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


async def archive_due(
    inner: Store,
    blobs: BlobStore,
    *,
    updated_before_ms: int,
    limit: int,
    now_ms: int,
    prepare: Prepare | None = None,
) -> list[Archived]:
    """Archive up to `limit` finished runs and `limit` threads gone cold.

    A run is due when it finished and last changed before the cutoff; a thread
    when its newest saved state is older than the cutoff. Runs are read newest
    first, a page at a time, and archived a few at once.

    Raises:
        CapabilityMissing: `inner` declares neither `SupportsArchive` nor
            `SupportsThreadArchive`.
        StoreError: the object store did not take an object (those archived
            before it stay archived).
    """
    if not isinstance(inner, SupportsArchive | SupportsThreadArchive):
        raise CapabilityMissing(
            store=inner.url,
            capability="SupportsArchive or SupportsThreadArchive",
            call="archive",
        )
    done: list[Archived] = []
    if isinstance(inner, SupportsArchive):
        done += await _archive_due_runs(inner, blobs, updated_before_ms, limit, now_ms)
    if isinstance(inner, SupportsThreadArchive):
        done += await _archive_due_threads(
            inner,
            blobs,
            updated_before_ms=updated_before_ms,
            limit=limit,
            now_ms=now_ms,
            prepare=prepare,
        )
    return done


async def _archive_due_runs(
    inner: Store, blobs: BlobStore, updated_before_ms: int, limit: int, now_ms: int
) -> list[Archived]:
    assert isinstance(inner, SupportsArchive)  # noqa: S101 - checked by archive_due
    done: list[Archived] = []
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
                    archive_run(inner, inner, blobs, r.run_id, now_ms=now_ms)
                    for r in batch
                )
            )
            done.extend(
                Archived("run", s.run_id, s.steps + s.inputs, s.size, s.key)
                for s in stubs
                if s is not None
            )
        if len(page) < _PAGE:
            return done
        query = dataclasses.replace(
            query, after=(page[-1].created_at_ms, page[-1].run_id)
        )
    return done


async def _archive_due_threads(
    inner: Store,
    blobs: BlobStore,
    *,
    updated_before_ms: int,
    limit: int,
    now_ms: int,
    prepare: Prepare | None,
) -> list[Archived]:
    assert isinstance(inner, SupportsThreadArchive)  # noqa: S101 - checked by archive_due
    done: list[Archived] = []
    # threads newest first: those gone cold are the ones listed after the cutoff
    after: tuple[int, str] | None = (updated_before_ms, "")
    while len(done) < limit and after is not None:
        page = await inner.list_threads(after=after, limit=_PAGE)
        after = (page[-1].updated_at_ms, page[-1].thread_id) if page else None
        if len(page) < _PAGE:
            after = None
        for record in page:
            if len(done) >= limit:
                break
            keep = None if prepare is None else await prepare(record.thread_id)
            stub = await archive_thread(
                inner, inner, blobs, record.thread_id, now_ms=now_ms, keep=keep
            )
            if stub is not None:
                done.append(
                    Archived(
                        "thread",
                        stub.thread_id,
                        stub.snapshots + stub.chunks,
                        stub.size,
                        stub.key,
                    )
                )
    return done


# --- reading through stubs -------------------------------------------------------
def _newest_first(records: Iterable[SnapshotRecord]) -> list[SnapshotRecord]:
    return sorted(records, key=lambda s: (s.checkpoint_id, s.namespace), reverse=True)


class ColdReader:
    """Reads archived records through their stubs, merged with the live rows.

    For `OffloadStore`: `runs` and `threads` are the wrapped store when it
    declares `SupportsArchive` / `SupportsThreadArchive`, else None (nothing of
    that kind is ever archived). Keeps the last few objects decoded, and
    remembers which thread stubs it read from lately: the engine reads a
    snapshot's chunks right after the snapshot.
    """

    def __init__(self, inner: Store, blobs: BlobStore) -> None:
        self.runs = inner if isinstance(inner, SupportsArchive) else None
        self.threads = inner if isinstance(inner, SupportsThreadArchive) else None
        self._blobs = blobs
        self._cached: OrderedDict[str, ColdRun | ColdThread | bytes] = OrderedDict()
        self._read_from: OrderedDict[str, ThreadStub] = OrderedDict()

    async def _decoded(
        self, key: str, read: Callable[[], Awaitable[_T]], kind: type[_T]
    ) -> _T:
        held = self._cached.get(key)
        if isinstance(held, kind):
            self._cached.move_to_end(key)
            return held
        decoded = await read()
        self._cached[key] = decoded  # type: ignore[assignment]  # _T is one of the three
        while len(self._cached) > _CACHED:
            self._cached.popitem(last=False)
        return decoded

    async def run(self, run_id: str) -> ColdRun | None:
        """The archived records of the run; None when it has no stub.

        Raises:
            CorruptCheckpointError: its object is missing or damaged.
            StoreError: the object store did not answer.
        """
        stub = None if self.runs is None else await self.runs.load_archive_stub(run_id)
        if stub is None:
            return None
        return await self._decoded(
            stub.key, lambda: read_cold_run(self._blobs, stub), ColdRun
        )

    async def steps(self, run_id: str, up_to_seq: int | None) -> list[StepRecord]:
        """The archived journal of the run, as `Store.load_journal` returns it."""
        cold = await self.run(run_id)
        if cold is None:
            return []
        return [s for s in cold.steps if up_to_seq is None or s.seq <= up_to_seq]

    async def inputs(self, run_id: str) -> list[InputRecord]:
        """The archived inputs of the run, oldest first."""
        cold = await self.run(run_id)
        return [] if cold is None else list(cold.inputs)

    async def _thread(self, stub: ThreadStub) -> ColdThread:
        cold = await self._decoded(
            stub.key, lambda: read_cold_thread(self._blobs, stub), ColdThread
        )
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
        if live is not None or self.threads is None:
            return live
        stub = await self.threads.load_thread_stub(thread_id)
        if stub is None or namespace not in dict(stub.newest):
            return None
        found = [
            s
            for s in (await self._thread(stub)).snapshots
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
        if self.threads is None:
            return live
        stub = await self.threads.load_thread_stub(thread_id)
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
            for s in (await self._thread(stub)).snapshots
            if (namespace is None or s.namespace == namespace)
            and (before is None or s.checkpoint_id < before)
            and (s.namespace, s.checkpoint_id) not in seen
        ]
        merged = _newest_first([*live, *archived])
        return merged if limit is None else merged[:limit]

    async def chunks(self, hashes: Collection[str]) -> dict[str, bytes]:
        """Those of `hashes` held by a thread object read lately (stored bytes)."""
        found: dict[str, bytes] = {}
        wanted = set(hashes)
        for key in reversed(list(self._read_from)):
            if not wanted:
                break
            cold = await self._thread(self._read_from[key])
            for digest in [h for h in wanted if h in cold.chunks]:
                found[digest] = cold.chunks[digest]
                wanted.discard(digest)
        return found

    async def member(self, data: bytes, *, place: str) -> bytes:
        """The payload a member reference of the payload-level archive stands for.

        Raises:
            CorruptCheckpointError: the reference, the object or the member is
                damaged, or the object is missing.
            StoreError: the object store did not answer.
        """
        ref = MemberRef.decode(data, place=place)

        async def read() -> bytes:
            packed = await fetch_object(
                self._blobs,
                ref.key,
                ref.archive_size,
                place=place,
                owner="the run or thread",
            )
            try:
                # one byte past what the reference declares: the stream's end is
                # still read, and an object that inflates larger is refused
                unpacked = inflate(packed, ref.unpacked_size + 1)
            except ValueError as exc:  # pragma: no cover - the hash was checked
                raise CorruptCheckpointError(
                    place=place, detail=f"archive object {ref.key}: {exc}"
                ) from exc
            if len(unpacked) != ref.unpacked_size:  # pragma: no cover - ditto
                raise CorruptCheckpointError(
                    place=place, detail=f"archive object {ref.key} has the wrong size"
                )
            return unpacked

        unpacked = await self._decoded(ref.key, read, bytes)
        member = unpacked[ref.offset : ref.offset + ref.length]
        if hashlib.sha256(member).digest() != ref.sha256:
            raise CorruptCheckpointError(
                place=place,
                detail=f"its member of archive {ref.key} fails its hash check",
            )
        return member
