"""SQLiteStore's archive transactions: rows swapped for a stub and back.

A run's journal and inputs, or a thread's older snapshots, give way to a stub
naming the archive object that holds them; restoring puts them back.

`SupportsArchive` (runs: table `resumable_archived_runs`, migration 0004) and
`SupportsThreadArchive` (threads: `resumable_archived_threads`, migration 0005).
Each function runs inside the caller's transaction (`_txn`), on the store's
connection.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Mapping, Sequence
from typing import Final

from resumable.stores import _sql
from resumable.stores._records import converter
from resumable.stores.protocol import InputRecord, SnapshotRecord, StepRecord
from resumable.stores.sqlite import snapshots as _snapshots
from resumable.stores.stubs import (
    ArchiveStub,
    ThreadStub,
    keys_of,
    most_run_refs,
    most_thread_refs,
    namespaces_of,
)

_t = _sql.to_text
Conn = sqlite3.Connection

# --- runs (SupportsArchive) ---------------------------------------------------------
_RUN_STUB_COLUMNS: Final = (
    "run_id, object_key, size, steps, inputs, fence, archived_at_ms, refers_to"
)
# the guard and the counts in one statement: finished, same fence, no stub yet
_RUN_GUARD: Final = """
SELECT 1 FROM resumable_runs r
 WHERE r.run_id = ? AND r.fence = ? AND r.status IN ('succeeded', 'failed', 'cancelled')
   AND NOT EXISTS (SELECT 1 FROM resumable_archived_runs a WHERE a.run_id = r.run_id)
   AND (SELECT count(*) FROM resumable_steps s WHERE s.run_id = r.run_id) = ?
   AND (SELECT count(*) FROM resumable_inputs i WHERE i.run_id = r.run_id) = ?
"""
_INSERT_RUN_STUB: Final = (
    f"INSERT INTO resumable_archived_runs ({_RUN_STUB_COLUMNS}) "  # noqa: S608 - constant columns
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_SELECT_RUN_STUB: Final = (
    f"SELECT {_RUN_STUB_COLUMNS} FROM resumable_archived_runs WHERE run_id = ?"  # noqa: S608 - constant columns
)
_LIST_RUN_STUBS: Final = (
    f"SELECT {_RUN_STUB_COLUMNS} FROM resumable_archived_runs "  # noqa: S608 - constant columns
    "ORDER BY run_id LIMIT ?"
)
_LIST_RUN_STUBS_AFTER: Final = (
    f"SELECT {_RUN_STUB_COLUMNS} FROM resumable_archived_runs "  # noqa: S608 - constant columns
    "WHERE run_id > ? ORDER BY run_id LIMIT ?"
)
_INSERT_STEP: Final = (
    f"INSERT OR IGNORE INTO resumable_steps ({', '.join(_sql.STEP_COLUMNS)}) "  # noqa: S608 - constant columns
    f"VALUES ({', '.join('?' * len(_sql.STEP_COLUMNS))})"
)
_INSERT_INPUT: Final = (
    "INSERT OR IGNORE INTO resumable_inputs (run_id, key, value, sent_at_ms) "
    "VALUES (?, ?, ?, ?)"
)
DELETE_RUN_STUBS: Final = (
    "DELETE FROM resumable_archived_runs WHERE run_id IN ({marks})"
)
"""Run by `delete_runs` with the runs it deletes."""


def archive_journal_txn(conn: Conn, stub: ArchiveStub) -> bool:
    """`SupportsArchive.archive_journal` on SQLite."""
    run_id = _t(stub.run_id)
    guard = (run_id, stub.fence, stub.steps, stub.inputs)
    if conn.execute(_RUN_GUARD, guard).fetchone() is None:
        return False
    conn.execute("DELETE FROM resumable_steps WHERE run_id = ?", (run_id,))
    conn.execute("DELETE FROM resumable_inputs WHERE run_id = ?", (run_id,))
    conn.execute(
        _INSERT_RUN_STUB,
        (
            run_id,
            stub.key,
            stub.size,
            stub.steps,
            stub.inputs,
            stub.fence,
            stub.archived_at_ms,
            json.dumps(list(stub.refers_to)),
        ),
    )
    return True


@converter("archive stub", lambda row: f"run {row[0]!r} archive stub")
def _run_stub(row: Sequence[object]) -> ArchiveStub:
    run_id, key, size, steps, inputs, fence, archived, refers_to = row
    records, values = int(str(steps)), int(str(inputs))
    return ArchiveStub(
        run_id=_sql.from_text(str(run_id)),
        key=str(key),
        size=int(str(size)),
        steps=records,
        inputs=values,
        fence=int(str(fence)),
        archived_at_ms=int(str(archived)),
        refers_to=keys_of(str(refers_to), most=most_run_refs(records, values)),
    )


def load_run_stub_txn(conn: Conn, run_id: str) -> ArchiveStub | None:
    """`SupportsArchive.load_archive_stub` on SQLite."""
    row = conn.execute(_SELECT_RUN_STUB, (_t(run_id),)).fetchone()
    return None if row is None else _run_stub(tuple(row))


def list_run_stubs_txn(conn: Conn, after: str | None, limit: int) -> list[ArchiveStub]:
    """`SupportsArchive.list_archive_stubs` on SQLite."""
    if after is None:
        rows = conn.execute(_LIST_RUN_STUBS, (limit,))
    else:
        rows = conn.execute(_LIST_RUN_STUBS_AFTER, (_t(after), limit))
    return [_run_stub(tuple(row)) for row in rows]


def restore_journal_txn(
    conn: Conn,
    stub: ArchiveStub,
    steps: Sequence[StepRecord],
    inputs: Sequence[InputRecord],
) -> bool:
    """`SupportsArchive.restore_journal` on SQLite."""
    held = load_run_stub_txn(conn, stub.run_id)
    if held is None or held.key != stub.key:
        return False
    conn.execute(
        "DELETE FROM resumable_archived_runs WHERE run_id = ?", (_t(stub.run_id),)
    )
    conn.executemany(_INSERT_STEP, [_sql.step_values(step) for step in steps])
    conn.executemany(
        _INSERT_INPUT,
        [
            (_t(r.run_id), _t(r.key), r.value, r.sent_at_ms)
            for r in inputs
            if r.run_id == stub.run_id
        ],
    )
    return True


# --- threads (SupportsThreadArchive) -------------------------------------------------
_THREAD_STUB_COLUMNS: Final = (
    "thread_id, object_key, size, snapshots, chunks, archived_at_ms, newest, refers_to"
)
_PUT_THREAD_STUB: Final = (
    f"INSERT OR REPLACE INTO resumable_archived_threads ({_THREAD_STUB_COLUMNS}) "  # noqa: S608 - constant columns
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_SELECT_THREAD_STUB: Final = (
    f"SELECT {_THREAD_STUB_COLUMNS} FROM resumable_archived_threads WHERE thread_id = ?"  # noqa: S608 - constant columns
)
_LIST_THREAD_STUBS: Final = (
    f"SELECT {_THREAD_STUB_COLUMNS} FROM resumable_archived_threads "  # noqa: S608 - constant columns
    "WHERE ? IS NULL OR thread_id > ? ORDER BY thread_id LIMIT ?"
)
_DELETE_THREAD_STUB: Final = (
    "DELETE FROM resumable_archived_threads WHERE thread_id = ?"
)
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
def _thread_stub(row: Sequence[object]) -> ThreadStub:
    thread_id, key, size, snapshots, chunks, archived, newest, refers_to = row
    held, pieces = int(str(snapshots)), int(str(chunks))
    return ThreadStub(
        thread_id=_sql.from_text(str(thread_id)),
        key=str(key),
        size=int(str(size)),
        snapshots=held,
        chunks=pieces,
        archived_at_ms=int(str(archived)),
        newest=namespaces_of(json.loads(str(newest))),
        refers_to=keys_of(str(refers_to), most=most_thread_refs(held, pieces)),
    )


def load_thread_stub_txn(conn: Conn, thread_id: str) -> ThreadStub | None:
    """`SupportsThreadArchive.load_thread_stub` on SQLite."""
    row = conn.execute(_SELECT_THREAD_STUB, (_t(thread_id),)).fetchone()
    return None if row is None else _thread_stub(tuple(row))


def list_thread_stubs_txn(
    conn: Conn, after: str | None, limit: int
) -> list[ThreadStub]:
    """`SupportsThreadArchive.list_thread_stubs` on SQLite."""
    mark = None if after is None else _t(after)
    return [
        _thread_stub(tuple(row))
        for row in conn.execute(_LIST_THREAD_STUBS, (mark, mark, limit))
    ]


def archive_snapshots_txn(
    conn: Conn,
    present: _snapshots.PresentChunks,
    stub: ThreadStub,
    *,
    moved: Collection[tuple[str, str]],
    chunks: Collection[str],
    replaces: str | None,
) -> bool:
    """`SupportsThreadArchive.archive_snapshots` on SQLite."""
    # writers are serialized: what is read here stays until the commit
    thread_id = _t(stub.thread_id)
    held = load_thread_stub_txn(conn, stub.thread_id)
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
        _PUT_THREAD_STUB,
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
    held = load_thread_stub_txn(conn, stub.thread_id)
    if held is None or held.key != stub.key:
        return False
    conn.execute(_DELETE_THREAD_STUB, (_t(stub.thread_id),))
    _snapshots.put_chunks_txn(conn, list(chunks.items()))
    conn.executemany(
        _RESTORE_SNAPSHOT,
        [
            _snapshots.snapshot_row(s)
            for s in snapshots
            if s.thread_id == stub.thread_id
        ],
    )
    return True


def delete_thread_txn(conn: Conn, thread_id: str) -> int:
    """`Store.delete_thread` on SQLite: its snapshots and its stub; how many snapshots."""
    conn.execute(_DELETE_THREAD_STUB, (_t(thread_id),))
    return _snapshots.delete_thread_txn(conn, thread_id)
