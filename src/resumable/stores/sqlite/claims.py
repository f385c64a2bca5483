"""SQLite: leasing and claiming runs inside the caller's write transaction.

`resumable.stores.claims` decides (the candidate window, queue admission); these functions only read the
candidates and each queue's load, and apply the fenced lease writes.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Mapping
from typing import Final

from resumable.errors import RunNotFound
from resumable.stores import _rules, _sql, claims
from resumable.stores.protocol import Lease, QueuePolicy

_t = _sql.to_text
Conn = sqlite3.Connection

TERMINAL_SQL: Final = "('succeeded', 'failed', 'cancelled')"
_ACQUIRE: Final = f"""
UPDATE resumable_runs
   SET status = 'running', lease_owner = ?, lease_expires_at_ms = ?,
       fence = fence + 1, updated_at_ms = ?
 WHERE run_id = ? AND status NOT IN {TERMINAL_SQL}
   AND (status != 'running' OR lease_owner IS NULL OR lease_expires_at_ms <= ?
        OR lease_owner = ? OR lease_owner = ?)
"""  # noqa: S608 - built from constants
# candidate selection: the same rule as claims.is_claimable
_RUNNABLE: Final = """
SELECT run_id, status, queue FROM resumable_runs
 WHERE workflow IN (SELECT value FROM json_each(?))
   AND (? IS NULL OR version IN (SELECT value FROM json_each(?)))
   AND (status = 'queued'
        OR (status = 'running' AND lease_expires_at_ms <= ?)
        OR (status IN ('sleeping', 'waiting') AND wake_at_ms <= ?))
 ORDER BY created_at_ms, run_id
 LIMIT ?
"""
_QUEUE_ACTIVE: Final = """
SELECT count(*) FROM resumable_runs
 WHERE queue = ? AND status = 'running' AND lease_expires_at_ms > ?
"""
_QUEUE_STARTS: Final = (
    "SELECT count(*) FROM resumable_queue_starts WHERE queue = ? AND started_at_ms > ?"
)
_FORGET_STARTS: Final = (
    "DELETE FROM resumable_queue_starts WHERE queue = ? AND started_at_ms <= ?"
)
_RECORD_START: Final = (
    "INSERT INTO resumable_queue_starts (queue, started_at_ms) VALUES (?, ?)"
)


def acquire_txn(
    conn: Conn,
    *,
    run_id: str,
    owner: str,
    now_ms: int,
    ttl_ms: int,
    take_over: str | None,
) -> Lease | None:
    """Lease `run_id` to `owner` if the lease rules allow it (None if not)."""
    expires, key, who = now_ms + ttl_ms, _t(run_id), _t(owner)
    # read before the update, inside its write transaction: whom the lease is taken from
    before = conn.execute(
        "SELECT status, lease_owner FROM resumable_runs WHERE run_id = ?", (key,)
    ).fetchone()
    if before is None:
        raise RunNotFound(run_id=run_id)
    changed = conn.execute(
        _ACQUIRE, (who, expires, now_ms, key, now_ms, who, _sql.maybe_text(take_over))
    ).rowcount
    if not changed:
        return None
    row = conn.execute(
        "SELECT fence FROM resumable_runs WHERE run_id = ?", (key,)
    ).fetchone()
    taken_from = _rules.lease_taken_from(
        before["status"], _sql.maybe_from_text(before["lease_owner"]), owner
    )
    return Lease(
        run_id=run_id,
        owner=owner,
        fence=row["fence"],
        expires_at_ms=expires,
        taken_from=taken_from,
    )


def claim_txn(
    conn: Conn,
    *,
    owner: str,
    now_ms: int,
    ttl_ms: int,
    limit: int,
    workflows: Collection[str],
    queues: Mapping[str, QueuePolicy],
    versions: Collection[str] | None,
) -> list[Lease]:
    """`Store.claim_runs` inside the caller's write transaction."""
    names = json.dumps(sorted(_t(name) for name in workflows))
    # NULL: any version (json_each of NULL is empty, so NULL also admits none)
    allowed = None if versions is None else json.dumps(sorted(map(_t, versions)))
    window = claims.candidate_window(limit)
    rows = conn.execute(
        _RUNNABLE, (names, allowed, allowed, now_ms, now_ms, window)
    ).fetchall()
    admission = claims.Admission(queues)
    claimed: list[Lease] = []
    for row in rows:
        if len(claimed) >= limit:
            break
        queue = _sql.maybe_from_text(row["queue"])
        for name in admission.needs_load([queue]):
            admission.set_load(name, _queue_load_txn(conn, name, queues[name], now_ms))
        if not admission.admit(queue, is_start=row["status"] == "queued"):
            continue
        # the row was read in this write transaction, so the lease cannot be refused
        lease = acquire_txn(
            conn,
            run_id=_sql.from_text(row["run_id"]),
            owner=owner,
            now_ms=now_ms,
            ttl_ms=ttl_ms,
            take_over=None,
        )
        if lease is not None:
            claimed.append(lease)
    for queue in admission.starts:
        conn.execute(_RECORD_START, (_t(queue), now_ms))
    return claimed


def _queue_load_txn(
    conn: Conn, queue: str, policy: QueuePolicy, now_ms: int
) -> claims.QueueLoad:
    """The queue's live leases and its starts in the rate window (forgetting older ones)."""
    key = _t(queue)
    (active,) = conn.execute(_QUEUE_ACTIVE, (key, now_ms)).fetchone()
    since = claims.rate_window_start_ms(policy, now_ms)
    if since is None:
        return claims.QueueLoad(active, 0)
    conn.execute(_FORGET_STARTS, (key, since))
    (started,) = conn.execute(_QUEUE_STARTS, (key, since)).fetchone()
    return claims.QueueLoad(active, started)
