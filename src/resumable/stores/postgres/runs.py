"""PostgreSQL: runs and their journal, the statements and the group commit of steps.

The statements of runs (create, read, list, count, leases, status, cancel, reopen,
delete), of the journal (load, commit a step or many) and of inputs, each composed
once per store with its schema's name (`RunStatements`); values are always
parameters. Creating a queued run, sending input to a waiting one, reopening and
cancelling announce work (NOTIFY, see `connection.WorkListener`).

Concurrent `commit_step` calls share transactions (group commit, `StepCommits`). A
commit that finds no write in flight is written at once by its caller, with no timer
and no hand-off; the commits that queue meanwhile are written together by a flusher
task, as one statement, and each caller is resolved only once that statement's
COMMIT returned. The fence check and the write happen in one transaction that takes
a FOR SHARE lock on the run row, so a concurrent lease takeover either waits for the
write to commit or makes the write see the new fence and refuse it (LeaseLost). The
lone commit calls a PL/pgSQL function (`resumable_commit_step`, created by the
migration) because PL/pgSQL keeps its plans per connection, where a plain statement
would be parsed and planned on every step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from psycopg.rows import DictRow

from resumable.errors import CheckpointWriteError, LeaseLost, RunNotFound, StoreError
from resumable.stores import _rules, _sql
from resumable.stores.postgres.connection import (
    DRIVER_ERRORS,
    REFUSED,
    Abandoned,
    Pool,
    composer,
    write_error,
)
from resumable.stores.protocol import Lease, RunQuery, StepRecord

_t = _sql.to_text
BATCH_MAX: Final = 1000

_SELECT_RUN: Final = "SELECT * FROM {schema}.resumable_runs WHERE run_id = %s"
_CREATE_RUN: Final = """
WITH inserted AS (
    INSERT INTO {schema}.resumable_runs (run_id, workflow, status, input, output,
        created_at_ms, updated_at_ms, parent_id, forked_from, fork_seq, queue,
        lease_owner, lease_expires_at_ms, fence, wake_at_ms, expires_at_ms, version)
    VALUES (%(run_id)s, %(workflow)s, %(status)s, %(input)s, %(output)s::bytea,
        %(created_at_ms)s, %(updated_at_ms)s, %(parent_id)s, %(forked_from)s,
        %(fork_seq)s::bigint, %(queue)s, %(lease_owner)s, %(lease_expires_at_ms)s,
        %(fence)s, %(wake_at_ms)s::bigint, %(expires_at_ms)s::bigint, %(version)s::text)
    ON CONFLICT (run_id) DO NOTHING
    RETURNING *
), announced AS (
    SELECT pg_notify('resumable_work', %(schema)s) FROM inserted WHERE status = 'queued'
)
SELECT inserted.*, (SELECT count(*) FROM announced) AS announced FROM inserted
"""
_RUN_FILTERS: Final = """
 WHERE (cardinality(%(status)s::text[]) = 0 OR status = ANY(%(status)s::text[]))
   AND (%(workflow)s::text IS NULL OR workflow = %(workflow)s::text)
   AND (%(parent_id)s::text IS NULL OR parent_id = %(parent_id)s::text)
   AND (%(forked_from)s::text IS NULL OR forked_from = %(forked_from)s::text)
   AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
   AND (%(updated_before_ms)s::bigint IS NULL OR updated_at_ms < %(updated_before_ms)s::bigint)
   AND (%(version)s::text IS NULL OR version = %(version)s::text)
   AND (%(run_id_prefix)s::text IS NULL OR starts_with(run_id, %(run_id_prefix)s::text))
   AND (%(created_since_ms)s::bigint IS NULL OR created_at_ms >= %(created_since_ms)s::bigint)
   AND (%(created_before_ms)s::bigint IS NULL OR created_at_ms < %(created_before_ms)s::bigint)
"""
_LIST_RUNS: Final = (
    "SELECT * FROM {schema}.resumable_runs"  # noqa: S608 - constants; values are parameters
    + _RUN_FILTERS
    + """   AND (%(after_ms)s::bigint IS NULL
        OR (created_at_ms, run_id) < (%(after_ms)s::bigint, %(after_id)s::text))
 ORDER BY created_at_ms DESC, run_id DESC
 LIMIT %(limit)s
"""
)
_COUNT_RUNS: Final = (
    "SELECT status, queue, count(*) AS n FROM {schema}.resumable_runs"  # noqa: S608 - constants; values are parameters
    + _RUN_FILTERS
    + " GROUP BY status, queue"
)
# one statement: `locked` locks the row (waiting for a concurrent lease change) and
# reads it as it stands, so the UPDATE re-checks that version and RETURNING can say
# whose lease it replaced
_ACQUIRE: Final = """
WITH locked AS (
    SELECT run_id, status, lease_owner FROM {schema}.resumable_runs
     WHERE run_id = %(run_id)s
       FOR UPDATE
), leased AS (
    UPDATE {schema}.resumable_runs AS r
       SET status = 'running', lease_owner = %(owner)s,
           lease_expires_at_ms = %(expires_at_ms)s, fence = r.fence + 1,
           updated_at_ms = %(now_ms)s
      FROM locked
     WHERE r.run_id = locked.run_id
       AND r.status NOT IN ('succeeded', 'failed', 'cancelled')
       AND (r.status <> 'running' OR r.lease_owner IS NULL
            OR r.lease_expires_at_ms <= %(now_ms)s
            OR r.lease_owner = %(owner)s OR r.lease_owner = %(take_over)s::text)
    RETURNING r.fence, locked.status AS before_status,
              locked.lease_owner AS before_owner
)
SELECT leased.fence, leased.before_status, leased.before_owner,
       EXISTS (SELECT 1 FROM locked) AS found
  FROM (SELECT 1) AS one LEFT JOIN leased ON true
"""
_RENEW: Final = """
UPDATE {schema}.resumable_runs SET lease_expires_at_ms = %s
 WHERE run_id = %s AND fence = %s AND status = 'running'
"""
_UPDATE_RUN: Final = """
UPDATE {schema}.resumable_runs
   SET status = %(status)s, output = COALESCE(%(output)s::bytea, output),
       wake_at_ms = %(wake_at_ms)s::bigint,
       expires_at_ms = COALESCE(%(expires_at_ms)s::bigint, expires_at_ms),
       updated_at_ms = %(now_ms)s,
       lease_owner = CASE WHEN %(status)s = 'running' THEN lease_owner END,
       lease_expires_at_ms = CASE WHEN %(status)s = 'running' THEN lease_expires_at_ms ELSE 0 END
 WHERE run_id = %(run_id)s AND fence = %(fence)s
"""
_CANCEL: Final = """
WITH cancelled AS (
    UPDATE {schema}.resumable_runs
       SET status = 'cancelled', lease_owner = NULL, lease_expires_at_ms = 0,
           fence = fence + 1, wake_at_ms = NULL, updated_at_ms = %(now_ms)s
     WHERE run_id = %(run_id)s AND status NOT IN ('succeeded', 'failed', 'cancelled')
    RETURNING *
), announced AS (
    SELECT pg_notify('resumable_work', %(schema)s) FROM cancelled
)
SELECT cancelled.*, (SELECT count(*) FROM announced) AS announced FROM cancelled
"""
_REOPEN: Final = """
WITH reopened AS (
    UPDATE {schema}.resumable_runs SET status = 'queued', updated_at_ms = %(now_ms)s
     WHERE run_id = %(run_id)s AND status = 'failed'
    RETURNING run_id
), announced AS (
    SELECT pg_notify('resumable_work', %(schema)s) FROM reopened
)
SELECT (SELECT count(*) FROM reopened) AS reopened,
       (SELECT count(*) FROM announced) AS announced,
       EXISTS (SELECT 1 FROM {schema}.resumable_runs WHERE run_id = %(run_id)s) AS found
"""
_DELETE_RUNS: Final = """
WITH runs AS (
    DELETE FROM {schema}.resumable_runs
     WHERE run_id = ANY(%s::text[]) AND status IN ('succeeded', 'failed', 'cancelled')
    RETURNING run_id,
              octet_length(input) + coalesce(octet_length(output), 0) AS size
), steps AS (
    DELETE FROM {schema}.resumable_steps WHERE run_id IN (SELECT run_id FROM runs)
    RETURNING coalesce(octet_length(output), 0) + coalesce(octet_length(usage), 0)
              AS size
), inputs AS (
    DELETE FROM {schema}.resumable_inputs WHERE run_id IN (SELECT run_id FROM runs)
    RETURNING octet_length(value) AS size
), stubs AS (
    DELETE FROM {schema}.resumable_archived_runs
     WHERE run_id IN (SELECT run_id FROM runs)
), feeds AS (
    DELETE FROM {schema}.resumable_feed WHERE run_id IN (SELECT run_id FROM runs)
), cache AS (
    DELETE FROM {schema}.resumable_step_cache
     WHERE run_id IN (SELECT run_id FROM runs)
)
SELECT ARRAY(SELECT run_id FROM runs ORDER BY run_id) AS run_ids,
       (SELECT count(*) FROM steps) AS steps, (SELECT count(*) FROM inputs) AS inputs,
       (SELECT coalesce(sum(size), 0) FROM runs)
       + (SELECT coalesce(sum(size), 0) FROM steps)
       + (SELECT coalesce(sum(size), 0) FROM inputs) AS size
"""
_LOAD_JOURNAL: Final = """
SELECT * FROM {schema}.resumable_steps WHERE run_id = %s AND seq <= %s ORDER BY seq
"""
# the fence check and the write, in one function (see the migration for why)
_COMMIT_STEP: Final = """
SELECT {schema}.resumable_commit_step(%s::text, %s::bigint, %s::text, %s::text,
    %s::text, %s::bytea, %s::integer, %s::bigint, %s::bigint, %s::bytea, %s::bigint)
    AS written
"""
# the group commit: the same check for many records in one statement, locking the
# run rows in one order. FOR SHARE: a lease change (fence + 1) waits until this write
# commits, or, if it committed first, this statement re-reads the row, sees the new
# fence and leaves that record out
_COMMIT_STEPS: Final = """
INSERT INTO {schema}.resumable_steps AS s (run_id, seq, name, fingerprint, status,
    output, attempts, started_at_ms, finished_at_ms, usage)
SELECT b.run_id, b.seq, b.name, b.fingerprint, b.status, b.output, b.attempts,
       b.started_at_ms, b.finished_at_ms, b.usage
  FROM unnest(%s::text[], %s::bigint[], %s::text[], %s::text[], %s::text[],
              %s::bytea[], %s::integer[], %s::bigint[], %s::bigint[], %s::bytea[],
              %s::bigint[])
       AS b(run_id, seq, name, fingerprint, status, output, attempts, started_at_ms,
            finished_at_ms, usage, fence)
  JOIN {schema}.resumable_runs r ON r.run_id = b.run_id AND r.fence = b.fence
 ORDER BY b.run_id, b.seq
   FOR SHARE OF r
ON CONFLICT (run_id, seq) DO UPDATE
   SET name = EXCLUDED.name, fingerprint = EXCLUDED.fingerprint,
       status = EXCLUDED.status, output = EXCLUDED.output, attempts = EXCLUDED.attempts,
       started_at_ms = EXCLUDED.started_at_ms, finished_at_ms = EXCLUDED.finished_at_ms,
       usage = EXCLUDED.usage
RETURNING s.run_id, s.seq
"""
_SEND_INPUT: Final = """
WITH run AS (
    SELECT run_id FROM {schema}.resumable_runs WHERE run_id = %(run_id)s
), sent AS (
    INSERT INTO {schema}.resumable_inputs (run_id, key, value, sent_at_ms)
    SELECT run_id, %(key)s::text, %(value)s::bytea, %(sent_at_ms)s::bigint FROM run
    ON CONFLICT (run_id, key) DO NOTHING
    RETURNING run_id
), woken AS (
    UPDATE {schema}.resumable_runs
       SET status = 'queued', wake_at_ms = NULL, updated_at_ms = %(sent_at_ms)s
     WHERE run_id IN (SELECT run_id FROM sent) AND status = 'waiting'
    RETURNING run_id
), announced AS (
    SELECT pg_notify('resumable_work', %(schema)s) FROM woken
)
SELECT EXISTS (SELECT 1 FROM run) AS found, EXISTS (SELECT 1 FROM sent) AS sent,
       (SELECT count(*) FROM announced) AS announced
"""
_GET_INPUTS: Final = (
    "SELECT key, value FROM {schema}.resumable_inputs WHERE run_id = %s"
)
_LIST_INPUTS: Final = (
    "SELECT key, value, sent_at_ms FROM {schema}.resumable_inputs WHERE run_id = %s "
    "ORDER BY sent_at_ms, key"
)


class RunStatements:
    """The run, journal and input statements of one store, composed with its schema."""

    def __init__(self, schema: str) -> None:
        compose = composer(schema)
        self.select_run = compose(_SELECT_RUN)
        self.create_run = compose(_CREATE_RUN)
        self.list_runs = compose(_LIST_RUNS)
        self.count_runs = compose(_COUNT_RUNS)
        self.acquire = compose(_ACQUIRE)
        self.renew = compose(_RENEW)
        self.update_run = compose(_UPDATE_RUN)
        self.cancel = compose(_CANCEL)
        self.reopen = compose(_REOPEN)
        self.delete_runs = compose(_DELETE_RUNS)
        self.load_journal = compose(_LOAD_JOURNAL)
        self.commit_step = compose(_COMMIT_STEP)
        self.commit_steps = compose(_COMMIT_STEPS)
        self.send_input = compose(_SEND_INPUT)
        self.get_inputs = compose(_GET_INPUTS)
        self.list_inputs = compose(_LIST_INPUTS)


def run_filters(query: RunQuery) -> dict[str, object]:
    """The parameters of `_RUN_FILTERS` for a run query."""
    return {
        "status": list(query.status),
        "workflow": _sql.maybe_text(query.workflow),
        "parent_id": _sql.maybe_text(query.parent_id),
        "forked_from": _sql.maybe_text(query.forked_from),
        "queue": _sql.maybe_text(query.queue),
        "updated_before_ms": query.updated_before_ms,
        "version": _sql.maybe_text(query.version),
        "run_id_prefix": _sql.maybe_text(query.run_id_prefix),
        "created_since_ms": query.created_since_ms,
        "created_before_ms": query.created_before_ms,
    }


def acquire_params(
    run_id: str, owner: str, now_ms: int, ttl_ms: int, take_over: str | None
) -> dict[str, object]:
    """The parameters of `RunStatements.acquire`."""
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
    """The lease `RunStatements.acquire` granted (None: refused); RunNotFound if no run."""
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
class _Pending:
    """A commit_step waiting for the flusher."""

    step: StepRecord
    fence: int
    future: asyncio.Future[None]

    @property
    def key(self) -> tuple[str, int]:
        return self.step.run_id, self.step.seq


class StepCommits:
    """The store's `commit_step`: one statement for every commit queued meanwhile."""

    def __init__(
        self,
        *,
        url: str,
        statements: RunStatements,
        pool: Callable[[], Pool | None],
        on_failure: Callable[[BaseException], None],
        abandoned: Abandoned,
    ) -> None:
        self.url, self._sql = url, statements
        self._pool, self._on_failure = pool, on_failure
        self._abandoned = abandoned
        self._pending: list[_Pending] = []
        self._flusher: asyncio.Task[None] | None = None
        self._writing = False  # a commit_step write is in flight (inline or flusher)
        self.transactions = 0  # how many transactions commit_step used
        self._listeners: list[Callable[[int], None]] = []

    async def wait_idle(self) -> None:
        """Return once the queued commits are written."""
        if self._flusher is not None:
            await asyncio.wait([self._flusher])

    async def commit(self, step: StepRecord, fence: int) -> None:
        """Write `step` if `fence` holds its run's lease (LeaseLost if not)."""
        loop = asyncio.get_running_loop()
        pending = _Pending(step, fence, loop.create_future())
        if self._writing:  # a write is in flight: join the group written next
            self._pending.append(pending)
            await pending.future
            return
        # nothing in flight: write it now in the caller's own task, with no timer and
        # no hand-off, so a lone sequential commit costs one statement and nothing else
        self._writing = True
        try:
            await self._abandoned.run(self._write_batch([pending]))
        except asyncio.CancelledError:
            pending.future.cancel()  # its write goes on; no one awaits its outcome
            raise
        finally:
            self._writing = False
            if self._pending:  # what queued meanwhile goes out together
                self._writing = True
                self._flusher = loop.create_task(self._flush())
        await pending.future  # settled by now: returns, or raises its outcome

    def add_listener(self, listener: Callable[[int], None]) -> None:
        """Call `listener(size)` after each group of step commits is written."""
        self._listeners.append(listener)

    async def _flush(self) -> None:
        """Write the queued commits group by group until none are left."""
        batch: list[_Pending] = []
        try:
            while self._pending:
                batch = self._take_batch()
                if batch:
                    await self._write_batch(batch)
        finally:
            self._writing = False
            self._flusher = None
            for pending in (*batch, *self._pending):  # only if we were cancelled
                _settle(
                    pending,
                    CheckpointWriteError(
                        run_id=pending.step.run_id,
                        seq=pending.step.seq,
                        detail="the store was shut down during the write",
                    ),
                )
            self._pending.clear()

    def _take_batch(self) -> list[_Pending]:
        """The queued commits, oldest first, up to the first repeated (run_id, seq).

        A statement may write a row only once, and a later record for the same seq
        must replace an earlier one: it waits for the next write.
        """
        batch: list[_Pending] = []
        keys: set[tuple[str, int]] = set()
        taken = 0
        for pending in self._pending:
            if len(batch) >= BATCH_MAX or pending.key in keys:
                break
            taken += 1
            if pending.future.done():  # its caller was cancelled before the write
                continue
            keys.add(pending.key)
            batch.append(pending)
        del self._pending[:taken]
        return batch

    async def _write_batch(self, batch: list[_Pending]) -> None:
        """Write `batch` in one transaction, then settle every caller; never raises."""
        try:
            written = await self._insert_steps(batch)
        except DRIVER_ERRORS as exc:
            self._on_failure(exc)
            if len(batch) > 1 and isinstance(exc, REFUSED):
                # a record the driver or server refused (bad data): spare the others
                for pending in batch:
                    await self._write_batch([pending])
                return
            for pending in batch:
                _settle(pending, _batch_error(pending, exc))
            return
        except Exception as exc:  # noqa: BLE001 - e.g. closed meanwhile: callers must hear
            for pending in batch:
                _settle(pending, _batch_error(pending, exc))
            return
        # in autocommit the statement's own transaction has committed when execute()
        # returns (the server answers only after COMMIT), so callers may go on now
        for listener in self._listeners:
            listener(len(batch))
        for pending in batch:
            if pending.key in written:
                _settle(pending, None)
            else:
                _settle(
                    pending,
                    LeaseLost(
                        run_id=pending.step.run_id,
                        seq=pending.step.seq,
                        fence=pending.fence,
                    ),
                )

    async def _insert_steps(self, batch: list[_Pending]) -> set[tuple[str, int]]:
        """Insert or replace the batch's records whose fence holds; their keys."""
        pool = self._pool()
        if pool is None:
            raise StoreError(store=self.url, detail="the store is closed")
        async with pool.connection() as conn:
            self.transactions += 1
            if len(batch) == 1:
                params = (*_sql.step_values(batch[0].step), batch[0].fence)
                cur = await conn.execute(self._sql.commit_step, params)
                row = await cur.fetchone()
                return {batch[0].key} if row is not None and row["written"] else set()
            cur = await conn.execute(self._sql.commit_steps, _columns(batch))
            rows = await cur.fetchall()
            return {(_sql.from_text(row["run_id"]), row["seq"]) for row in rows}


def _columns(batch: list[_Pending]) -> tuple[list[object], ...]:
    """The batch as one array per column (STEP_COLUMNS order, then the fence)."""
    rows = [(*_sql.step_values(p.step), p.fence) for p in batch]
    return tuple(list(column) for column in zip(*rows, strict=True))


def _batch_error(pending: _Pending, exc: BaseException) -> CheckpointWriteError:
    error = write_error(pending.step.run_id, pending.step.seq, exc)
    error.__cause__ = exc  # raised in the caller's task, chained as `from exc` would
    return error


def _settle(pending: _Pending, error: BaseException | None) -> None:
    if pending.future.done():  # the caller was cancelled; the write stands regardless
        return
    if error is None:
        pending.future.set_result(None)
    else:
        pending.future.set_exception(error)
