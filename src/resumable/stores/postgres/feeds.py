"""Run feeds on PostgreSQL (`KeepsFeeds`): statements and the append transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from resumable.errors import RunNotFound
from resumable.stores import _sql
from resumable.stores.postgres.connection import Conn, composer

_t = _sql.to_text

# appends to one channel queue here, so two appenders never take the same offset
_LOCK_CHANNEL: Final = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
_RUN_EXISTS: Final = "SELECT 1 FROM {schema}.resumable_runs WHERE run_id = %s"
_HAS_ONCE_KEY: Final = (
    "SELECT 1 FROM {schema}.resumable_feed "
    "WHERE run_id = %s AND channel = %s AND once_key = %s"
)
_LAST: Final = (
    'SELECT coalesce(max("offset"), 0) AS last FROM {schema}.resumable_feed '
    "WHERE run_id = %s AND channel = %s"
)
_INSERT: Final = (
    'INSERT INTO {schema}.resumable_feed (run_id, channel, "offset", once_key, payload, '
    "created_at_ms) VALUES (%s, %s, %s, %s, %s, %s)"
)
_READ: Final = (
    'SELECT "offset", payload, created_at_ms FROM {schema}.resumable_feed '
    'WHERE run_id = %s AND channel = %s AND "offset" > %s ORDER BY "offset" LIMIT %s'
)


class FeedStatements:
    """The feed statements of one store, composed with its schema."""

    def __init__(self, schema: str) -> None:
        compose = composer(schema)
        self.schema = schema
        self.lock_channel = compose(_LOCK_CHANNEL)
        self.run_exists = compose(_RUN_EXISTS)
        self.has_once_key = compose(_HAS_ONCE_KEY)
        self.last = compose(_LAST)
        self.insert = compose(_INSERT)
        self.read = compose(_READ)


async def append_feed_txn(
    conn: Conn,
    sql: FeedStatements,
    *,
    run_id: str,
    channel: str,
    payloads: Sequence[bytes],
    now_ms: int,
    once_key: str | None,
) -> int | None:
    """`KeepsFeeds.append_feed` in the caller's transaction."""
    run, chan = _t(run_id), _t(channel)
    await conn.execute(sql.lock_channel, (f"{sql.schema}\x1f{run}\x1f{chan}",))
    cur = await conn.execute(sql.run_exists, (run,))
    if await cur.fetchone() is None:
        raise RunNotFound(run_id=run_id)
    if once_key is not None:
        cur = await conn.execute(sql.has_once_key, (run, chan, once_key))
        if await cur.fetchone() is not None:
            return None
    cur = await conn.execute(sql.last, (run, chan))
    row = await cur.fetchone()
    last = int(row["last"]) if row is not None else 0
    # the once_key goes on the first entry only: the unique index holds one per channel
    async with conn.cursor() as many:
        await many.executemany(
            sql.insert,
            [
                (run, chan, last + i, once_key if i == 1 else None, payload, now_ms)
                for i, payload in enumerate(payloads, start=1)
            ],
        )
    return last + len(payloads)
