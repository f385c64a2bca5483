"""SQLiteStore's `SupportsThreadArchive` transactions: a thread's older snapshots for a stub.

Each function runs inside the caller's transaction (`_txn`), on the store's
connection; the table is `resumable_archived_threads` (migration 0005).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Mapping, Sequence
from typing import Final

from resumable.stores import _sql
from resumable.stores._records import converter
from resumable.stores._sqlite_snapshots import (
    PresentChunks,
    put_chunks_txn,
    snapshot_row,
)
from resumable.stores._sqlite_snapshots import (
    delete_thread_txn as delete_snapshots_of_thread_txn,
)
from resumable.stores.protocol import SnapshotRecord
from resumable.stores.stubs import ThreadStub, keys_of, namespaces_of

_t = _sql.to_text
Conn = sqlite3.Connection

_STUB_COLUMNS: Final = (
    "thread_id, object_key, size, snapshots, chunks, archived_at_ms, newest, refers_to"
)
_PUT_STUB: Final = (
    f"INSERT OR REPLACE INTO resumable_archived_threads ({_STUB_COLUMNS}) "  # noqa: S608 - constant columns
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_SELECT_STUB: Final = (
    f"SELECT {_STUB_COLUMNS} FROM resumable_archived_threads WHERE thread_id = ?"  # noqa: S608 - constant columns
)
_LIST_STUBS: Final = (
    f"SELECT {_STUB_COLUMNS} FROM resumable_archived_threads "  # noqa: S608 - constant columns
    "WHERE ? IS NULL OR thread_id > ? ORDER BY thread_id LIMIT ?"
)
_DELETE_STUB: Final = "DELETE FROM resumable_archived_threads WHERE thread_id = ?"
_HAS_SNAPSHOT: Final = (
    "SELECT 1 FROM resumable_snapshots "
    "WHERE thread_id = ? AND namespace = ? AND checkpoint_id = ?"
)
_DELETE_SNAPSHOT: Final = (
    "DELETE FROM resumable_snapshots "
    "WHERE thread_id = ? AND namespace = ? AND checkpoint_id = ?"
)
# the candidates no remaining snapshot names (the subquery is evaluated once)
_DELETE_RELEASED: Final = (
    "DELETE FROM resumable_chunks WHERE hash IN (SELECT value FROM json_each(?)) "
    "AND hash NOT IN (SELECT r.value FROM resumable_snapshots s, json_each(s.chunk_refs) r)"
)
_RESTORE_SNAPSHOT: Final = (
    "INSERT OR IGNORE INTO resumable_snapshots (thread_id, namespace, checkpoint_id, "
    "parent_id, manifest, chunk_refs, label, metadata, created_at_ms) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


@converter("thread archive stub", lambda row: f"thread {row[0]!r} archive stub")
def _stub(row: Sequence[object]) -> ThreadStub:
    thread_id, key, size, snapshots, chunks, archived, newest, refers_to = row
    return ThreadStub(
        thread_id=_sql.from_text(str(thread_id)),
        key=str(key),
        size=int(str(size)),
        snapshots=int(str(snapshots)),
        chunks=int(str(chunks)),
        archived_at_ms=int(str(archived)),
        newest=namespaces_of(json.loads(str(newest))),
        refers_to=keys_of(json.loads(str(refers_to))),
    )


def load_stub_txn(conn: Conn, thread_id: str) -> ThreadStub | None:
    """`SupportsThreadArchive.load_thread_stub` on SQLite."""
    row = conn.execute(_SELECT_STUB, (_t(thread_id),)).fetchone()
    return None if row is None else _stub(tuple(row))


def list_stubs_txn(conn: Conn, after: str | None, limit: int) -> list[ThreadStub]:
    """`SupportsThreadArchive.list_thread_stubs` on SQLite."""
    mark = None if after is None else _t(after)
    return [_stub(tuple(row)) for row in conn.execute(_LIST_STUBS, (mark, mark, limit))]


def archive_snapshots_txn(
    conn: Conn,
    present: PresentChunks,
    stub: ThreadStub,
    *,
    moved: Collection[tuple[str, str]],
    chunks: Collection[str],
    replaces: str | None,
) -> bool:
    """`SupportsThreadArchive.archive_snapshots` on SQLite."""
    # writers are serialized: what is read here stays until the commit
    thread_id = _t(stub.thread_id)
    held = load_stub_txn(conn, stub.thread_id)
    if (None if held is None else held.key) != replaces:
        return False
    rows = [(thread_id, _t(ns), _t(cp)) for ns, cp in moved]
    if any(conn.execute(_HAS_SNAPSHOT, row).fetchone() is None for row in rows):
        return False
    conn.executemany(_DELETE_SNAPSHOT, rows)
    if chunks:
        present.forget()  # chunks go: what this store saw stored no longer counts
        conn.execute(_DELETE_RELEASED, (json.dumps(list(chunks)),))
    conn.execute(
        _PUT_STUB,
        (
            thread_id,
            stub.key,
            stub.size,
            stub.snapshots,
            stub.chunks,
            stub.archived_at_ms,
            json.dumps([list(pair) for pair in stub.newest]),
            json.dumps(list(stub.refers_to)),
        ),
    )
    return True


def restore_snapshots_txn(
    conn: Conn,
    stub: ThreadStub,
    snapshots: Sequence[SnapshotRecord],
    chunks: Mapping[str, bytes],
) -> bool:
    """`SupportsThreadArchive.restore_snapshots` on SQLite."""
    held = load_stub_txn(conn, stub.thread_id)
    if held is None or held.key != stub.key:
        return False
    conn.execute(_DELETE_STUB, (_t(stub.thread_id),))
    put_chunks_txn(conn, list(chunks.items()))
    conn.executemany(
        _RESTORE_SNAPSHOT,
        [snapshot_row(s) for s in snapshots if s.thread_id == stub.thread_id],
    )
    return True


def delete_thread_txn(conn: Conn, thread_id: str) -> int:
    """`Store.delete_thread` on SQLite: its snapshots and its stub; how many snapshots."""
    conn.execute(_DELETE_STUB, (_t(thread_id),))
    return delete_snapshots_of_thread_txn(conn, thread_id)
