"""PostgreSQL: claiming runs inside one transaction.

`claims` decides queue admission; these functions select candidates (`FOR UPDATE SKIP
LOCKED`, in rounds), lock and read each queue's load, and write the fenced leases.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Final

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from resumable.errors import RunNotFound
from resumable.stores import _rules, _sql, claims
from resumable.stores._postgres_sql import Statements
from resumable.stores.protocol import Lease, QueuePolicy

Conn = AsyncConnection[DictRow]
_t = _sql.to_text
CLAIM_ROUNDS: Final = 4  # rounds of candidates after a queue policy refused some


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


@dataclass(slots=True)
class _Claim:
    """What one claim transaction has found so far."""

    admission: claims.Admission
    chosen: list[str] = field(default_factory=list)
    before: dict[str, DictRow] = field(default_factory=dict)
    """The chosen rows as they were, locked."""
    seen: list[str] = field(default_factory=list)


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
    claim = _Claim(claims.Admission({_t(n): p for n, p in queues.items()}))
    names = [_t(name) for name in workflows]
    allowed = None if versions is None else [_t(v) for v in versions]
    for round_no in range(CLAIM_ROUNDS):
        want = limit - len(claim.chosen)
        found = await _choose_txn(
            conn,
            statements,
            claim,
            names=names,
            allowed=allowed,
            now_ms=now_ms,
            want=want,
            wait=round_no == 0,
        )
        if found < want or len(claim.chosen) >= limit:
            break  # nothing more to find, or nothing more wanted
    if not claim.chosen:
        return []
    expires_at_ms = now_ms + ttl_ms
    cur = await conn.execute(
        statements.claim,
        {
            "owner": _t(owner),
            "now_ms": now_ms,
            "expires_at_ms": expires_at_ms,
            "run_ids": claim.chosen,
            "starts": claim.admission.starts,
        },
    )
    fences = {row["run_id"]: row["fence"] for row in await cur.fetchall()}
    return [
        Lease(
            run_id=_sql.from_text(key),
            owner=owner,
            fence=fences[key],
            expires_at_ms=expires_at_ms,
            taken_from=_rules.lease_taken_from(
                claim.before[key]["status"],
                _sql.maybe_from_text(claim.before[key]["lease_owner"]),
                owner,
            ),
        )
        for key in claim.chosen
    ]


async def _choose_txn(
    conn: Conn,
    statements: Statements,
    claim: _Claim,
    *,
    names: list[str],
    allowed: list[str] | None,
    now_ms: int,
    want: int,
    wait: bool,
) -> int:
    """Read up to `want` more candidates and choose those admitted; how many were read."""
    admission = claim.admission
    cur = await conn.execute(
        statements.runnable,
        {
            "workflows": names,
            "versions": allowed,
            "now_ms": now_ms,
            "seen": claim.seen,
            "closed": sorted(admission.closed),
            "unstartable": sorted(admission.unstartable),
            "want": want,
        },
    )
    rows = await cur.fetchall()
    await _load_queues_txn(conn, statements, admission, rows, now_ms, wait=wait)
    for row in rows:
        claim.seen.append(row["run_id"])
        if admission.admit(row["queue"], is_start=row["status"] == "queued"):
            claim.chosen.append(row["run_id"])
            claim.before[row["run_id"]] = row
    return len(rows)


async def _load_queues_txn(
    conn: Conn,
    statements: Statements,
    admission: claims.Admission,
    rows: list[DictRow],
    now_ms: int,
    *,
    wait: bool,
) -> None:
    """Lock the queues first met in `rows` and count their leases and starts."""
    names = admission.needs_load(row["queue"] for row in rows)
    if not names:
        return
    params = {"schema": statements.schema, "queues": names}
    if wait:
        await conn.execute(statements.lock_queues, params)
    else:
        cur = await conn.execute(statements.try_lock_queues, params)
        locked = {row["queue"] for row in await cur.fetchall()}
        for name in names:
            if name not in locked:
                admission.close(name)
        names = [n for n in names if n in locked]
        if not names:
            return
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
