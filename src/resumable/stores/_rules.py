"""The run state machine as pure functions over RunRecord.

MemoryStore applies these directly; the SQL stores express the same rules in their
WHERE clauses, and StoreContract checks that every store agrees with them.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Collection, Iterable

from resumable.stores.protocol import RunQuery, RunRecord, RunUpdate

SUSPENDED = ("sleeping", "waiting")


def can_acquire(
    run: RunRecord, *, owner: str, now_ms: int, take_over: str | None
) -> bool:
    """Whether `owner` may take the run's lease now."""
    if run.is_terminal:
        return False
    if run.status != "running" or run.lease_owner is None:
        return True
    return (
        run.lease_expires_at_ms <= now_ms
        or run.lease_owner == owner
        or (take_over is not None and run.lease_owner == take_over)
    )


def lease_taken_from(status: str, lease_owner: str | None, owner: str) -> str | None:
    """Whom a new lease for `owner` takes the run from (`Lease.taken_from`).

    `status` and `lease_owner` are the run's as they stood before the new lease.
    """
    if status == "running" and lease_owner is not None and lease_owner != owner:
        return lease_owner
    return None


def is_runnable(run: RunRecord, now_ms: int) -> bool:
    """Whether a worker should pick the run up now."""
    if run.status == "queued":
        return True
    if run.status == "running":
        return run.lease_expires_at_ms <= now_ms
    if run.status in SUSPENDED:
        return run.wake_at_ms is not None and run.wake_at_ms <= now_ms
    return False


def leased(run: RunRecord, *, owner: str, now_ms: int, ttl_ms: int) -> RunRecord:
    """The run as it stands once `owner` holds a fresh lease."""
    return dataclasses.replace(
        run,
        status="running",
        lease_owner=owner,
        lease_expires_at_ms=now_ms + ttl_ms,
        fence=run.fence + 1,
        updated_at_ms=now_ms,
    )


def apply_update(run: RunRecord, update: RunUpdate) -> RunRecord:
    """The run after its lease holder changes its status."""
    holds_lease = update.status == "running"
    return dataclasses.replace(
        run,
        status=update.status,
        output=update.output if update.output is not None else run.output,
        wake_at_ms=update.wake_at_ms,
        expires_at_ms=update.expires_at_ms
        if update.expires_at_ms is not None
        else run.expires_at_ms,
        updated_at_ms=update.now_ms,
        lease_owner=run.lease_owner if holds_lease else None,
        lease_expires_at_ms=run.lease_expires_at_ms if holds_lease else 0,
    )


def cancelled(run: RunRecord, now_ms: int) -> RunRecord:
    """The run once cancelled: terminal, unleased, and its executor fenced out."""
    return dataclasses.replace(
        run,
        status="cancelled",
        lease_owner=None,
        lease_expires_at_ms=0,
        fence=run.fence + 1,
        wake_at_ms=None,
        updated_at_ms=now_ms,
    )


def woken(run: RunRecord, now_ms: int) -> RunRecord:
    """A waiting run that received input: runnable by any worker at once."""
    return dataclasses.replace(
        run, status="queued", wake_at_ms=None, updated_at_ms=now_ms
    )


def reopened(run: RunRecord, now_ms: int) -> RunRecord:
    """A failed run made runnable again (its recorded failure is kept until it ends)."""
    return dataclasses.replace(run, status="queued", updated_at_ms=now_ms)


def matches(run: RunRecord, query: RunQuery) -> bool:
    """Whether a run passes every filter of `query`."""
    return (
        (not query.status or run.status in query.status)
        and (query.workflow is None or run.workflow == query.workflow)
        and (query.parent_id is None or run.parent_id == query.parent_id)
        and (query.forked_from is None or run.forked_from == query.forked_from)
        and (query.queue is None or run.queue == query.queue)
        and (
            query.updated_before_ms is None
            or run.updated_at_ms < query.updated_before_ms
        )
        and (query.version is None or run.version == query.version)
        and (query.run_id_prefix is None or run.run_id.startswith(query.run_id_prefix))
        and (
            query.created_since_ms is None
            or run.created_at_ms >= query.created_since_ms
        )
        and (
            query.created_before_ms is None
            or run.created_at_ms < query.created_before_ms
        )
    )


def listed_after(run: RunRecord, after: tuple[int, str] | None) -> bool:
    """Whether `run` comes after the key `after` in newest-first order (keyset paging)."""
    return after is None or (run.created_at_ms, run.run_id) < after


def count_by_status_and_queue(
    runs: Iterable[RunRecord],
) -> dict[tuple[str, str | None], int]:
    """`Store.count_runs` over runs already filtered."""
    return dict(Counter((run.status, run.queue) for run in runs))


def version_claimable(run: RunRecord, versions: Collection[str] | None) -> bool:
    """Whether a worker limited to `versions` (None: any) may claim the run."""
    return versions is None or (run.version is not None and run.version in versions)
