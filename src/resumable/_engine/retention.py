"""Retention: delete finished runs, their journals and inputs, and unused chunks.

A run is deleted with its journal and inputs in one store transaction, so a crash
mid-GC never leaves steps behind that a new run reusing the id could replay
(DBOS #769). GC never touches a run that has not finished, a run a fork still
shares steps with, or a child whose parent is still going.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import timedelta

from resumable.stores.protocol import (
    TERMINAL_STATUSES,
    Maintenance,
    RunListing,
    RunQuery,
    RunRecord,
    RunStore,
    SnapshotStore,
)

_ALL = 1 << 40  # a limit no store reaches: GC considers every finished run


@dataclass(frozen=True, slots=True, kw_only=True)
class GcReport:
    """What a retention pass deleted (or, with dry_run, would delete)."""

    runs: int = 0
    steps: int = 0
    inputs: int = 0
    chunks: int = 0
    run_ids: tuple[str, ...] = field(default=())
    kept_for_forks: int = 0
    dry_run: bool = False
    blobs: int = 0
    """Offloaded objects no row referenced any more (`stores.offload`)."""
    bytes: int = 0
    """Payload bytes deleted with the runs, as stored (`DeleteResult.bytes`); not
    counted: saved-state chunks, offloaded objects, keys and indexes."""


async def collect(
    store: RunStore,
    *,
    listing: RunListing,
    maintenance: Maintenance,
    snapshots: SnapshotStore | None,
    now_ms: int,
    older_than: timedelta | None,
    status: tuple[str, ...],
    keep_last: int | None,
    dry_run: bool,
    batch: int,
) -> GcReport:
    """Find the runs due for deletion and (unless dry_run) delete them in batches.

    `listing`, `maintenance` and `snapshots` are `store`'s parts (a store without
    snapshots holds no chunks to collect).
    """
    statuses = [s for s in status if s in TERMINAL_STATUSES]
    cutoff_ms = (
        None if older_than is None else now_ms - int(older_than.total_seconds() * 1000)
    )
    finished = await _finished(listing, statuses)
    keep = _newest_per_workflow(finished, keep_last) if keep_last is not None else set()
    # keep_last alone: every finished run beyond the newest N of its workflow is due
    by_count = keep_last is not None and cutoff_ms is None
    due = [
        run
        for run in finished
        if run.run_id not in keep
        and (
            by_count
            or (cutoff_ms is not None and run.updated_at_ms < cutoff_ms)
            or (run.expires_at_ms is not None and run.expires_at_ms <= now_ms)
        )
    ]
    deletable, kept_for_forks = [], 0
    for run in due:
        if await _still_needed(store, listing, run):
            kept_for_forks += 1
        else:
            deletable.append(run.run_id)
    if dry_run:
        return GcReport(
            runs=len(deletable),
            run_ids=tuple(deletable),
            kept_for_forks=kept_for_forks,
            dry_run=True,
        )
    deleted = await _delete_runs(maintenance, deletable, batch)
    return dataclasses.replace(
        deleted,
        chunks=0
        if snapshots is None
        else await _delete_unused_chunks(snapshots, batch),
        kept_for_forks=kept_for_forks,
    )


async def _delete_runs(store: Maintenance, run_ids: list[str], batch: int) -> GcReport:
    """Delete the runs, `batch` per transaction; what was deleted."""
    runs = steps = inputs = size = 0
    deleted: list[str] = []
    for start in range(0, len(run_ids), batch):
        result = await store.delete_runs(run_ids[start : start + batch])
        runs, steps, inputs, size = (
            runs + result.runs,
            steps + result.steps,
            inputs + result.inputs,
            size + result.bytes,
        )
        deleted.extend(result.run_ids)
    return GcReport(
        runs=runs, steps=steps, inputs=inputs, run_ids=tuple(deleted), bytes=size
    )


async def _delete_unused_chunks(store: SnapshotStore, batch: int) -> int:
    """Delete the snapshot chunks nothing uses any more; how many."""
    chunks = 0
    while True:
        removed = await store.delete_unreferenced_chunks(batch)
        chunks += removed
        if removed < batch:
            return chunks


async def _finished(store: RunListing, statuses: list[str]) -> list[RunRecord]:
    """Every run with one of `statuses` (metadata only: payloads stay in the store)."""
    return await store.list_runs(RunQuery(status=statuses, limit=_ALL))


def _newest_per_workflow(runs: list[RunRecord], keep_last: int) -> set[str]:
    by_workflow: dict[str, list[RunRecord]] = {}
    for run in runs:
        by_workflow.setdefault(run.workflow, []).append(run)
    keep: set[str] = set()
    for group in by_workflow.values():
        group.sort(key=lambda run: (run.created_at_ms, run.run_id), reverse=True)
        keep.update(run.run_id for run in group[:keep_last])
    return keep


async def _still_needed(store: RunStore, listing: RunListing, run: RunRecord) -> bool:
    """A fork replays this run's steps, or its parent may still ask for its result."""
    if await listing.list_runs(RunQuery(forked_from=run.run_id, limit=1)):
        return True
    if run.parent_id is not None:
        parent = await store.get_run(run.parent_id)
        if parent is not None and not parent.is_terminal:
            return True
    return False
