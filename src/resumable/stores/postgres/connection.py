"""PostgreSQL: the store's connections, and what a driver error means.

URL: `postgresql://user:password@host:5432/dbname?schema=resumable&pool_max=10`. Our own
options (`parse_url`) are stripped before the rest reaches libpq (so `sslmode=`,
`connect_timeout=`, `application_name=`... work as usual):

- `schema` (default `resumable`): every table lives in it, created on first use.
- `mode` (default `rwc`): `rw` opens an existing store only, `ro` one read-only, as
  SQLite's `mode=` (`resumable.stores.sqlite`): `rwc` creates the schema and migrates
  it; `rw` needs the schema to hold a store already (and migrates it); `ro`, for
  commands that only look (`resumable runs`, `show`, `export`...), needs a store at
  this version, creates and migrates nothing (`migrations`), and its connections
  start with `default_transaction_read_only=on` (added to libpq's `options`), so
  PostgreSQL itself refuses every write. A pooler that rejects startup options
  (PgBouncer without `ignore_startup_parameters = options`) refuses `ro`.
- `pool_max` (default 10): the most connections the store's pool opens.
- `pool_timeout_s` (default 10): how long a call waits for a connection before it fails
  (the engine then retries it with backoff, for `store_retry_s`).

`Connections` is the store's pool: opened on first use, closed with the event loop it
runs on (`LoopEnd`), and every statement runs on a connection borrowed from it for one
short transaction. The pool hands out the connection returned last, so a run's
sequential steps reuse one warm backend. After a server restart the pooled
connections are dead: the first failure purges every idle one (`pool.check()`) and
the pool reconnects in the background; reads are retried once on a fresh connection,
writes fail with CheckpointWriteError and the engine retries them.

`wait_for_work` is the one exception to "nothing depends on session state":
LISTEN needs a session, so `WorkListener` uses one dedicated connection outside the
pool. LISTEN does not work through a transaction-mode pooler (the session it
registers is handed to other clients): notifications then do not arrive,
`wait_for_work` sleeps its whole timeout, and workers are left polling at that
interval.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import Any, Final, LiteralString, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import psycopg
from psycopg import AsyncConnection, sql
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from resumable.errors import CheckpointWriteError, StoreError
from resumable.stores.loopend import LoopEnd
from resumable.stores.urls import redact

DEFAULT_SCHEMA: Final = "resumable"
CHANNEL: Final = "resumable_work"
"""The NOTIFY channel; the payload is the schema that has work."""
_LISTEN: Final = b"LISTEN resumable_work"
_OWN_OPTIONS: Final = ("schema", "pool_max", "pool_timeout_s", "mode")
MODES: Final = ("rwc", "rw", "ro")
_READ_ONLY: Final = "-c default_transaction_read_only=on"
_MAX_NAME_BYTES: Final = 63  # NAMEDATALEN - 1, PostgreSQL's default build

Conn = AsyncConnection[DictRow]
Pool = AsyncConnectionPool[AsyncConnection[DictRow]]
Params = Sequence[object] | Mapping[str, object]
T = TypeVar("T")
DRIVER_ERRORS: Final = (psycopg.Error, UnicodeError)  # UnicodeError: lone surrogates
# what the server or driver refuses as data: retrying cannot help (a missing grant or
# table, a ProgrammingError, may be fixed meanwhile: that one is retried)
REFUSED: Final = (psycopg.DataError, psycopg.IntegrityError, UnicodeError)


@dataclass(frozen=True, slots=True)
class Options:
    """What a postgresql:// URL configures."""

    conninfo: str
    """The URL libpq sees: ours minus our own options."""
    schema: str = DEFAULT_SCHEMA
    pool_max: int = 10
    pool_timeout_s: float = 10.0
    mode: str = "rwc"
    """`rwc`, `rw` or `ro`: what opening may do (see the module doc)."""


def parse_url(url: str) -> Options:
    """Split a postgresql:// URL into libpq's part and the store's own options."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise StoreError(store=redact(url), detail="not a postgresql:// URL")
    query = parse_qsl(parts.query, keep_blank_values=True)
    own = {key: value for key, value in query if key in _OWN_OPTIONS}
    rest = [(k, v) for k, v in query if k not in _OWN_OPTIONS]
    mode = own.get("mode", "rwc").lower()
    if mode not in MODES:
        raise StoreError(store=redact(url), detail="mode must be 'rwc', 'rw' or 'ro'")
    if mode == "ro":
        rest = _read_only(rest)
    # quote, not quote_plus: libpq reads "+" literally (options=-c%20a%3Db)
    conninfo = parts._replace(query=urlencode(rest, quote_via=quote)).geturl()
    schema = own.get("schema", DEFAULT_SCHEMA)
    if not schema:
        raise StoreError(store=redact(url), detail="schema= must not be empty")
    size = len(schema.encode("utf-8", "surrogatepass"))
    if size > _MAX_NAME_BYTES:
        # PostgreSQL would cut it silently: two long names would share one schema
        raise StoreError(
            store=redact(url),
            detail=f"schema= is {size} bytes long; PostgreSQL keeps only the first "
            f"{_MAX_NAME_BYTES} bytes of a name (so two such URLs could share one "
            f"schema): choose a schema name of at most {_MAX_NAME_BYTES} bytes",
        )
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
    return Options(conninfo, schema, pool_max, pool_timeout_s, mode)


def _read_only(query: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Libpq's options with every transaction read-only (after the user's own)."""
    given = [v for k, v in query if k == "options"]
    options = f"{given[-1]} {_READ_ONLY}" if given else _READ_ONLY
    return [(k, v) for k, v in query if k != "options"] + [("options", options)]


async def connect(options: Options) -> AsyncConnection[DictRow]:
    """A connection of its own, outside the pool."""
    return await AsyncConnection[DictRow].connect(
        options.conninfo,
        autocommit=True,
        prepare_threshold=None,
        row_factory=dict_row,
    )


def composer(schema: str) -> Callable[[LiteralString], bytes]:
    """Compose a statement's `{schema}` with this schema's quoted name, once per store.

    Values are always parameters, never pasted in.
    """
    name = sql.Identifier(schema)

    def compose(template: LiteralString) -> bytes:
        return sql.SQL(template).format(schema=name).as_bytes(None)

    return compose


class Connections:
    """A store's pool: opened on first use, closed with its loop; driver errors as ours.

    `prepare` checks or migrates the schema before the pool first opens; `drain`
    lets work in flight (queued step commits) finish before it closes.
    """

    def __init__(
        self,
        options: Options,
        *,
        url: str,
        prepare: Callable[[], Awaitable[None]],
        drain: Callable[[], Awaitable[None]],
    ) -> None:
        self.url, self._options = url, options
        self._prepare, self._drain = prepare, drain
        self.pool: Pool | None = None
        self._opening = asyncio.Lock()
        self._purge: asyncio.Task[None] | None = None
        self.work = WorkListener(options.conninfo, options.schema)
        self._loop_end = LoopEnd()  # the pool is closed with the loop it runs on
        self.abandoned = Abandoned()

    async def open(
        self, *, run_id: str | None = None, seq: int | None = None
    ) -> Pool | None:
        """Prepare the schema and start the pool (idempotent); None if closed meanwhile.

        Failing to connect is a CheckpointWriteError for a write of run `run_id`,
        else a StoreError.
        """
        if self.pool is not None and not self._loop_end.is_stale():
            return self.pool
        try:
            return await self._open()
        except DRIVER_ERRORS as exc:
            raise self._error(exc, run_id, seq) from exc

    async def _open(self) -> Pool | None:
        async with self._opening:
            if self._loop_end.is_stale():  # its loop closed without shutting down
                self.pool, self._purge = None, None
                self.work = WorkListener(self._options.conninfo, self._options.schema)
            if self.pool is None:
                await self._loop_end.arm(self.close)
                await self._prepare()
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
                    name=f"resumable:{self._options.schema}",
                    open=False,
                )
                try:
                    # the first connection is made here, in this call, and not by
                    # a pool task that may still be connecting when the loop ends:
                    # psycopg's pool retries a cancelled connect, so asyncio.run,
                    # which cancels the tasks left and waits for them, would wait
                    # for that one forever
                    await pool.open(wait=True, timeout=self._options.pool_timeout_s)
                except DRIVER_ERRORS:
                    await pool.close()
                    raise
                self.pool = pool
        return self.pool

    async def close(self) -> None:
        """Let work in flight finish, then close the pool and the LISTEN session."""
        await self._loop_end.disarm()
        await self._drain()  # let queued commits finish
        await self.abandoned.settle(self._options.pool_timeout_s)
        if self._purge is not None:
            self._purge.cancel()
            with contextlib.suppress(BaseException):
                await self._purge
        pool, self.pool = self.pool, None
        await self.work.close()
        if pool is not None:
            await pool.close()
        self._opening = asyncio.Lock()  # a lock is bound to the loop that used it

    @contextlib.asynccontextmanager
    async def connection(
        self, *, run_id: str | None = None, seq: int | None = None
    ) -> AsyncIterator[Conn]:
        """A pooled connection for one transaction; driver errors come out as ours.

        Errors of a write for a run are CheckpointWriteError, all others StoreError.
        """
        pool = self.pool or await self.open(run_id=run_id, seq=seq)
        if pool is None:  # closed while opening
            raise StoreError(store=self.url, detail="the store is closed")
        try:
            async with pool.connection() as conn:
                yield conn
        except DRIVER_ERRORS as exc:
            self.on_failure(exc)
            raise self._error(exc, run_id, seq) from exc

    def _error(
        self, exc: BaseException, run_id: str | None, seq: int | None
    ) -> StoreError | CheckpointWriteError:
        """A driver error as ours: CheckpointWriteError for a write of a run."""
        if run_id is not None:
            return write_error(run_id, seq, exc)
        return StoreError(store=self.url, detail=f"postgresql: {exc}")

    def on_failure(self, exc: BaseException) -> None:
        """After a lost connection, test every idle one so the pool replaces the dead."""
        if not is_lost_connection(exc) or self.pool is None:
            return
        if self._purge is None or self._purge.done():
            self._purge = asyncio.get_running_loop().create_task(self.pool.check())

    async def write(
        self, query: bytes, params: Params, *, run_id: str, seq: int | None = None
    ) -> list[DictRow]:
        """Run one write statement (its own transaction); the rows it returned."""

        async def write() -> list[DictRow]:
            async with self.connection(run_id=run_id, seq=seq) as conn:
                cur = await conn.execute(query, params)
                return await cur.fetchall() if cur.description else []

        return await self.abandoned.run(write())

    async def write_count(
        self, query: bytes, params: Params, *, run_id: str | None = None
    ) -> int:
        """Run one write statement (its own transaction); how many rows it changed."""

        async def write() -> int:
            async with self.connection(run_id=run_id) as conn:
                cur = await conn.execute(query, params)
                return cur.rowcount

        return await self.abandoned.run(write())

    async def read(self, query: bytes, params: Params) -> list[DictRow]:
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
            async with self.connection() as conn:
                cur = await conn.execute(query, params)
                return await cur.fetchall() if cur.description else []

        return await self.abandoned.run(fetch())


class Abandoned:
    """Statements whose callers were cancelled, finishing in tasks of their own.

    psycopg answers a cancelled query by cancelling it on the server and waiting for
    that: some 10 s when the server does not answer (a blackhole, a paused server).
    A caller's deadline (the engine's `store_retry_s`) must not wait for it: `run`
    awaits the statement in a task of its own, so a cancelled caller stops waiting
    at once, and the task finishes the cancel in the background and gives its
    connection back to the pool. `settle` (the store's `close`) waits for those
    tasks: one still cancelling when its loop ends would be interrupted again, and
    psycopg would close its connection with a warning on the user's terminal.
    """

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Await `work`; if cancelled, leave it to finish and stop waiting at once."""
        task = asyncio.ensure_future(work)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.cancel()
            self._tasks.add(task)
            task.add_done_callback(self._settled)
            raise

    async def settle(self, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) for the abandoned statements of this loop."""
        loop = asyncio.get_running_loop()
        # a closed loop's tasks never finish: forget them
        self._tasks = {task for task in self._tasks if task.get_loop() is loop}
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)

    def _settled(self, task: asyncio.Task[Any]) -> None:
        """Forget a finished task, taking its outcome so none is logged as lost."""
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()


def is_lost_connection(exc: BaseException | None) -> bool:
    """Whether `exc` says the connection died (restart, network), not the statement."""
    if not isinstance(exc, psycopg.OperationalError) or isinstance(exc, PoolTimeout):
        return False
    state = exc.sqlstate or ""  # none: the client noticed the connection was gone
    return state == "" or state.startswith(("08", "57P"))


def write_error(
    run_id: str, seq: int | None, exc: BaseException
) -> CheckpointWriteError:
    """The error a failed write for a run raises; data refused is not transient."""
    detail = exc.detail if isinstance(exc, StoreError) else f"postgresql: {exc}"
    return CheckpointWriteError(
        run_id=run_id,
        seq=seq,
        detail=detail,
        transient=not isinstance(exc, REFUSED),
    )


class WorkListener:
    """`wait_for_work`: one LISTEN session outside the pool, used by one caller at a time."""

    def __init__(self, conninfo: str, schema: str) -> None:
        self._conninfo, self._schema = conninfo, schema
        self._listener: AsyncConnection[Any] | None = None
        self._busy = False

    async def close(self) -> None:
        """Close the LISTEN session, if open."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(*DRIVER_ERRORS):
                await listener.close()

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
        if self._busy:
            await asyncio.sleep(timeout_s)
            return
        self._busy = True
        try:
            async with asyncio.timeout(timeout_s):
                listener = self._listener or await self._listen()
            while (remaining := deadline - loop.time()) > 0:
                # aclosing: returning mid-iteration must release the connection's lock
                notes = listener.notifies(timeout=remaining, stop_after=1)
                async with contextlib.aclosing(notes):
                    async for note in notes:
                        if note.payload == self._schema:
                            return
        except TimeoutError:
            return
        except (*DRIVER_ERRORS, OSError):
            broken, self._listener = self._listener, None
            if broken is not None:
                with contextlib.suppress(*DRIVER_ERRORS):
                    await broken.close()
            await asyncio.sleep(max(0.0, deadline - loop.time()))
        finally:
            self._busy = False

    async def _listen(self) -> AsyncConnection[Any]:
        """Open the LISTEN session."""
        conn = await AsyncConnection.connect(
            self._conninfo, autocommit=True, prepare_threshold=None
        )
        try:
            await conn.execute(_LISTEN)
        except BaseException:  # incl. the caller's timeout: never leak the connection
            await conn.close()
            raise
        self._listener = conn
        return conn
