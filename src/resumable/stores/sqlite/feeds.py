"""Run feeds on SQLite (`KeepsFeeds`): transactions on the store's connection."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Final

from resumable.errors import RunNotFound
from resumable.stores import _sql
from resumable.stores.feeds import FeedEntry

Conn = sqlite3.Connection
_t = _sql.to_text

_RUN_EXISTS: Final = "SELECT 1 FROM resumable_runs WHERE run_id = ?"
_HAS_ONCE_KEY: Final = (
    "SELECT 1 FROM resumable_feed WHERE run_id = ? AND channel = ? AND once_key = ?"
)
_LAST: Final = (
    'SELECT COALESCE(MAX("offset"), 0) FROM resumable_feed '
    "WHERE run_id = ? AND channel = ?"
)
_INSERT: Final = (
    'INSERT INTO resumable_feed (run_id, channel, "offset", once_key, payload, '
    "created_at_ms) VALUES (?, ?, ?, ?, ?, ?)"
)
_READ: Final = (
    'SELECT "offset", payload, created_at_ms FROM resumable_feed '
    'WHERE run_id = ? AND channel = ? AND "offset" > ? ORDER BY "offset" LIMIT ?'
)
DELETE_FEEDS: Final = "DELETE FROM resumable_feed WHERE run_id IN ({marks})"
"""Run by `delete_runs` with the runs it deletes."""


def append_feed_txn(
    conn: Conn,
    *,
    run_id: str,
    channel: str,
    payloads: Sequence[bytes],
    now_ms: int,
    once_key: str | None,
) -> int | None:
    """`KeepsFeeds.append_feed` in the caller's write transaction."""
    run, chan = _t(run_id), _t(channel)
    if conn.execute(_RUN_EXISTS, (run,)).fetchone() is None:
        raise RunNotFound(run_id=run_id)
    if (
        once_key is not None
        and conn.execute(_HAS_ONCE_KEY, (run, chan, once_key)).fetchone()
    ):
        return None
    last = int(conn.execute(_LAST, (run, chan)).fetchone()[0])
    # the once_key goes on the first entry only: the unique index holds one per channel
    conn.executemany(
        _INSERT,
        [
            (run, chan, last + i, once_key if i == 1 else None, payload, now_ms)
            for i, payload in enumerate(payloads, start=1)
        ],
    )
    return last + len(payloads)


def read_feed_txn(
    conn: Conn, *, run_id: str, channel: str, after: int, limit: int
) -> list[FeedEntry]:
    """`KeepsFeeds.read_feed`: up to `limit` entries past `after`, in order."""
    rows = conn.execute(_READ, (_t(run_id), _t(channel), after, limit)).fetchall()
    return _sql.feed_entries(run_id, channel, rows)
