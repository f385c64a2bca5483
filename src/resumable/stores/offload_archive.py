"""Which runs and threads an `OffloadStore` archives, and in which form.

A run is due when it finished and last changed before the cutoff. On a store
that declares `SupportsArchive` its journal and inputs move into one object and a
stub stays (`stores.coldruns`); on one that does not, its payloads move and its
rows stay (`stores.archive`). A thread is due when its newest saved state is
older than the cutoff; its older states' payloads move (`archive_thread`).
"""

from __future__ import annotations

from typing import Final

from resumable.stores.archive import Archived, archive_run, archive_thread
from resumable.stores.archiving import SupportsArchive
from resumable.stores.blobs import BlobStore
from resumable.stores.coldruns import archive_due_runs
from resumable.stores.protocol import TERMINAL_STATUSES, RunQuery, Store

__all__ = ["archive_due"]

_SCAN_PAGE: Final = 500


async def archive_due(
    inner: Store,
    blobs: BlobStore,
    *,
    updated_before_ms: int,
    limit: int,
    now_ms: int,
) -> list[Archived]:
    """Archive up to `limit` finished runs and `limit` threads gone cold."""
    done = await _archive_runs(inner, blobs, updated_before_ms, limit, now_ms)
    for thread_id in await _threads(inner, limit):
        newest = await inner.list_snapshots(thread_id, namespace=None, limit=1)
        if newest and newest[0].created_at_ms < updated_before_ms:
            done.append(await archive_thread(inner, blobs, thread_id))
    return done


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


async def _threads(inner: Store, limit: int) -> list[str]:
    """Up to `limit` thread ids, in key order (from their manifests)."""
    threads: dict[str, None] = {}
    after: tuple[str | int, ...] | None = None
    while len(threads) < limit:
        page = await inner.scan_payloads(
            "snapshot.manifest", after=after, limit=_SCAN_PAGE
        )
        threads.update(dict.fromkeys(str(p.key[0]) for p in page))
        if len(page) < _SCAN_PAGE:
            break
        after = page[-1].key
    return list(threads)[:limit]
