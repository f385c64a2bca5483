"""PostgreSQL: the connections a store opens outside its pool.

The URL's own options (`parse_url`), the migration that creates or upgrades the schema
(`migrate`, on a connection of its own), the check that replaces it when the URL's
`mode` is `rw` or `ro` (`check_schema`), and the LISTEN session of `wait_for_work`.

`mode=` works as SQLite's (`resumable.stores.sqlite`): `rwc` (the default) creates
the schema and migrates it; `rw` needs the schema to hold a store already (and
migrates it); `ro`, for commands that only look (`resumable runs`, `show`,
`export`...), needs a store at this version, creates and migrates nothing, and its
connections start with `default_transaction_read_only=on` (added to libpq's
`options`), so PostgreSQL itself refuses every write. A pooler that rejects startup
options (PgBouncer without `ignore_startup_parameters = options`) refuses `ro`.

`wait_for_work` is the one exception to "nothing depends on session state":
LISTEN needs a session, so it uses one dedicated connection outside the pool. LISTEN
does not work through a transaction-mode pooler (the session it registers is handed to
other clients): notifications then do not arrive, `wait_for_work` sleeps its whole
timeout, and workers are left polling at that interval.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from psycopg import AsyncConnection
from psycopg.rows import DictRow, dict_row

from resumable.errors import SchemaVersionError, StoreError
from resumable.stores import _sql
from resumable.stores._postgres_commits import DRIVER_ERRORS
from resumable.stores._postgres_sql import MIGRATION_STATE, Statements
from resumable.stores._records import schema_version_of
from resumable.stores.urls import redact

DEFAULT_SCHEMA: Final = "resumable"
CHANNEL: Final = "resumable_work"
"""The NOTIFY channel; the payload is the schema that has work."""
_MIGRATION_LOCK: Final = 0x7265_7375_6D61_626C  # "resumabl": one migrator at a time
_LISTEN: Final = b"LISTEN resumable_work"
_OWN_OPTIONS: Final = ("schema", "pool_max", "pool_timeout_s", "mode")
MODES: Final = ("rwc", "rw", "ro")
_READ_ONLY: Final = "-c default_transaction_read_only=on"
_MAX_NAME_BYTES: Final = 63  # NAMEDATALEN - 1, PostgreSQL's default build


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


async def migrate(options: Options, statements: Statements, *, url: str) -> None:
    """Create the schema or migrate it forward (one process at a time)."""
    supported = _sql.latest_version("postgres")
    try:
        conn = await connect(options)
    except DRIVER_ERRORS as exc:
        raise StoreError(store=url, detail=f"cannot connect: {exc}") from exc
    try:
        async with conn, conn.transaction():
            # processes starting together queue here; the later ones find it done
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            # look before creating: CREATE ... IF NOT EXISTS needs the CREATE
            # privilege even when the object exists, and an app's role may lack it
            cur = await conn.execute(MIGRATION_STATE, {"schema": statements.schema})
            state = await cur.fetchone()
            if state is None or not state["has_schema"]:
                await conn.execute(statements.compose("CREATE SCHEMA {schema}"))
            if state is None or not state["has_meta"]:
                await conn.execute(
                    statements.compose(
                        "CREATE TABLE {schema}.resumable_meta "
                        "(key TEXT PRIMARY KEY, value TEXT NOT NULL)"
                    )
                )
            cur = await conn.execute(
                statements.compose(
                    "SELECT value FROM {schema}.resumable_meta "
                    "WHERE key = 'schema_version'"
                )
            )
            row = await cur.fetchone()
            current = schema_version_of(row["value"] if row else None, store=url)
            if current > supported:
                raise SchemaVersionError(store=url, found=current, supported=supported)
            for migration in _sql.migrations("postgres"):
                if migration.version > current:
                    # one script (function bodies hold semicolons); no parameters,
                    # so psycopg sends it as a simple query
                    await conn.execute(statements.compose(migration.sql))  # pyright: ignore[reportArgumentType]  # a file shipped in the package, not data
            if current < supported:
                await conn.execute(
                    statements.compose(
                        "INSERT INTO {schema}.resumable_meta (key, value) "
                        "VALUES ('schema_version', %s) ON CONFLICT (key) "
                        "DO UPDATE SET value = EXCLUDED.value"
                    ),
                    (str(supported),),
                )
    except DRIVER_ERRORS as exc:
        raise StoreError(store=url, detail=f"cannot migrate: {exc}") from exc


async def check_schema(options: Options, statements: Statements, *, url: str) -> None:
    """Refuse to open a schema that holds no store (and, read-only, an older one).

    Only reads: `mode=rw` and `mode=ro` never create a schema.

    Raises:
        StoreError: No store in the schema, or (`ro`) one an older version wrote.
        SchemaVersionError: A newer version wrote it.
    """
    schema = statements.schema
    try:
        async with await connect(options) as conn:
            cur = await conn.execute(MIGRATION_STATE, {"schema": schema})
            state = await cur.fetchone()
            if state is None or not state["has_schema"] or not state["has_meta"]:
                raise StoreError(
                    store=url,
                    detail=f"no resumable store in schema {schema!r}; a writing "
                    f"command (e.g. `resumable worker`) creates it",
                )
            cur = await conn.execute(
                statements.compose(
                    "SELECT value FROM {schema}.resumable_meta "
                    "WHERE key = 'schema_version'"
                )
            )
            row = await cur.fetchone()
    except DRIVER_ERRORS as exc:
        raise StoreError(store=url, detail=f"cannot open: {exc}") from exc
    current = schema_version_of(row["value"] if row else None, store=url)
    supported = _sql.latest_version("postgres")
    if current > supported:
        raise SchemaVersionError(store=url, found=current, supported=supported)
    if current < supported and options.mode == "ro":
        raise StoreError(
            store=url,
            detail=f"schema {schema!r} has schema version {current}, this version "
            f"reads {supported}: it needs a migration, which a read-only open does "
            f"not make; open it once with a writing command (e.g. `resumable gc "
            f"--dry-run`) to migrate it",
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
