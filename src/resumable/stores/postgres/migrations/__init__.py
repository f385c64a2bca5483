"""PostgreSQL's schema: the numbered migrations in this folder, and applying them.

`NNNN_name.sql`, applied in order on a connection of its own, `{schema}` replaced by
the store's schema (`migrate`, when the URL's `mode` is `rwc` or `rw`); `check_schema`
replaces it when `mode` is `rw` or `ro` and only reads (see
`resumable.stores.postgres.connection` for the modes).
"""

from __future__ import annotations

from importlib import resources
from typing import Final

from resumable.errors import SchemaVersionError, StoreError
from resumable.stores._records import schema_version_of
from resumable.stores._sql import Migration, read_migrations
from resumable.stores.postgres.connection import (
    DRIVER_ERRORS,
    Options,
    composer,
    connect,
)

_MIGRATION_LOCK: Final = 0x7265_7375_6D61_626C  # "resumabl": one migrator at a time
MIGRATION_STATE: Final = """
SELECT to_regnamespace(quote_ident(%(schema)s)) IS NOT NULL AS has_schema,
       to_regclass(quote_ident(%(schema)s) || '.resumable_meta') IS NOT NULL AS has_meta
"""


def migrations() -> list[Migration]:
    """PostgreSQL's migrations, the .sql files of this package, in version order."""
    return read_migrations(resources.files(__name__))


def latest_version() -> int:
    """The schema version this resumable writes on PostgreSQL."""
    return max(m.version for m in migrations())


async def prepare(options: Options, *, url: str) -> None:
    """Check or create and migrate the schema before a store's pool opens (`mode`)."""
    if options.mode != "rwc":  # the schema must exist
        await check_schema(options, url=url)
    if options.mode != "ro":
        await migrate(options, url=url)


async def migrate(options: Options, *, url: str) -> None:
    """Create the schema or migrate it forward (one process at a time)."""
    supported = latest_version()
    compose = composer(options.schema)
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
            cur = await conn.execute(MIGRATION_STATE, {"schema": options.schema})
            state = await cur.fetchone()
            if state is None or not state["has_schema"]:
                await conn.execute(compose("CREATE SCHEMA {schema}"))
            if state is None or not state["has_meta"]:
                await conn.execute(
                    compose(
                        "CREATE TABLE {schema}.resumable_meta "
                        "(key TEXT PRIMARY KEY, value TEXT NOT NULL)"
                    )
                )
            cur = await conn.execute(
                compose(
                    "SELECT value FROM {schema}.resumable_meta "
                    "WHERE key = 'schema_version'"
                )
            )
            row = await cur.fetchone()
            current = schema_version_of(row["value"] if row else None, store=url)
            if current > supported:
                raise SchemaVersionError(store=url, found=current, supported=supported)
            for migration in migrations():
                if migration.version > current:
                    # one script (function bodies hold semicolons); no parameters,
                    # so psycopg sends it as a simple query
                    await conn.execute(compose(migration.sql))  # pyright: ignore[reportArgumentType]  # a file shipped in the package, not data
            if current < supported:
                await conn.execute(
                    compose(
                        "INSERT INTO {schema}.resumable_meta (key, value) "
                        "VALUES ('schema_version', %s) ON CONFLICT (key) "
                        "DO UPDATE SET value = EXCLUDED.value"
                    ),
                    (str(supported),),
                )
    except DRIVER_ERRORS as exc:
        raise StoreError(store=url, detail=f"cannot migrate: {exc}") from exc


async def check_schema(options: Options, *, url: str) -> None:
    """Refuse to open a schema that holds no store (and, read-only, an older one).

    Only reads: `mode=rw` and `mode=ro` never create a schema.

    Raises:
        StoreError: No store in the schema, or (`ro`) one an older version wrote.
        SchemaVersionError: A newer version wrote it.
    """
    schema = options.schema
    compose = composer(schema)
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
                compose(
                    "SELECT value FROM {schema}.resumable_meta "
                    "WHERE key = 'schema_version'"
                )
            )
            row = await cur.fetchone()
    except DRIVER_ERRORS as exc:
        raise StoreError(store=url, detail=f"cannot open: {exc}") from exc
    current = schema_version_of(row["value"] if row else None, store=url)
    supported = latest_version()
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


async def drop_schema(options: Options, *, url: str) -> None:
    """Delete the store's schema and everything in it (for tests)."""
    try:
        async with await connect(options) as conn:
            await conn.execute(
                composer(options.schema)("DROP SCHEMA IF EXISTS {schema} CASCADE")
            )
    except DRIVER_ERRORS as exc:
        raise StoreError(store=url, detail=f"cannot drop: {exc}") from exc
