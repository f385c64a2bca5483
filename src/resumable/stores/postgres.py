"""PostgresStore: many workers on many machines sharing one PostgreSQL database.

URL: `postgresql://user:password@host:5432/dbname?schema=resumable&pool_max=10`. Our own
options are stripped before the rest reaches libpq (so `sslmode=`, `connect_timeout=`,
`application_name=`... work as usual):

- `schema` (default `resumable`): every table lives in it, created on first use.
- `mode` (default `rwc`): `rw` opens an existing store only, `ro` one read-only
  (`_postgres_session`), as SQLite's `mode=`.
- `pool_max` (default 10): the most connections the store's pool opens.
- `pool_timeout_s` (default 10): how long a call waits for a connection before it fails
  (the engine then retries it with backoff, for `store_retry_s`).

Every method is one short transaction on a connection borrowed from the pool, and no
connection is held while user code runs. Nothing depends on session state: statements
name the schema explicitly (no `SET search_path`), locks are transaction-scoped
(`pg_advisory_xact_lock`) and nothing is prepared server-side, so the store works
behind a transaction-mode pooler such as PgBouncer. `wait_for_work` is the exception
(see `_postgres_session`).

Concurrent `commit_step` calls share transactions (group commit, `_postgres_commits`).
The pool hands out the connection returned last, so a run's sequential steps reuse one
warm backend. After a server restart the pooled connections are dead: the first
failure purges every idle one (`pool.check()`) and the pool reconnects in the
background; reads are retried once on a fresh connection, writes fail with
CheckpointWriteError and the engine retries them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence

from psycopg import AsyncConnection
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool

from resumable.errors import (
    CheckpointWriteError,
    LeaseLost,
    RunNotFound,
    StoreError,
)
from resumable.stores import _postgres_archive as _archive
from resumable.stores import _postgres_claims as _claims
from resumable.stores import _postgres_snapshot_sql as _snapsql
from resumable.stores import _postgres_sql as _pgsql
from resumable.stores import _sql
from resumable.stores._postgres_commits import (
    DRIVER_ERRORS,
    Pool,
    StepCommits,
    abandoned_if_cancelled,
    is_lost_connection,
    write_error,
)
from resumable.stores._postgres_session import (
    CHANNEL,
    DEFAULT_SCHEMA,
    Options,
    WorkListener,
    check_schema,
    connect,
    migrate,
    parse_url,
)
from resumable.stores._postgres_thread_archive import (
    ThreadArchiveMethods,
    ThreadArchiveStatements,
)
from resumable.stores._records import checked_thread
from resumable.stores.loopend import LoopEnd
from resumable.stores.packing import check_swap
from resumable.stores.protocol import (
    NO_CHUNKS,
    DeleteResult,
    InputRecord,
    Lease,
    Payload,
    PayloadKind,
    QueuePolicy,
    RunQuery,
    RunRecord,
    RunUpdate,
    SnapshotRecord,
    StepRecord,
    ThreadRecord,
)
from resumable.stores.stubs import ArchiveStub
from resumable.stores.urls import redact

__all__ = ["CHANNEL", "DEFAULT_SCHEMA", "Options", "PostgresStore", "parse_url"]

Conn = AsyncConnection[DictRow]
# identifiers are stored escaped (%, NUL, lone surrogates), as in every SQL store
_t = _sql.to_text
Params = Sequence[object] | Mapping[str, object]


class PostgresStore(ThreadArchiveMethods):
    """The Store protocol on PostgreSQL, safe for many workers and processes."""

    def __init__(self, url: str) -> None:
        self.url = redact(url)
        self._options = parse_url(url)
        self.schema = self._options.schema
        self._sql = _pgsql.Statements(self.schema)
        self._claim_sql = _claims.ClaimStatements(self.schema)
        self._archive_sql = _archive.ArchiveStatements(self.schema)
        self._thread_sql = ThreadArchiveStatements(self.schema)
        self._pool: Pool | None = None
        self._opening = asyncio.Lock()
        self._purge: asyncio.Task[None] | None = None
        self._work = WorkListener(self._options.conninfo, self.schema)
        self._loop_end = LoopEnd()  # the pool is closed with the loop it runs on
        self._commits = StepCommits(
            url=self.url,
            statements=self._sql,
            pool=lambda: self._pool,
            on_failure=self._on_failure,
        )

    # --- lifecycle --------------------------------------------------------------
    async def open(self) -> PostgresStore:
        """Connect, create or migrate the schema, and start the pool (idempotent)."""
        if self._pool is not None and not self._loop_end.is_stale():
            return self
        async with self._opening:
            if self._loop_end.is_stale():  # its loop closed without shutting down
                self._pool, self._purge = None, None
                self._work = WorkListener(self._options.conninfo, self.schema)
            if self._pool is None:
                await self._loop_end.arm(self.close)
                if self._options.mode != "rwc":  # the schema must exist
                    await check_schema(self._options, self._sql, url=self.url)
                if self._options.mode != "ro":
                    await migrate(self._options, self._sql, url=self.url)
                pool: Pool = AsyncConnectionPool(
                    self._options.conninfo,
                    connection_class=AsyncConnection[DictRow],
                    kwargs={
                        "autocommit": True,  # one statement is one transaction
                        "prepare_threshold": None,  # transaction-mode poolers
                        "row_factory": dict_row,
                    },
                    min_size=1,
                    max_size=self._options.pool_max,
                    timeout=self._options.pool_timeout_s,
                    name=f"resumable:{self.schema}",
                    open=False,
                )
                await pool.open()
                self._pool = pool
        return self

    async def close(self) -> None:
        await self._loop_end.disarm()
        await self._commits.wait_idle()  # let queued commits finish
        if self._purge is not None:
            self._purge.cancel()
            with contextlib.suppress(BaseException):
                await self._purge
        pool, self._pool = self._pool, None
        await self._work.close()
        if pool is not None:
            await pool.close()
        self._opening = asyncio.Lock()  # a lock is bound to the loop that used it

    async def drop(self) -> None:
        """Delete the store's schema and everything in it (for tests)."""
        await self._commits.wait_idle()
        try:
            async with await connect(self._options) as conn:
                await conn.execute(self._sql.drop)
        except DRIVER_ERRORS as exc:
            raise StoreError(store=self.url, detail=f"cannot drop: {exc}") from exc

    # --- running statements ------------------------------------------------------
    @contextlib.asynccontextmanager
    async def _connection(
        self, *, run_id: str | None = None, seq: int | None = None
    ) -> AsyncIterator[Conn]:
        """A pooled connection for one transaction; driver errors come out as ours.

        Errors of a write for a run are CheckpointWriteError, all others StoreError.
        """
        pool = self._pool or (await self.open())._pool
        if pool is None:  # closed while opening
            raise StoreError(store=self.url, detail="the store is closed")
        try:
            async with pool.connection() as conn:
                yield conn
        except DRIVER_ERRORS as exc:
            self._on_failure(exc)
            if run_id is not None:
                raise write_error(run_id, seq, exc) from exc
            raise StoreError(store=self.url, detail=f"postgresql: {exc}") from exc

    def _on_failure(self, exc: BaseException) -> None:
        """After a lost connection, test every idle one so the pool replaces the dead."""
        if not is_lost_connection(exc) or self._pool is None:
            return
        if self._purge is None or self._purge.done():
            self._purge = asyncio.get_running_loop().create_task(self._pool.check())

    async def _write(
        self, query: bytes, params: Params, *, run_id: str, seq: int | None = None
    ) -> list[DictRow]:
        """Run one write statement (its own transaction); the rows it returned."""

        async def write() -> list[DictRow]:
            async with self._connection(run_id=run_id, seq=seq) as conn:
                cur = await conn.execute(query, params)
                return await cur.fetchall() if cur.description else []

        return await abandoned_if_cancelled(write())

    async def _write_count(
        self, query: bytes, params: Params, *, run_id: str | None = None
    ) -> int:
        """Run one write statement (its own transaction); how many rows it changed."""

        async def write() -> int:
            async with self._connection(run_id=run_id) as conn:
                cur = await conn.execute(query, params)
                return cur.rowcount

        return await abandoned_if_cancelled(write())

    async def _read(self, query: bytes, params: Params) -> list[DictRow]:
        """Run one statement that changes no run; the rows it returned.

        Retried once on a fresh connection if the first one turns out dead, as every
        idle one is after a server restart.
        """
        try:
            return await self._fetch(query, params)
        except StoreError as exc:
            if not is_lost_connection(exc.__cause__):
                raise
        if self._purge is not None:  # retry once the dead idle ones are gone
            await asyncio.wait([self._purge], timeout=self._options.pool_timeout_s)
        return await self._fetch(query, params)

    async def _fetch(self, query: bytes, params: Params) -> list[DictRow]:
        async def fetch() -> list[DictRow]:
            async with self._connection() as conn:
                cur = await conn.execute(query, params)
                return await cur.fetchall() if cur.description else []

        return await abandoned_if_cancelled(fetch())

    # --- runs -------------------------------------------------------------------
    async def create_run(self, run: RunRecord) -> RunRecord:
        params: dict[str, object] = dict(
            zip(_sql.RUN_COLUMNS, _sql.run_values(run), strict=True)
        )
        params["schema"] = self.schema
        rows = await self._write(self._sql.create_run, params, run_id=run.run_id)
        if rows:
            return _sql.run_from_row(rows[0])
        # it existed: read it in a fresh snapshot (the INSERT may have waited for
        # another transaction creating it, whose row its own snapshot cannot see)
        existing = await self.get_run(run.run_id)
        if existing is None:  # deleted in between; the caller may try again
            raise CheckpointWriteError(
                run_id=run.run_id, seq=None, detail="the run was deleted meanwhile"
            )
        return existing

    async def get_run(self, run_id: str) -> RunRecord | None:
        rows = await self._read(self._sql.select_run, (_t(run_id),))
        return _sql.run_from_row(rows[0]) if rows else None

    async def list_runs(self, query: RunQuery) -> list[RunRecord]:
        after_ms, after_id = query.after or (None, None)
        params = _pgsql.run_filters(query) | {
            "after_ms": after_ms,
            "after_id": _sql.maybe_text(after_id),
            "limit": query.limit,
        }
        return [
            _sql.run_from_row(row)
            for row in await self._read(self._sql.list_runs, params)
        ]

    async def count_runs(self, query: RunQuery) -> dict[tuple[str, str | None], int]:
        rows = await self._read(self._sql.count_runs, _pgsql.run_filters(query))
        return {
            (row["status"], _sql.maybe_from_text(row["queue"])): row["n"]
            for row in rows
        }

    async def acquire_lease(
        self,
        run_id: str,
        *,
        owner: str,
        now_ms: int,
        ttl_ms: int,
        take_over: str | None = None,
    ) -> Lease | None:
        params = _claims.acquire_params(run_id, owner, now_ms, ttl_ms, take_over)
        (row,) = await self._write(self._sql.acquire, params, run_id=run_id)
        return _claims.lease_from_acquired(
            row, run_id=run_id, owner=owner, expires_at_ms=now_ms + ttl_ms
        )

    async def renew_lease(
        self, run_id: str, *, fence: int, now_ms: int, ttl_ms: int
    ) -> None:
        params = (now_ms + ttl_ms, _t(run_id), fence)
        if not await self._write_count(self._sql.renew, params, run_id=run_id):
            raise LeaseLost(run_id=run_id, fence=fence)

    async def update_run(self, run_id: str, *, fence: int, update: RunUpdate) -> None:
        params = _sql.update_values(run_id, fence, update)
        if not await self._write_count(self._sql.update_run, params, run_id=run_id):
            raise LeaseLost(run_id=run_id, fence=fence)

    async def cancel_run(self, run_id: str, *, now_ms: int) -> RunRecord:
        params = {"run_id": _t(run_id), "now_ms": now_ms, "schema": self.schema}
        rows = await self._write(self._sql.cancel, params, run_id=run_id)
        if rows:
            return _sql.run_from_row(rows[0])
        run = await self.get_run(run_id)  # finished already, or missing
        if run is None:
            raise RunNotFound(run_id=run_id)
        return run

    async def reopen_run(self, run_id: str, *, now_ms: int) -> bool:
        params = {"run_id": _t(run_id), "now_ms": now_ms, "schema": self.schema}
        (row,) = await self._write(self._sql.reopen, params, run_id=run_id)
        if not row["found"]:
            raise RunNotFound(run_id=run_id)
        return bool(row["reopened"])

    async def claim_runs(
        self,
        *,
        owner: str,
        now_ms: int,
        ttl_ms: int,
        limit: int,
        workflows: Collection[str],
        queues: Mapping[str, QueuePolicy],
        versions: Collection[str] | None = None,
    ) -> list[Lease]:
        if limit <= 0 or not workflows:
            return []
        async with self._connection() as conn, conn.transaction():
            return await _claims.claim_runs_txn(
                conn,
                self._claim_sql,
                owner=owner,
                now_ms=now_ms,
                ttl_ms=ttl_ms,
                limit=limit,
                workflows=workflows,
                queues=queues,
                versions=versions,
            )

    async def delete_runs(self, run_ids: Collection[str]) -> DeleteResult:
        ids = [_t(run_id) for run_id in run_ids]
        if not ids:
            return DeleteResult()
        async with self._connection() as conn:
            cur = await conn.execute(self._sql.delete_runs, (ids,))
            row = await cur.fetchone()
        if row is None or not row["run_ids"]:
            return DeleteResult()
        return DeleteResult(
            runs=len(row["run_ids"]),
            steps=row["steps"],
            inputs=row["inputs"],
            run_ids=tuple(_sql.from_text(run_id) for run_id in row["run_ids"]),
            bytes=int(row["size"]),
        )

    # --- journal ----------------------------------------------------------------
    async def load_journal(
        self, run_id: str, *, up_to_seq: int | None = None
    ) -> list[StepRecord]:
        params = (_t(run_id), up_to_seq if up_to_seq is not None else 2**63 - 1)
        return [
            _sql.step_from_row(row)
            for row in await self._read(self._sql.load_journal, params)
        ]

    async def commit_step(self, step: StepRecord, *, fence: int) -> None:
        if self._pool is None:
            await self.open()
        await self._commits.commit(step, fence)

    def add_commit_listener(self, listener: Callable[[int], None]) -> None:
        """Call `listener(size)` after each group of step commits is written."""
        self._commits.add_listener(listener)

    # --- inputs -----------------------------------------------------------------
    async def send_input(self, record: InputRecord) -> bool:
        params = {
            "run_id": _t(record.run_id),
            "key": _t(record.key),
            "value": record.value,
            "sent_at_ms": record.sent_at_ms,
            "schema": self.schema,
        }
        (row,) = await self._write(self._sql.send_input, params, run_id=record.run_id)
        if not row["found"]:
            raise RunNotFound(run_id=record.run_id)
        return bool(row["sent"])

    # --- archive (SupportsArchive, transactions in _postgres_archive) -----------
    async def archive_journal(self, stub: ArchiveStub) -> bool:
        async with self._connection() as conn:
            done = False
            async with conn.transaction():
                done = await _archive.archive_journal_txn(conn, self._archive_sql, stub)
            return done

    async def load_archive_stub(self, run_id: str) -> ArchiveStub | None:
        rows = await self._read(self._archive_sql.load_stub, (_t(run_id),))
        return _archive.stub_from_row(rows[0]) if rows else None

    async def restore_journal(
        self,
        stub: ArchiveStub,
        steps: Sequence[StepRecord],
        inputs: Sequence[InputRecord],
    ) -> bool:
        async with self._connection() as conn, conn.transaction():
            return await _archive.restore_journal_txn(
                conn, self._archive_sql, stub, steps, inputs
            )

    async def list_archive_stubs(
        self, *, after: str | None, limit: int
    ) -> list[ArchiveStub]:
        params = {"after": None if after is None else _t(after), "limit": limit}
        rows = await self._read(self._archive_sql.list_stubs, params)
        return [_archive.stub_from_row(row) for row in rows]

    async def get_inputs(self, run_id: str) -> dict[str, bytes]:
        rows = await self._read(self._sql.get_inputs, (_t(run_id),))
        return {_sql.from_text(row["key"]): _sql.blob(row["value"]) for row in rows}

    async def list_inputs(self, run_id: str) -> list[InputRecord]:
        rows = await self._read(self._sql.list_inputs, (_t(run_id),))
        return [
            InputRecord(
                run_id=run_id,
                key=_sql.from_text(row["key"]),
                value=_sql.blob(row["value"]),
                sent_at_ms=row["sent_at_ms"],
            )
            for row in rows
        ]

    # --- snapshots --------------------------------------------------------------
    async def put_chunks(self, chunks: Mapping[str, bytes]) -> None:
        if not chunks:
            return
        async with self._connection() as conn:
            await conn.execute(
                self._sql.put_chunks, (list(chunks), list(chunks.values()))
            )

    async def get_chunks(self, hashes: Collection[str]) -> dict[str, bytes]:
        wanted = list(hashes)
        if not wanted:
            return {}
        rows = await self._read(self._sql.get_chunks, (wanted,))
        return {row["hash"]: _sql.blob(row["data"]) for row in rows}

    async def save_snapshot(
        self, snapshot: SnapshotRecord, *, chunks: Mapping[str, bytes] = NO_CHUNKS
    ) -> None:
        params = {
            "hashes": list(chunks),
            "chunks": list(chunks.values()),
            **_snapsql.snapshot_params(snapshot),
        }
        async with self._connection() as conn:
            cursor = await conn.execute(self._sql.save_snapshot, params)
            row = await cursor.fetchone()
        _snapsql.refuse_missing(row, store=self.url, thread_id=snapshot.thread_id)

    async def load_snapshot(
        self, thread_id: str, *, namespace: str = "", checkpoint_id: str | None = None
    ) -> SnapshotRecord | None:
        params = {
            "thread_id": _t(thread_id),
            "namespace": _t(namespace),
            "checkpoint_id": _sql.maybe_text(checkpoint_id),
        }
        rows = await self._read(self._sql.load_snapshot, params)
        return _pgsql.snapshot_from_row(rows[0]) if rows else None

    async def list_snapshots(
        self,
        thread_id: str,
        *,
        namespace: str | None = "",
        before: str | None = None,
        limit: int | None = None,
    ) -> list[SnapshotRecord]:
        params = {
            "thread_id": _t(thread_id),
            "namespace": _sql.maybe_text(namespace),
            "before": _sql.maybe_text(before),
            "limit": limit,
        }
        rows = await self._read(self._sql.list_snapshots, params)
        return [_pgsql.snapshot_from_row(row) for row in rows]

    async def swap_snapshots(
        self,
        thread_id: str,
        old: Sequence[SnapshotRecord],
        *,
        by: SnapshotRecord | None,
        chunks: Mapping[str, bytes] = NO_CHUNKS,
        durable: bool = True,
    ) -> bool:
        check_swap(thread_id, old, by)
        params = _snapsql.swap_params(thread_id, old, by, chunks)
        async with self._connection() as conn:
            cursor = await conn.execute(self._sql.swap_snapshots, params)
            row = await cursor.fetchone()
        if row is None or not row["ok"]:
            return False
        _snapsql.refuse_missing(row, store=self.url, thread_id=thread_id)
        return True

    async def delete_snapshots(
        self, thread_id: str, keys: Collection[tuple[str, str]]
    ) -> int:
        unique = sorted(set(keys))
        params = {
            "thread_id": _t(thread_id),
            "namespaces": [_t(namespace) for namespace, _ in unique],
            "ids": [_t(checkpoint_id) for _, checkpoint_id in unique],
        }
        return await self._write_count(self._sql.delete_snapshots, params)

    async def delete_thread(self, thread_id: str) -> int:
        params = {"thread_id": _t(thread_id)}
        return await self._write_count(self._sql.delete_thread, params)

    async def list_threads(
        self,
        *,
        prefix: str | None = None,
        after: tuple[int, str] | None = None,
        limit: int = 100,
    ) -> list[ThreadRecord]:
        params = {
            "prefix": _sql.maybe_text(prefix),
            "after_ms": None if after is None else after[0],
            "after_id": None if after is None else _t(after[1]),
            "limit": max(limit, 0),
        }
        rows = await self._read(self._sql.list_threads, params)
        return [
            checked_thread(row["thread_id"], row["updated_at_ms"], _sql.from_text)
            for row in rows
        ]

    async def delete_unreferenced_chunks(self, limit: int) -> int:
        async with self._connection() as conn, conn.transaction():
            cur = await conn.execute(self._sql.unreferenced_candidates, (limit,))
            candidates = [row["hash"] for row in await cur.fetchall()]
            if not candidates:
                return 0
            await conn.execute(self._sql.lock_references)
            cur = await conn.execute(self._sql.delete_unreferenced, (candidates,))
            return cur.rowcount

    # --- maintenance ------------------------------------------------------------
    async def scan_payloads(
        self, kind: PayloadKind, *, after: tuple[str | int, ...] | None, limit: int
    ) -> list[Payload]:
        first, following, _ = self._sql.payloads[kind]
        ids = _sql.PAYLOAD_COLUMNS[kind][1]
        if after is None:
            rows = await self._read(first, (limit,))
        else:
            parts = tuple(_sql.key_to_sql(part) for part in after[: len(ids)])
            rows = await self._read(following, (*parts, limit))
        return _pgsql.payloads_from_rows(kind, rows)

    async def replace_payload(self, payload: Payload, *, data: bytes) -> bool:
        replace = self._sql.payloads[payload.kind][2]
        ids = _sql.PAYLOAD_COLUMNS[payload.kind][1]
        parts = tuple(_sql.key_to_sql(part) for part in payload.key[: len(ids)])
        changed = await self._write_count(
            replace, (data, *parts, payload.data), run_id=str(payload.key[0])
        )
        return changed == 1

    async def wait_for_work(self, timeout_s: float) -> None:
        """Wait until another process announces work in this schema, or `timeout_s`.

        Creating a queued run, sending input to a waiting one, reopening and
        cancelling announce work (see `_postgres_session.WorkListener`).
        """
        await self._work.wait_for_work(timeout_s)
