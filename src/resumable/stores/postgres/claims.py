"""PostgreSQL: the worker queue, claiming runs inside one transaction, and its SQL.

`resumable.stores.claims` decides (the candidate window, queue admission); these
functions read the candidates, lock and read each queue's load, and write the
fenced leases, with the statements of `ClaimStatements`.
Runs are locked with `FOR UPDATE SKIP LOCKED` only: the oldest `limit` first, and
past a queue's refusals, only those taken of the rest of the window.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Final

from psycopg.rows import DictRow

from resumable.stores import _rules, _sql, claims
from resumable.stores.postgres.connection import Conn, composer
from resumable.stores.protocol import Lease, QueuePolicy

_t = _sql.to_text


# candidates: the same rule as claims.is_claimable. A claim first locks the oldest
# `limit` (SKIP LOCKED: a run another claim holds is not a candidate), which is all
# it takes unless a queue refuses some; then it reads on, unlocked, to the end of its
# window (claims.candidate_window) and locks only the runs it takes (_CLAIM_ADMITTED).
_CANDIDATES: Final = """
SELECT run_id, status, queue, lease_owner FROM {schema}.resumable_runs
 WHERE workflow = ANY(%(workflows)s::text[])
   AND (%(versions)s::text[] IS NULL OR version = ANY(%(versions)s::text[]))
   AND status IN ('queued', 'running', 'sleeping', 'waiting')
   AND (status = 'queued'
        OR (status = 'running' AND lease_expires_at_ms <= %(now_ms)s)
        OR (status IN ('sleeping', 'waiting') AND wake_at_ms <= %(now_ms)s))
"""
_FIRST_CANDIDATES: Final = (
    _CANDIDATES
    + """ ORDER BY created_at_ms, run_id
 LIMIT %(limit)s
 FOR UPDATE SKIP LOCKED
"""
)
_MORE_CANDIDATES: Final = (
    _CANDIDATES
    + """   AND run_id <> ALL(%(seen)s::text[])
 ORDER BY created_at_ms, run_id
 LIMIT %(more)s
"""
)
# admission to each queue is serialized across workers. A claim waits for the locks of
# the queues its first candidates name, in one global order (sorted keys), so two
# claimers cannot deadlock; queues met later are only tried, and a busy one counts as
# full. Runs are only ever locked with SKIP LOCKED: a claim never waits for a run.
_LOCK_QUEUES: Final = """
SELECT count(pg_advisory_xact_lock(hashtext(%(schema)s), key)) AS locked
  FROM (SELECT DISTINCT hashtext(q) AS key FROM unnest(%(queues)s::text[]) AS q
         ORDER BY key) AS keys
"""
_TRY_LOCK_QUEUES: Final = """
SELECT q AS queue
  FROM (SELECT q, hashtext(q) AS key FROM unnest(%(queues)s::text[]) AS q
         ORDER BY key) AS keys
 WHERE pg_try_advisory_xact_lock(hashtext(%(schema)s), key)
"""
_QUEUE_LOAD: Final = """
WITH policy AS (
    SELECT * FROM unnest(%(queues)s::text[], %(since_ms)s::bigint[]) AS p(queue, since_ms)
), expired AS (
    DELETE FROM {schema}.resumable_queue_starts s USING policy p
     WHERE s.queue = p.queue AND s.started_at_ms <= p.since_ms
)
SELECT p.queue,
       (SELECT count(*) FROM {schema}.resumable_runs r
         WHERE r.queue = p.queue AND r.status = 'running'
           AND r.lease_expires_at_ms > %(now_ms)s) AS active,
       (SELECT count(*) FROM {schema}.resumable_queue_starts s
         WHERE s.queue = p.queue AND s.started_at_ms > p.since_ms) AS started
  FROM policy p
"""
# leases runs this claim locked already
_CLAIM_LOCKED: Final = """
WITH starts AS (
    INSERT INTO {schema}.resumable_queue_starts (queue, started_at_ms)
    SELECT q, %(now_ms)s FROM unnest(%(starts)s::text[]) AS q
)
UPDATE {schema}.resumable_runs
   SET status = 'running', lease_owner = %(owner)s,
       lease_expires_at_ms = %(expires_at_ms)s, fence = fence + 1,
       updated_at_ms = %(now_ms)s
 WHERE run_id = ANY(%(run_ids)s::text[])
RETURNING run_id, fence
"""
# leases the first `limit` of the admitted candidates (in claim order) that nobody else
# holds and that are still claimable, a start only if it was read as one: a subset of
# what admission counted, so the queues' limits hold for whatever is taken
_CLAIM_ADMITTED: Final = """
WITH chosen AS MATERIALIZED (
    SELECT run_id, status, lease_owner, queue FROM {schema}.resumable_runs
     WHERE run_id = ANY(%(run_ids)s::text[])
       AND (status = 'queued'
            OR (status = 'running' AND lease_expires_at_ms <= %(now_ms)s)
            OR (status IN ('sleeping', 'waiting') AND wake_at_ms <= %(now_ms)s))
       AND (status <> 'queued' OR run_id = ANY(%(queued)s::text[]))
     ORDER BY created_at_ms, run_id
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
), starts AS (
    INSERT INTO {schema}.resumable_queue_starts (queue, started_at_ms)
    SELECT queue, %(now_ms)s FROM chosen
     WHERE status = 'queued' AND queue = ANY(%(rated)s::text[])
)
UPDATE {schema}.resumable_runs r
   SET status = 'running', lease_owner = %(owner)s,
       lease_expires_at_ms = %(expires_at_ms)s, fence = r.fence + 1,
       updated_at_ms = %(now_ms)s
  FROM chosen c
 WHERE r.run_id = c.run_id
RETURNING r.run_id, r.fence, r.created_at_ms, c.status AS before_status,
          c.lease_owner AS before_owner
"""


class ClaimStatements:
    """The claim statements of one store, composed with its schema's name."""

    def __init__(self, schema: str) -> None:
        self.schema = schema
        compose = composer(schema)
        self.first_candidates = compose(_FIRST_CANDIDATES)
        self.more_candidates = compose(_MORE_CANDIDATES)
        self.lock_queues = compose(_LOCK_QUEUES)
        self.try_lock_queues = compose(_TRY_LOCK_QUEUES)
        self.queue_load = compose(_QUEUE_LOAD)
        self.claim_locked = compose(_CLAIM_LOCKED)
        self.claim_admitted = compose(_CLAIM_ADMITTED)


@dataclass(frozen=True, slots=True)
class _Claim:
    """One claim transaction: where it writes, and the leases it grants."""

    conn: Conn
    statements: ClaimStatements
    admission: claims.Admission
    owner: str
    now_ms: int
    expires_at_ms: int

    def lease_params(self) -> dict[str, object]:
        return {
            "owner": _t(self.owner),
            "now_ms": self.now_ms,
            "expires_at_ms": self.expires_at_ms,
        }


async def claim_runs_txn(
    conn: Conn,
    statements: ClaimStatements,
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
    claim = _Claim(conn, statements, admission, owner, now_ms, now_ms + ttl_ms)
    params: dict[str, object] = {
        "workflows": [_t(name) for name in workflows],
        "versions": None if versions is None else [_t(v) for v in versions],
        "now_ms": now_ms,
        "limit": limit,
    }
    cur = await conn.execute(statements.first_candidates, params)
    first = await cur.fetchall()  # locked: whatever this claim admits of them is its
    names = admission.needs_load(row["queue"] for row in first)
    if names:
        await conn.execute(
            statements.lock_queues, {"schema": statements.schema, "queues": names}
        )
        await _read_loads_txn(conn, statements, admission, names, now_ms)
    taken = [row for row in first if _admit(admission, row)]
    if len(taken) == len(first):  # none refused: nothing more to look for
        return await _lease_locked_txn(claim, taken)
    # a queue refused some: read on, unlocked, to the end of the window
    window = claims.candidate_window(limit)
    params |= {"seen": [row["run_id"] for row in first], "more": window - len(first)}
    more = await (await conn.execute(statements.more_candidates, params)).fetchall()
    await _try_loads_txn(conn, statements, admission, more, now_ms)
    admitted = taken + [row for row in more if _admit(admission, row)]
    return await _lease_admitted_txn(claim, admitted, limit)


async def _lease_locked_txn(claim: _Claim, rows: list[DictRow]) -> list[Lease]:
    """Lease `rows`, which this claim locked and admitted (with their starts)."""
    if not rows:
        return []
    cur = await claim.conn.execute(
        claim.statements.claim_locked,
        claim.lease_params()
        | {
            "run_ids": [row["run_id"] for row in rows],
            "starts": claim.admission.starts,
        },
    )
    fences = {row["run_id"]: row["fence"] for row in await cur.fetchall()}
    return [_lease(claim, row, fences[row["run_id"]]) for row in rows]


async def _lease_admitted_txn(
    claim: _Claim, admitted: list[DictRow], limit: int
) -> list[Lease]:
    """Lease the first `limit` of `admitted` nobody else holds, still as they were read."""
    if not admitted:
        return []
    rated = [n for n, p in claim.admission.policies.items() if p.rate is not None]
    cur = await claim.conn.execute(
        claim.statements.claim_admitted,
        claim.lease_params()
        | {
            "run_ids": [row["run_id"] for row in admitted],
            "queued": [row["run_id"] for row in admitted if row["status"] == "queued"],
            "limit": limit,
            "rated": sorted(rated),
        },
    )
    rows = sorted(await cur.fetchall(), key=lambda r: (r["created_at_ms"], r["run_id"]))
    return [
        _lease(
            claim, row, row["fence"], before=(row["before_status"], row["before_owner"])
        )
        for row in rows
    ]


def _admit(admission: claims.Admission, row: DictRow) -> bool:
    return admission.admit(row["queue"], is_start=row["status"] == "queued")


def _lease(
    claim: _Claim,
    row: DictRow,
    fence: int,
    *,
    before: tuple[str, str | None] | None = None,
) -> Lease:
    """The lease written for `row`; whom it was taken from, as the row was locked."""
    status, lease_owner = (
        (row["status"], row["lease_owner"]) if before is None else before
    )
    return Lease(
        run_id=_sql.from_text(row["run_id"]),
        owner=claim.owner,
        fence=fence,
        expires_at_ms=claim.expires_at_ms,
        taken_from=_rules.lease_taken_from(
            status, _sql.maybe_from_text(lease_owner), claim.owner
        ),
    )


async def _try_loads_txn(
    conn: Conn,
    statements: ClaimStatements,
    admission: claims.Admission,
    rows: list[DictRow],
    now_ms: int,
) -> None:
    """Try the locks of the queues first met in `rows`; a busy one admits nothing."""
    names = admission.needs_load(row["queue"] for row in rows)
    if not names:
        return
    cur = await conn.execute(
        statements.try_lock_queues, {"schema": statements.schema, "queues": names}
    )
    locked = {row["queue"] for row in await cur.fetchall()}
    for name in names:
        if name not in locked:
            admission.close(name)
    if locked:
        await _read_loads_txn(conn, statements, admission, sorted(locked), now_ms)


async def _read_loads_txn(
    conn: Conn,
    statements: ClaimStatements,
    admission: claims.Admission,
    names: list[str],
    now_ms: int,
) -> None:
    """Read the load of the queues `names`, whose locks the claim holds."""
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
