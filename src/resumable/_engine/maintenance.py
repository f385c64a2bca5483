"""Maintenance passes over an Engine's store: `gc`, `archive` and `rekey`.

Each wraps its store-level pass (`retention.collect`, the offload store's object
collection and archive, `rekey.rekey`) with what the Engine adds: the object store
when there is one, the clock, the observers, and a UsageError saying what
configuration the pass needs.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from resumable._engine.clock import Clock
from resumable._engine.cold import ready_thread
from resumable._engine.context import Runtime
from resumable._engine.journal import get_run
from resumable._engine.retention import GcReport, collect
from resumable._engine.snapshots import Snapshots
from resumable.errors import UsageError
from resumable.stores.archive import Archived
from resumable.stores.capabilities import KeepsObjects
from resumable.stores.protocol import (
    Maintenance,
    RunListing,
    RunStatus,
    RunStore,
    SnapshotStore,
)
from resumable.stores.urls import redact


async def collect_garbage(
    runtime: Runtime,
    *,
    listing: RunListing,
    maintenance: Maintenance,
    snapshots: SnapshotStore | None,
    objects: KeepsObjects | None,
    older_than: timedelta | None,
    status: RunStatus | tuple[RunStatus, ...],
    keep_last: int | None,
    dry_run: bool,
    batch: int,
    blobs_grace: timedelta,
) -> GcReport:
    """`Engine.gc`: delete due runs and unused chunks, then unreferenced objects."""
    store, clock = runtime.store, runtime.clock
    statuses = (status,) if isinstance(status, str) else tuple(status)
    report = await collect(
        store,
        listing=listing,
        maintenance=maintenance,
        snapshots=snapshots,
        now_ms=clock.now_ms(),
        older_than=older_than,
        status=statuses,
        keep_last=keep_last,
        dry_run=dry_run,
        batch=batch,
    )
    if objects is not None and not dry_run:
        blobs = await objects.collect_garbage(
            older_than_ms=int(blobs_grace.total_seconds() * 1000),
            now_ms=clock.now_ms(),
        )
        report = dataclasses.replace(report, blobs=blobs)
    if runtime.observer is not None:
        runtime.observer.gc_collected(report)
    return report


async def archive(
    store: RunStore,
    objects: KeepsObjects | None,
    clock: Clock,
    snapshots: Snapshots | None,
    *,
    older_than: timedelta,
    limit: int,
) -> list[Archived]:
    """`Engine.archive`: move runs finished and threads saved before the cutoff.

    Raises:
        UsageError: the store has no object store (`blobs=`).
    """
    offload = _archiving(store, objects)
    assert snapshots is not None  # noqa: S101 - an OffloadStore wraps a full Store
    now_ms = clock.now_ms()
    cutoff_ms = now_ms - int(older_than.total_seconds() * 1000)

    async def prepare(thread_id: str) -> set[tuple[str, str]]:
        return await ready_thread(snapshots, thread_id)

    return await offload.archive_finished(
        updated_before_ms=cutoff_ms, limit=limit, now_ms=now_ms, prepare=prepare
    )


async def unarchive_thread(
    store: RunStore, objects: KeepsObjects | None, thread_id: str
) -> bool:
    """`Engine.unarchive_thread`: put a thread's archived snapshots back.

    Raises:
        UsageError: the store has no object store (`blobs=`).
    """
    offload = _archiving(store, objects)
    return await offload.restore_archived_thread(thread_id) is not None


async def unarchive(store: RunStore, objects: KeepsObjects | None, run_id: str) -> bool:
    """`Engine.unarchive`: put an archived run's rows back; False if it was not.

    Raises:
        UsageError: the store has no object store (`blobs=`).
        RunNotFound: there is no such run.
    """
    offload = _archiving(store, objects)
    await get_run(store, run_id)
    return await offload.restore_archived(run_id) is not None


def _archiving(store: RunStore, objects: KeepsObjects | None) -> KeepsObjects:
    if objects is None:
        raise UsageError(
            f"store {redact(store.url)}: archive needs an object store: add "
            f"?blobs=s3://bucket/prefix (or file:///folder) to the store URL, or "
            f"pass Engine(blobs=...)"
        )
    return objects
