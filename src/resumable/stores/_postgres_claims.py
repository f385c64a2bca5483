"""PostgreSQL: claiming runs inside one transaction.

`claims` decides (the candidate window, queue admission); these functions read the
candidates, lock and read each queue's load, and write the fenced leases, locking only
the runs they take (`FOR UPDATE SKIP LOCKED`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from resumable.errors import RunNotFound
from resumable.stores import _rules, _sql, claims
from resumable.stores._postgres_sql import Statements
from resumable.stores.protocol import Lease, QueuePolicy

Conn = AsyncConnection[DictRow]
_t = _sql.to_text


def acquire_params(
    run_id: str, owner: str, now_ms: int, ttl_ms: int, take_over: str | None
) -> dict[str, object]:
    """The parameters of `Statements.acquire`."""
    return {
        "run_id": _t(run_id),
        "owner": _t(owner),
        "now_ms": now_ms,
        "expires_at_ms": now_ms + ttl_ms,
        "take_over": _sql.maybe_text(take_over),
    }


def lease_from_acquired(
    row: DictRow, *, run_id: str, owner: str, expires_at_ms: int
) -> Lease | None:
    """The lease `Statements.acquire` granted (None: refused); RunNotFound if no run."""
    if not row["found"]:
        raise RunNotFound(run_id=run_id)
    if row["fence"] is None:
        return None
    return Lease(
        run_id=run_id,
        owner=owner,
        fence=row["fence"],
        expires_at_ms=expires_at_ms,
        taken_from=_rules.lease_taken_from(
            row["before_status"], _sql.maybe_from_text(row["before_owner"]), owner
        ),
    )


async def claim_runs_txn(
    conn: Conn,
    statements: Statements,
    *,
    owner: str,
    now_ms: int,
    ttl_ms: int,
    limit: int,
    workflows: Collection[str],
    queues: Mapping[str, QueuePolicy],
    versions: Collection[str] | None,
) -> list[Lease]:
    """`Store.claim_runs` inside the caller's transaction."""
    admission = claims.Admission({_t(n): p for n, p in queues.items()})
    params = {
        "workflows": [_t(name) for name in workflows],
        "versions": None if versions is None else [_t(v) for v in versions],
        "now_ms": now_ms,
        "window": claims.candidate_window(limit),
    }
    rows = await (await conn.execute(statements.runnable, params)).fetchall()
    queues_met = admission.needs_load(row["queue"] for row in rows)
    if queues_met:
        # a claimer that held these queues may have leased some candidates meanwhile:
        # the claim statement skips them (they are no longer as read)
        await _load_queues_txn(conn, statements, admission, queues_met, now_ms)
    # every admitted candidate, not only `limit`: concurrent claimers read the same
    # window, and each takes the first admitted runs the others have not locked
    admitted = [
        row
        for row in rows
        if admission.admit(row["queue"], is_start=row["status"] == "queued")
    ]
    if not admitted:
        return []
    expires_at_ms = now_ms + ttl_ms
    cur = await conn.execute(
        statements.claim,
        {
            "owner": _t(owner),
            "now_ms": now_ms,
            "expires_at_ms": expires_at_ms,
            "run_ids": [row["run_id"] for row in admitted],
            "queued": [row["run_id"] for row in admitted if row["status"] == "queued"],
            "limit": limit,
            "rated": sorted(
                n for n, p in admission.policies.items() if p.rate is not None
            ),
        },
    )
    return _leases(await cur.fetchall(), owner=owner, expires_at_ms=expires_at_ms)


def _leases(rows: list[DictRow], *, owner: str, expires_at_ms: int) -> list[Lease]:
    """The leases the claim statement wrote, in claim order."""
    return [
        Lease(
            run_id=_sql.from_text(row["run_id"]),
            owner=owner,
            fence=row["fence"],
            expires_at_ms=expires_at_ms,
            taken_from=_rules.lease_taken_from(
                row["before_status"], _sql.maybe_from_text(row["before_owner"]), owner
            ),
        )
        for row in sorted(rows, key=lambda row: (row["created_at_ms"], row["run_id"]))
    ]


async def _load_queues_txn(
    conn: Conn,
    statements: Statements,
    admission: claims.Admission,
    names: list[str],
    now_ms: int,
) -> None:
    """Lock the queues `names` (waiting, in one global order) and read their load."""
    await conn.execute(
        statements.lock_queues, {"schema": statements.schema, "queues": names}
    )
    policies = admission.policies
    cur = await conn.execute(
        statements.queue_load,
        {
            "queues": names,
            "since_ms": [
                claims.rate_window_start_ms(policies[n], now_ms) for n in names
            ],
            "now_ms": now_ms,
        },
    )
    for row in await cur.fetchall():
        admission.set_load(
            row["queue"], claims.QueueLoad(row["active"], row["started"])
        )
