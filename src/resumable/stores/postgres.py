"""PostgresStore: many workers on many machines sharing one PostgreSQL database.

URL: `postgresql://user:password@host:5432/dbname?schema=resumable&pool_max=10`. Our own
options are stripped before the rest reaches libpq (so `sslmode=`, `connect_timeout=`,
`application_name=`... work as usual):

- `schema` (default `resumable`): every table lives in it, created on first use.
- `pool_max` (default 10): the most connections the store's pool opens.
- `pool_timeout_s` (default 10): how long a call waits for a connection before it fails
  (the engine then retries it with backoff, for `store_retry_s`).

Every method is one short transaction on a connection borrowed from the pool, and no
connection is held while user code runs. Nothing depends on session state: statements
name the schema explicitly (no `SET search_path`), locks are transaction-scoped
(`pg_advisory_xact_lock`) and nothing is prepared server-side, so the store works
behind a transaction-mode pooler such as PgBouncer. `wait_for_work` is the exception:
LISTEN needs a session, so it uses one dedicated connection outside the pool. LISTEN
does not work through a transaction-mode pooler (the session it registers is handed to
other clients): notifications then do not arrive, `wait_for_work` sleeps its whole
timeout, and workers are left polling at that interval.

Concurrent `commit_step` calls share transactions (group commit). A commit that finds
no write in flight is written at once by its caller, with no timer and no hand-off; the
commits that queue meanwhile are written together by a flusher task, as one statement,
and each caller is resolved only once that statement's COMMIT returned. The fence check
and the write happen in one transaction that takes a FOR SHARE lock on the run row, so
a concurrent lease takeover either waits for the write to commit or makes the write see
the new fence and refuse it (LeaseLost). The lone commit calls a PL/pgSQL function
(`resumable_commit_step`, created by the migration) because PL/pgSQL keeps its plans per
connection, where a plain statement would be parsed and planned on every step.

The pool hands out the connection returned last, so a run's sequential steps reuse one
warm backend instead of cycling through idle ones.

After a server restart the pooled connections are dead: the first failure purges every
idle connection from the pool (`pool.check()`) and the pool reconnects in the
background; reads are retried once on a fresh connection, writes fail with
CheckpointWriteError and the engine retries them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import (
    AsyncIterator,
    Callable,
    Collection,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import psycopg
from psycopg import AsyncConnection
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from resumable.errors import (
    CheckpointWriteError,
    ChunksMissing,
    LeaseLost,
    RunNotFound,
    SchemaVersionError,
    StoreError,
)
from resumable.stores import _postgres_archive as _archive
from resumable.stores import _rules, _sql, claims, redact
from resumable.stores._postgres_sql import MIGRATION_STATE, Statements
from resumable.stores._records import schema_version_of
from resumable.stores.protocol import (
    NO_CHUNKS,
    ArchiveStub,
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
    check_pack,
)

Conn = AsyncConnection[DictRow]
# identifiers are stored escaped (%, NUL, lone surrogates), as in every SQL store
_t = _sql.to_text
Pool = AsyncConnectionPool[Conn]
Params = Sequence[object] | Mapping[str, object]

DEFAULT_SCHEMA: Final = "resumable"
CHANNEL: Final = "resumable_work"
"""The NOTIFY channel; the payload is the schema that has work."""
_MIGRATION_LOCK: Final = 0x7265_7375_6D61_626C  # "resumabl": one migrator at a time
_BATCH_MAX: Final = 1000
_CLAIM_ROUNDS: Final = 4  # rounds of candidates after a queue policy refused some
_LISTEN: Final = b"LISTEN resumable_work"
_OWN_OPTIONS: Final = ("schema", "pool_max", "pool_timeout_s")
_DRIVER_ERRORS: Final = (psycopg.Error, UnicodeError)  # UnicodeError: lone surrogates
# what the server or driver refuses as data: retrying cannot help (a missing grant or
# table, a ProgrammingError, may be fixed meanwhile: that one is retried)
_REFUSED: Final = (psycopg.DataError, psycopg.IntegrityError, UnicodeError)


@dataclass(frozen=True, slots=True)
class Options:
    """What a postgresql:// URL configures."""

    conninfo: str
    """The URL libpq sees: ours minus our own options."""
    schema: str = DEFAULT_SCHEMA
    pool_max: int = 10
    pool_timeout_s: float = 10.0


def parse_url(url: str) -> Options:
    """Split a postgresql:// URL into libpq's part and the store's own options."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise StoreError(store=redact(url), detail="not a postgresql:// URL")
    query = parse_qsl(parts.query, keep_blank_values=True)
    own = {key: value for key, value in query if key in _OWN_OPTIONS}
    rest = [(k, v) for k, v in query if k not in _OWN_OPTIONS]
    # quote, not quote_plus: libpq reads "+" literally (options=-c%20a%3Db)
    conninfo = parts._replace(query=urlencode(rest, quote_via=quote)).geturl()
    schema = own.get("schema", DEFAULT_SCHEMA)
    if not schema:
        raise StoreError(store=redact(url), detail="schema= must not be empty")
    try:
        pool_max = int(own.get("pool_max", "10"))
        pool_timeout_s = float(own.get("pool_timeout_s", "10"))
    except ValueError:
        raise StoreError(
            store=redact(url), detail="pool_max and pool_timeout_s must be numbers"
        ) from None
    if pool_max < 1 or pool_timeout_s <= 0:
        raise StoreError(
            store=redact(url), detail="pool_max and pool_timeout_s must be positive"
        )
    return Options(conninfo, schema, pool_max, pool_timeout_s)


@dataclass(slots=True)
class _Pending:
    """A commit_step waiting for the flusher."""

    step: StepRecord
    fence: int
    future: asyncio.Future[None]

    @property
    def key(self) -> tuple[str, int]:
        return self.step.run_id, self.step.seq


class PostgresStore:
    """The Store protocol on PostgreSQL, safe for many workers and processes."""

    def __init__(self, url: str) -> None:
        self.url = redact(url)
        self._options = parse_url(url)
        self.schema = self._options.schema
        self._sql = Statements(self.schema)
        self._archive_sql = _archive.ArchiveStatements(self.schema)
        self._pool: Pool | None = None
        self._opening = asyncio.Lock()
        self._pending: list[_Pending] = []
        self._flusher: asyncio.Task[None] | None = None
        self._writing = False  # a commit_step write is in flight (inline or flusher)
        self._purge: asyncio.Task[None] | None = None
        self._listener: AsyncConnection[Any] | None = None
        self._listening = False
        self._commit_transactions = 0  # how many transactions commit_step used
        self._commit_listeners: list[Callable[[int], None]] = []

    # --- lifecycle --------------------------------------------------------------
    async def open(self) -> PostgresStore:
        """Connect, create or migrate the schema, and start the pool (idempotent)."""
        if self._pool is not None:
            return self
        async with self._opening:
            if self._pool is None:
                await self._migrate()
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
        if self._flusher is not None:  # let queued commits finish
            await asyncio.wait([self._flusher])
        if self._purge is not None:
            self._purge.cancel()
            with contextlib.suppress(BaseException):
                await self._purge
        pool, self._pool = self._pool, None
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(*_DRIVER_ERRORS):
                await listener.close()
        if pool is not None:
            await pool.close()

    async def drop(self) -> None:
        """Delete the store's schema and everything in it (for tests)."""
        if self._flusher is not None:
            await asyncio.wait([self._flusher])
        try:
            async with await self._connect() as conn:
                await conn.execute(self._sql.drop)
        except _DRIVER_ERRORS as exc:
            raise StoreError(store=self.url, detail=f"cannot drop: {exc}") from exc

    async def _connect(self) -> AsyncConnection[DictRow]:
        """A connection of its own, outside the pool."""
        return await AsyncConnection[DictRow].connect(
            self._options.conninfo,
            autocommit=True,
            prepare_threshold=None,
            row_factory=dict_row,
        )

    async def _migrate(self) -> None:
        supported = _sql.latest_version("postgres")
        try:
            conn = await self._connect()
        except _DRIVER_ERRORS as exc:
            raise StoreError(store=self.url, detail=f"cannot connect: {exc}") from exc
        try:
            async with conn, conn.transaction():
                # processes starting together queue here; the later ones find it done
                await conn.execute(
                    "SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,)
                )
                # look before creating: CREATE ... IF NOT EXISTS needs the CREATE
                # privilege even when the object exists, and an app's role may lack it
                cur = await conn.execute(MIGRATION_STATE, {"schema": self.schema})
                state = await cur.fetchone()
                if state is None or not state["has_schema"]:
                    await conn.execute(self._sql.compose("CREATE SCHEMA {schema}"))
                if state is None or not state["has_meta"]:
                    await conn.execute(
                        self._sql.compose(
                            "CREATE TABLE {schema}.resumable_meta "
                            "(key TEXT PRIMARY KEY, value TEXT NOT NULL)"
                        )
                    )
                cur = await conn.execute(
                    self._sql.compose(
                        "SELECT value FROM {schema}.resumable_meta "
                        "WHERE key = 'schema_version'"
                    )
                )
                row = await cur.fetchone()
                current = schema_version_of(
                    row["value"] if row else None, store=self.url
                )
                if current > supported:
                    raise SchemaVersionError(
                        store=self.url, found=current, supported=supported
                    )
                for migration in _sql.migrations("postgres"):
                    if migration.version > current:
                        # one script (function bodies hold semicolons); no parameters,
                        # so psycopg sends it as a simple query
                        await conn.execute(self._sql.compose(migration.sql))  # pyright: ignore[reportArgumentType]  # a file shipped in the package, not data
                if current < supported:
                    await conn.execute(
                        self._sql.compose(
                            "INSERT INTO {schema}.resumable_meta (key, value) "
                            "VALUES ('schema_version', %s) ON CONFLICT (key) "
                            "DO UPDATE SET value = EXCLUDED.value"
                        ),
                        (str(supported),),
                    )
        except _DRIVER_ERRORS as exc:
            raise StoreError(store=self.url, detail=f"cannot migrate: {exc}") from exc

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
        except _DRIVER_ERRORS as exc:
            self._on_failure(exc)
            if run_id is not None:
                raise _write_error(run_id, seq, exc) from exc
            raise StoreError(store=self.url, detail=f"postgresql: {exc}") from exc

    def _on_failure(self, exc: BaseException) -> None:
        """After a lost connection, test every idle one so the pool replaces the dead."""
        if not _is_lost_connection(exc) or self._pool is None:
            return
        if self._purge is None or self._purge.done():
            self._purge = asyncio.get_running_loop().create_task(self._pool.check())

    async def _write(
        self, query: bytes, params: Params, *, run_id: str, seq: int | None = None
    ) -> list[DictRow]:
        """Run one write statement (its own transaction); the rows it returned."""
        async with self._connection(run_id=run_id, seq=seq) as conn:
            cur = await conn.execute(query, params)
            return await cur.fetchall() if cur.description else []

    async def _write_count(self, query: bytes, params: Params, *, run_id: str) -> int:
        """Run one write statement (its own transaction); how many rows it changed."""
        async with self._connection(run_id=run_id) as conn:
            cur = await conn.execute(query, params)
            return cur.rowcount

    async def _read(self, query: bytes, params: Params) -> list[DictRow]:
        """Run one statement that changes no run; the rows it returned.

        Retried once on a fresh connection if the first one turns out dead, as every
        idle one is after a server restart.
        """
        try:
            return await self._fetch(query, params)
        except StoreError as exc:
            if not _is_lost_connection(exc.__cause__):
                raise
        if self._purge is not None:  # retry once the dead idle ones are gone
            await asyncio.wait([self._purge], timeout=self._options.pool_timeout_s)
        return await self._fetch(query, params)

    async def _fetch(self, query: bytes, params: Params) -> list[DictRow]:
        async with self._connection() as conn:
            cur = await conn.execute(query, params)
            return await cur.fetchall() if cur.description else []

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
        params = _run_filters(query) | {
            "after_ms": after_ms,
            "after_id": _sql.maybe_text(after_id),
            "limit": query.limit,
        }
        return [
            _sql.run_from_row(row)
            for row in await self._read(self._sql.list_runs, params)
        ]

    async def count_runs(self, query: RunQuery) -> dict[tuple[str, str | None], int]:
        rows = await self._read(self._sql.count_runs, _run_filters(query))
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
        expires_at_ms = now_ms + ttl_ms
        params = {
            "run_id": _t(run_id),
            "owner": _t(owner),
            "now_ms": now_ms,
            "expires_at_ms": expires_at_ms,
            "take_over": _sql.maybe_text(take_over),
        }
        (row,) = await self._write(self._sql.acquire, params, run_id=run_id)
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

    async def renew_lease(
        self, run_id: str, *, fence: int, now_ms: int, ttl_ms: int
    ) -> None:
        params = (now_ms + ttl_ms, _t(run_id), fence)
        if not await self._write_count(self._sql.renew, params, run_id=run_id):
            raise LeaseLost(run_id=run_id, fence=fence)

    async def update_run(self, run_id: str, *, fence: int, update: RunUpdate) -> None:
        params = {
            "status": update.status,
            "output": update.output,
            "wake_at_ms": update.wake_at_ms,
            "expires_at_ms": update.expires_at_ms,
            "now_ms": update.now_ms,
            "run_id": _t(run_id),
            "fence": fence,
        }
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
        allowed = None if versions is None else [_t(v) for v in versions]
        expires_at_ms = now_ms + ttl_ms
        admission = claims.Admission(
            {_t(name): policy for name, policy in queues.items()}
        )
        names = [_t(name) for name in workflows]
        chosen: list[str] = []
        before: dict[str, DictRow] = {}  # the chosen rows as they were, locked
        seen: list[str] = []
        async with self._connection() as conn, conn.transaction():
            for round_no in range(_CLAIM_ROUNDS):
                want = limit - len(chosen)
                cur = await conn.execute(
                    self._sql.runnable,
                    {
                        "workflows": names,
                        "versions": allowed,
                        "now_ms": now_ms,
                        "seen": seen,
                        "closed": sorted(admission.closed),
                        "unstartable": sorted(admission.unstartable),
                        "want": want,
                    },
                )
                rows = await cur.fetchall()
                await self._load_queues_txn(
                    conn, admission, rows, now_ms, wait=round_no == 0
                )
                for row in rows:
                    seen.append(row["run_id"])
                    if admission.admit(
                        row["queue"], is_start=row["status"] == "queued"
                    ):
                        chosen.append(row["run_id"])
                        before[row["run_id"]] = row
                if len(rows) < want or len(chosen) >= limit:
                    break  # nothing more to find, or nothing more wanted
            if not chosen:
                return []
            cur = await conn.execute(
                self._sql.claim,
                {
                    "owner": _t(owner),
                    "now_ms": now_ms,
                    "expires_at_ms": expires_at_ms,
                    "run_ids": chosen,
                    "starts": admission.starts,
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
                    before[key]["status"],
                    _sql.maybe_from_text(before[key]["lease_owner"]),
                    owner,
                ),
            )
            for key in chosen
        ]

    async def _load_queues_txn(
        self,
        conn: Conn,
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
        params = {"schema": self.schema, "queues": names}
        if wait:
            await conn.execute(self._sql.lock_queues, params)
        else:
            cur = await conn.execute(self._sql.try_lock_queues, params)
            locked = {row["queue"] for row in await cur.fetchall()}
            for name in names:
                if name not in locked:
                    admission.close(name)
            names = [n for n in names if n in locked]
            if not names:
                return
        policies = admission.policies
        cur = await conn.execute(
            self._sql.queue_load,
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
            await self._write_batch([pending])
        finally:
            self._writing = False
            if self._pending:  # what queued meanwhile goes out together
                self._writing = True
                self._flusher = loop.create_task(self._flush())
        await pending.future  # settled by now: returns, or raises its outcome

    def add_commit_listener(self, listener: Callable[[int], None]) -> None:
        """Call `listener(size)` after each group of step commits is written."""
        self._commit_listeners.append(listener)

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
            if len(batch) >= _BATCH_MAX or pending.key in keys:
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
        except _DRIVER_ERRORS as exc:
            self._on_failure(exc)
            if len(batch) > 1 and isinstance(exc, _REFUSED):
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
        for listener in self._commit_listeners:
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
        pool = self._pool
        if pool is None:
            raise StoreError(store=self.url, detail="the store is closed")
        async with pool.connection() as conn:
            self._commit_transactions += 1
            if len(batch) == 1:
                params = (*_sql.step_values(batch[0].step), batch[0].fence)
                cur = await conn.execute(self._sql.commit_step, params)
                row = await cur.fetchone()
                return {batch[0].key} if row is not None and row["written"] else set()
            cur = await conn.execute(self._sql.commit_steps, _columns(batch))
            rows = await cur.fetchall()
            return {(_sql.from_text(row["run_id"]), row["seq"]) for row in rows}

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
            **_snapshot_params(snapshot),
        }
        async with self._connection() as conn:
            cursor = await conn.execute(self._sql.save_snapshot, params)
            row = await cursor.fetchone()
        if row is not None and row["missing"]:
            raise ChunksMissing(
                store=self.url,
                thread_id=snapshot.thread_id,
                hashes=tuple(row["missing"]),
            )

    async def load_snapshot(
        self, thread_id: str, *, namespace: str = "", checkpoint_id: str | None = None
    ) -> SnapshotRecord | None:
        params = {
            "thread_id": _t(thread_id),
            "namespace": _t(namespace),
            "checkpoint_id": _sql.maybe_text(checkpoint_id),
        }
        rows = await self._read(self._sql.load_snapshot, params)
        return _snapshot_from_row(rows[0]) if rows else None

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
        return [_snapshot_from_row(row) for row in rows]

    async def replace_snapshots(
        self,
        thread_id: str,
        namespace: str,
        checkpoint_ids: Collection[str],
        *,
        by: SnapshotRecord,
    ) -> bool:
        check_pack(thread_id, by)
        params = {
            "from_namespace": _t(namespace),
            "ids": [_t(checkpoint_id) for checkpoint_id in set(checkpoint_ids)],
            **_snapshot_params(by),
        }
        async with self._connection() as conn:
            cursor = await conn.execute(self._sql.replace_snapshots, params)
            row = await cursor.fetchone()
        return row is not None and bool(row["ok"])

    async def delete_thread(self, thread_id: str) -> int:
        async with self._connection() as conn:
            cur = await conn.execute(
                self._sql.delete_thread, {"thread_id": _t(thread_id)}
            )
            return cur.rowcount

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
            ThreadRecord(
                thread_id=_sql.from_text(row["thread_id"]),
                updated_at_ms=row["updated_at_ms"],
            )
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
        return [
            Payload(
                kind=kind,
                key=tuple(
                    _sql.key_from_sql(value) for value in list(row.values())[:-1]
                ),
                data=bytes(list(row.values())[-1]),
            )
            for row in rows
        ]

    async def replace_payload(self, payload: Payload, *, data: bytes) -> bool:
        replace = self._sql.payloads[payload.kind][2]
        ids = _sql.PAYLOAD_COLUMNS[payload.kind][1]
        parts = tuple(_sql.key_to_sql(part) for part in payload.key[: len(ids)])
        changed = await self._write_count(
            replace, (data, *parts, payload.data), run_id=str(payload.key[0])
        )
        return changed == 1

    # --- wake-ups ---------------------------------------------------------------
    async def wait_for_work(self, timeout_s: float) -> None:
        """Wait until another process announces work in this schema, or `timeout_s`.

        Work is announced (NOTIFY `resumable_work`, in the announcing transaction) when
        a queued run is created, a waiting run receives input, a failed run is reopened
        and a run is cancelled. LISTEN needs a session of its own, so this keeps one
        dedicated connection outside the pool. Through a transaction-mode pooler
        notifications never arrive, and on any failure this just sleeps `timeout_s`:
        callers must poll anyway, and this only makes them prompt. One caller at a
        time listens; a concurrent caller sleeps.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        if self._listening:
            await asyncio.sleep(timeout_s)
            return
        self._listening = True
        try:
            async with asyncio.timeout(timeout_s):
                listener = self._listener or await self._listen()
            while (remaining := deadline - loop.time()) > 0:
                # aclosing: returning mid-iteration must release the connection's lock
                notes = listener.notifies(timeout=remaining, stop_after=1)
                async with contextlib.aclosing(notes):
                    async for note in notes:
                        if note.payload == self.schema:
                            return
        except TimeoutError:
            return
        except (*_DRIVER_ERRORS, OSError):
            broken, self._listener = self._listener, None
            if broken is not None:
                with contextlib.suppress(*_DRIVER_ERRORS):
                    await broken.close()
            await asyncio.sleep(max(0.0, deadline - loop.time()))
        finally:
            self._listening = False

    async def _listen(self) -> AsyncConnection[Any]:
        conn = await AsyncConnection.connect(
            self._options.conninfo, autocommit=True, prepare_threshold=None
        )
        try:
            await conn.execute(_LISTEN)
        except BaseException:  # incl. the caller's timeout: never leak the connection
            await conn.close()
            raise
        self._listener = conn
        return conn


def _columns(batch: list[_Pending]) -> tuple[list[object], ...]:
    """The batch as one array per column (STEP_COLUMNS order, then the fence)."""
    rows = [(*_sql.step_values(p.step), p.fence) for p in batch]
    return tuple(list(column) for column in zip(*rows, strict=True))


def _is_lost_connection(exc: BaseException | None) -> bool:
    """Whether `exc` says the connection died (restart, network), not the statement."""
    if not isinstance(exc, psycopg.OperationalError) or isinstance(exc, PoolTimeout):
        return False
    state = exc.sqlstate or ""  # none: the client noticed the connection was gone
    return state == "" or state.startswith(("08", "57P"))


def _write_error(
    run_id: str, seq: int | None, exc: BaseException
) -> CheckpointWriteError:
    """The error a failed write for a run raises; data refused is not transient."""
    detail = exc.detail if isinstance(exc, StoreError) else f"postgresql: {exc}"
    return CheckpointWriteError(
        run_id=run_id,
        seq=seq,
        detail=detail,
        transient=not isinstance(exc, _REFUSED),
    )


def _batch_error(pending: _Pending, exc: BaseException) -> CheckpointWriteError:
    error = _write_error(pending.step.run_id, pending.step.seq, exc)
    error.__cause__ = exc  # raised in the caller's task, chained as `from exc` would
    return error


def _settle(pending: _Pending, error: BaseException | None) -> None:
    if pending.future.done():  # the caller was cancelled; the write stands regardless
        return
    if error is None:
        pending.future.set_result(None)
    else:
        pending.future.set_exception(error)


def _snapshot_params(snapshot: SnapshotRecord) -> dict[str, Any]:
    """The named parameters of the row `_postgres_sql._insert_snapshot` inserts."""
    return {
        "thread_id": _t(snapshot.thread_id),
        "namespace": _t(snapshot.namespace),
        "checkpoint_id": _t(snapshot.checkpoint_id),
        "parent_id": _sql.maybe_text(snapshot.parent_id),
        "manifest": snapshot.manifest,
        "label": _sql.maybe_text(snapshot.label),
        "metadata": snapshot.metadata,
        "created_at_ms": snapshot.created_at_ms,
        "chunk_refs": list(snapshot.chunk_refs),
    }


def _snapshot_from_row(row: DictRow) -> SnapshotRecord:
    return _sql.snapshot_from_row(row, row["chunk_refs"])


def _run_filters(query: RunQuery) -> dict[str, object]:
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
