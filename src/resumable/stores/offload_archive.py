"""Which runs and threads an `OffloadStore` archives, and in which form.

A run is due when it finished and last changed before the cutoff. On a store
that declares `SupportsArchive` its journal and inputs move into one object and a
stub stays (`stores.coldruns`); on one that does not, its payloads move and its
rows stay (`stores.archive`). A thread is due when its newest saved state is
older than the cutoff. On a store that declares `SupportsThreadArchive` its
snapshots but the newest of each namespace (or those `prepare` keeps) move into
one object and a stub stays (`stores.coldthreads`); on one that does not, its
older states' payloads move (`archive_thread`).

`OffloadMaintenance` holds `OffloadStore`'s archive, restore and collection
methods.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Final

from resumable.stores.archive import Archived, archive_run
from resumable.stores.archive import archive_thread as archive_thread_payloads
from resumable.stores.archiving import (
    ArchiveStub,
    SupportsArchive,
    SupportsThreadArchive,
    ThreadStub,
)
from resumable.stores.blobs import BlobStore
from resumable.stores.coldruns import ColdReader, archive_due_runs, restore_run
from resumable.stores.coldthreads import ColdThreads, archive_thread, restore_thread
from resumable.stores.offload_gc import collect_garbage, referenced_keys
from resumable.stores.protocol import TERMINAL_STATUSES, RunQuery, Store

__all__ = ["OffloadMaintenance", "Prepare", "archive_due"]

_PAGE: Final = 100

Prepare = Callable[[str], Awaitable[Collection[tuple[str, str]] | None]]
"""Called before a thread is archived by row: the (namespace, checkpoint_id) of
the snapshots to keep live, or None for the newest of each namespace."""


async def archive_due(
    inner: Store,
    blobs: BlobStore,
    *,
    updated_before_ms: int,
    limit: int,
    now_ms: int,
    prepare: Prepare | None = None,
) -> list[Archived]:
    """Archive up to `limit` finished runs and `limit` threads gone cold."""
    done = await _archive_runs(inner, blobs, updated_before_ms, limit, now_ms)
    threads = 0
    # threads newest first: those gone cold are the ones listed after the cutoff
    after: tuple[int, str] | None = (updated_before_ms, "")
    while threads < limit and after is not None:
        page = await inner.list_threads(after=after, limit=_PAGE)
        after = (page[-1].updated_at_ms, page[-1].thread_id) if page else None
        if len(page) < _PAGE:
            after = None
        for record in page:
            if threads >= limit:
                break
            moved = await _archive_thread(
                inner, blobs, record.thread_id, now_ms, prepare
            )
            if moved is not None:
                done.append(moved)
                threads += 1
    return done


async def _archive_thread(
    inner: Store,
    blobs: BlobStore,
    thread_id: str,
    now_ms: int,
    prepare: Prepare | None,
) -> Archived | None:
    if not isinstance(inner, SupportsThreadArchive):
        moved = await archive_thread_payloads(inner, blobs, thread_id)
        return moved if moved.key is not None else None
    keep = None if prepare is None else await prepare(thread_id)
    stub = await archive_thread(
        inner, inner, blobs, thread_id, now_ms=now_ms, keep=keep
    )
    if stub is None:
        return None
    return Archived(
        "thread", thread_id, stub.snapshots + stub.chunks, stub.size, stub.key
    )


async def _archive_runs(
    inner: Store, blobs: BlobStore, updated_before_ms: int, limit: int, now_ms: int
) -> list[Archived]:
    if not isinstance(inner, SupportsArchive):
        runs = await inner.list_runs(
            RunQuery(
                status=tuple(TERMINAL_STATUSES),
                updated_before_ms=updated_before_ms,
                limit=limit,
            )
        )
        return [await archive_run(inner, blobs, r.run_id) for r in runs]
    stubs = await archive_due_runs(
        inner,
        inner,
        blobs,
        updated_before_ms=updated_before_ms,
        limit=limit,
        now_ms=now_ms,
    )
    return [Archived("run", s.run_id, s.steps + s.inputs, s.size, s.key) for s in stubs]


class OffloadMaintenance:
    """`OffloadStore`'s archive, restore and collection methods."""

    inner: Store
    blobs: BlobStore
    _cold: ColdReader | None
    _threads: ColdThreads | None

    async def referenced_keys(self) -> set[str]:
        """The keys of every object a row of the wrapped store references now."""
        keys = await referenced_keys(self.inner)
        if self._cold is not None:
            keys |= await self._cold.referenced_keys()
        if self._threads is not None:
            keys |= await self._threads.referenced_keys()
        return keys

    async def collect_garbage(self, *, older_than_ms: int, now_ms: int) -> int:
        """Delete objects no row references that are older than `older_than_ms`.

        See `stores.offload_gc.collect_garbage`. Returns how many were deleted.

        Raises:
            StoreError: the object store did not answer.
        """
        referenced = await self.referenced_keys()
        return await collect_garbage(
            referenced, self.blobs, older_than_ms=older_than_ms, now_ms=now_ms
        )

    async def archive_finished(
        self,
        *,
        updated_before_ms: int,
        limit: int,
        now_ms: int,
        prepare: Prepare | None = None,
    ) -> list[Archived]:
        """Archive up to `limit` finished runs and `limit` threads gone cold.

        See `archive_due`.
        """
        return await archive_due(
            self.inner,
            self.blobs,
            updated_before_ms=updated_before_ms,
            limit=limit,
            now_ms=now_ms,
            prepare=prepare,
        )

    async def restore_archived(self, run_id: str) -> ArchiveStub | None:
        """Put an archived run's journal and inputs back in the store.

        Returns the stub that stood for them, or None when the run was not
        archived (or the store cannot archive). The object stays until a
        collection finds that nothing references it.

        Raises:
            CorruptCheckpointError: its object is missing or damaged.
        """
        if not isinstance(self.inner, SupportsArchive):
            return None
        return await restore_run(self.inner, self.blobs, run_id)

    async def restore_archived_thread(self, thread_id: str) -> ThreadStub | None:
        """Put a thread's archived snapshots and chunks back in the store.

        Returns the stub that stood for them, or None when none was archived
        (or the store cannot archive threads by row).

        Raises:
            CorruptCheckpointError: its object is missing or damaged.
        """
        if not isinstance(self.inner, SupportsThreadArchive):
            return None
        return await restore_thread(self.inner, self.blobs, thread_id)
