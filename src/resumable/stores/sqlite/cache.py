"""SQLiteStore's step cache index (`SupportsStepCache`, table `resumable_step_cache`).

Each function runs inside the caller's transaction (`_txn`), on the store's connection.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Final

from resumable.stores import _sql
from resumable.stores.protocol import StepRecord
from resumable.stores.step_cache import CacheEntry

_t = _sql.to_text
Conn = sqlite3.Connection

_PUT: Final = (
    "INSERT OR REPLACE INTO resumable_step_cache "
    "(key, step, workflow, run_id, seq, created_at_ms, expires_at_ms) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_GET: Final = (
    "SELECT key, step, workflow, run_id, seq, created_at_ms, expires_at_ms "
    "FROM resumable_step_cache WHERE key = ? "
    "AND (expires_at_ms IS NULL OR expires_at_ms > ?)"
)
_ROW: Final = (
    f"SELECT {', '.join(_sql.STEP_COLUMNS)} FROM resumable_steps "  # noqa: S608 - constant columns
    "WHERE run_id = ? AND seq = ?"
)
_CLEAR: Final = (
    "DELETE FROM resumable_step_cache "
    "WHERE (? IS NULL OR step = ?) AND (? IS NULL OR workflow = ?)"
)


def put_cache_entries_txn(conn: Conn, entries: Sequence[CacheEntry]) -> None:
    """Record `entries` (the last write of a key wins)."""
    conn.executemany(
        _PUT,
        [
            (
                entry.key,
                _t(entry.step),
                _t(entry.workflow),
                _t(entry.run_id),
                entry.seq,
                entry.created_at_ms,
                entry.expires_at_ms,
            )
            for entry in entries
        ],
    )


def lookup_cache_txn(
    conn: Conn, key: str, now_ms: int
) -> tuple[CacheEntry, StepRecord] | None:
    """The live entry of `key` and the row it names; None if either is missing."""
    found = conn.execute(_GET, (key, now_ms)).fetchone()
    if found is None:
        return None
    entry = CacheEntry(
        key=found["key"],
        step=_sql.from_text(found["step"]),
        workflow=_sql.from_text(found["workflow"]),
        run_id=_sql.from_text(found["run_id"]),
        seq=found["seq"],
        created_at_ms=found["created_at_ms"],
        expires_at_ms=found["expires_at_ms"],
    )
    row = conn.execute(_ROW, (found["run_id"], entry.seq)).fetchone()
    return None if row is None else (entry, _sql.step_from_row(row))


def clear_cache_txn(conn: Conn, step: str | None, workflow: str | None) -> int:
    """Delete the entries of `step` and `workflow` (None: any); how many."""
    s = None if step is None else _t(step)
    w = None if workflow is None else _t(workflow)
    return conn.execute(_CLEAR, (s, s, w, w)).rowcount
