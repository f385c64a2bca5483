"""SQLite: snapshots, their chunks and threads, as functions of one transaction.

`SQLiteStore` runs each on its connection (`SQLiteThread.call`); the `*_txn` suffix
means the function runs inside the caller's transaction.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Collection, Iterator
from typing import Any, Final

from resumable.errors import ChunksMissing
from resumable.stores import _sql, packing
from resumable.stores._records import checked_thread
from resumable.stores.protocol import SnapshotRecord, ThreadRecord

_t = _sql.to_text
Conn = sqlite3.Connection
_PRESENT_MAX: Final = 100_000  # chunk hashes a store remembers it saw stored
_PUT_CHUNK: Final = (
    "INSERT INTO resumable_chunks (hash, data) VALUES (?, ?) "
    "ON CONFLICT (hash) DO NOTHING"
)
_SELECT_CHUNKS: Final = "SELECT hash, data FROM resumable_chunks WHERE hash IN "
_SELECT_CHUNK_HASHES: Final = "SELECT hash FROM resumable_chunks WHERE hash IN "
_SNAPSHOT_COLUMNS: Final = (
    "thread_id, namespace, checkpoint_id, parent_id, manifest, chunk_refs, label, "
    "metadata, created_at_ms"
)
_INSERT_SNAPSHOT: Final = (
    f"INSERT OR REPLACE INTO resumable_snapshots ({_SNAPSHOT_COLUMNS}) "  # noqa: S608 - constant column list
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SELECT_MANIFEST: Final = (
    "SELECT manifest FROM resumable_snapshots WHERE thread_id = ? AND namespace = ? "
    "AND checkpoint_id = ?"
)


def put_chunks_txn(conn: Conn, rows: list[tuple[str, bytes]]) -> None:
    """Store chunks by hash (one already stored stays as it is)."""
    conn.executemany(_PUT_CHUNK, rows)


def get_chunks_txn(conn: Conn, hashes: list[str]) -> dict[str, bytes]:
    """The chunks stored under `hashes` (missing ones left out)."""
    return {
        row[0]: _sql.blob(row[1]) for row in _chunk_rows(conn, _SELECT_CHUNKS, hashes)
    }


def save_snapshot_txn(
    conn: Conn,
    *,
    url: str,
    present: PresentChunks,
    snapshot: SnapshotRecord,
    new_chunks: list[tuple[str, bytes]],
    older: list[str],
) -> int:
    """Save `snapshot` with its new chunks; the token is `present.add`'s."""
    token = _check_chunks_txn(conn, url, present, snapshot.thread_id, older)
    if new_chunks:
        conn.executemany(_PUT_CHUNK, new_chunks)
    conn.execute(_INSERT_SNAPSHOT, snapshot_row(snapshot))
    return token


def _check_chunks_txn(
    conn: Conn, url: str, present: PresentChunks, thread_id: str, older: list[str]
) -> int:
    """Raise ChunksMissing unless every chunk of `older` is stored; `add`'s token."""
    # writers are serialized: what this transaction finds stays until it ends
    unsure, token = present.unsure_txn(conn, older)
    # the common case: every chunk it names was seen stored, none to look up
    missing = set(unsure) - _stored_chunks(conn, unsure) if unsure else None
    if missing:
        raise ChunksMissing(
            store=url, thread_id=thread_id, hashes=tuple(sorted(missing))
        )
    return token


def load_snapshot_txn(
    conn: Conn, thread_id: str, namespace: str, checkpoint_id: str | None
) -> SnapshotRecord | None:
    """The thread's newest snapshot in `namespace`, or the one named."""
    if checkpoint_id is None:
        row = conn.execute(
            "SELECT * FROM resumable_snapshots WHERE thread_id = ? AND namespace = ? "
            "ORDER BY checkpoint_id DESC LIMIT 1",
            (_t(thread_id), _t(namespace)),
        ).fetchone()
    else:
        row = conn.execute(
            "SELECT * FROM resumable_snapshots WHERE thread_id = ? AND namespace = ? "
            "AND checkpoint_id = ?",
            (_t(thread_id), _t(namespace), _t(checkpoint_id)),
        ).fetchone()
    return None if row is None else snapshot_from_row(row)


def list_snapshots_query(
    thread_id: str, namespace: str | None, before: str | None, limit: int | None
) -> tuple[str, list[object]]:
    """The statement and parameters of `Store.list_snapshots`."""
    where: list[object] = [_t(thread_id)]
    if namespace is None:
        query = _SELECT_SNAPSHOTS_EVERY_NAMESPACE
    else:
        query = _SELECT_SNAPSHOTS
        where.append(_t(namespace))
    if before is not None:
        query += " AND checkpoint_id < ?"
        where.append(_t(before))
    query += _NEWEST_FIRST if namespace is None else _NEWEST_FIRST_IN_NAMESPACE
    where.append(-1 if limit is None else limit)
    return query, where


def select_snapshots_txn(
    conn: Conn, query: str, params: list[object]
) -> list[SnapshotRecord]:
    """The snapshots `list_snapshots_query` selects."""
    return [snapshot_from_row(row) for row in conn.execute(query, params)]


def swap_snapshots_txn(
    conn: Conn,
    *,
    url: str,
    present: PresentChunks,
    thread_id: str,
    old: list[SnapshotRecord],
    by: SnapshotRecord | None,
    new_chunks: list[tuple[str, bytes]],
) -> int | None:
    """Swap the records `old`, if all are stored as read, for `by` (or none).

    Returns `present.add`'s token, or None if it changed nothing (a record of
    `old` changed or went). Raises ChunksMissing, changing nothing, if `by`
    names a chunk neither in `new_chunks` nor stored.
    """
    # writers are serialized: rows read here stay as they are until the commit
    for record in old:
        row = conn.execute(
            _SELECT_MANIFEST,
            (_t(thread_id), _t(record.namespace), _t(record.checkpoint_id)),
        ).fetchone()
        if row is None or _sql.blob(row[0]) != record.manifest:
            return None
    keys = packing.keys_of(old)
    if by is not None and (by.namespace, by.checkpoint_id) not in keys:
        taken = conn.execute(
            _SELECT_MANIFEST, (_t(thread_id), _t(by.namespace), _t(by.checkpoint_id))
        ).fetchone()
        if taken is not None:
            return None
    given = {digest for digest, _ in new_chunks}
    older = [] if by is None else [ref for ref in by.chunk_refs if ref not in given]
    token = _check_chunks_txn(conn, url, present, thread_id, older)
    delete_snapshots_txn(conn, thread_id, keys)
    if new_chunks:
        conn.executemany(_PUT_CHUNK, new_chunks)
    if by is not None:
        conn.execute(_INSERT_SNAPSHOT, snapshot_row(by))
    return token


def delete_snapshots_txn(
    conn: Conn, thread_id: str, keys: list[tuple[str, str]]
) -> int:
    """Delete the thread's snapshots at `keys` (namespace, checkpoint_id); how many."""
    deleted = 0
    for namespace, checkpoint_id in keys:
        deleted += conn.execute(
            "DELETE FROM resumable_snapshots WHERE thread_id = ? AND namespace = ? "
            "AND checkpoint_id = ?",
            (_t(thread_id), _t(namespace), _t(checkpoint_id)),
        ).rowcount
    return deleted


def delete_thread_txn(conn: Conn, thread_id: str) -> int:
    """Delete the thread's snapshots; how many there were."""
    return conn.execute(
        "DELETE FROM resumable_snapshots WHERE thread_id = ?", (_t(thread_id),)
    ).rowcount


def list_threads_txn(conn: Conn, params: dict[str, object]) -> list[ThreadRecord]:
    """Threads newest first, after the key in `params` (see `_LIST_THREADS`)."""
    return [
        checked_thread(row["thread_id"], row["updated_at_ms"], _sql.from_text)
        for row in conn.execute(_LIST_THREADS, params)
    ]


def delete_unreferenced_chunks_txn(
    conn: Conn, present: PresentChunks, limit: int
) -> int:
    """Delete up to `limit` chunks no snapshot names; how many went."""
    present.forget()
    return conn.execute(
        "DELETE FROM resumable_chunks WHERE hash IN ("
        " SELECT c.hash FROM resumable_chunks c WHERE c.hash NOT IN ("
        "  SELECT r.value FROM resumable_snapshots s, json_each(s.chunk_refs) r)"
        " LIMIT ?)",
        (limit,),
    ).rowcount


def _in_slices(values: list[str]) -> Iterator[tuple[str, list[str]]]:
    """`values` in slices under SQLite's limit of variables per statement.

    Each comes with the "(?, ?, ...)" that follows an IN: placeholders only, the
    values are parameters.
    """
    for start in range(0, len(values), 500):
        part = values[start : start + 500]
        yield f"({', '.join('?' * len(part))})", part


def _chunk_rows(conn: Conn, select: str, hashes: list[str]) -> Iterator[Any]:
    """The rows `select` (ending in "IN ") finds for `hashes`."""
    for marks, part in _in_slices(hashes):
        yield from conn.execute(select + marks, part)


# one row per thread, grouped off the primary key's (thread_id, ...) order
_LIST_THREADS: Final = """
SELECT thread_id, max(created_at_ms) AS updated_at_ms FROM resumable_snapshots
 WHERE :prefix IS NULL OR substr(thread_id, 1, length(:prefix)) = :prefix
 GROUP BY thread_id
HAVING :after_ms IS NULL OR (max(created_at_ms), thread_id) < (:after_ms, :after_id)
 ORDER BY updated_at_ms DESC, thread_id DESC
 LIMIT :limit
"""
# list_snapshots' four queries, each of constant text: one namespace's rows are a
# range of the primary key, read newest first without a sort and without reading
# the thread's other rows (a pack's manifest among them), which a condition like
# "(? IS NULL OR namespace = ?)" would make SQLite scan and sort
_SELECT_SNAPSHOTS: Final = (
    "SELECT * FROM resumable_snapshots WHERE thread_id = ? AND namespace = ?"
)
_SELECT_SNAPSHOTS_EVERY_NAMESPACE: Final = (
    "SELECT * FROM resumable_snapshots WHERE thread_id = ?"
)
_NEWEST_FIRST_IN_NAMESPACE: Final = " ORDER BY checkpoint_id DESC LIMIT ?"
_NEWEST_FIRST: Final = " ORDER BY checkpoint_id DESC, namespace DESC LIMIT ?"


def snapshot_row(snapshot: SnapshotRecord) -> tuple[object, ...]:
    """`_INSERT_SNAPSHOT`'s parameters."""
    return (
        _t(snapshot.thread_id),
        _t(snapshot.namespace),
        _t(snapshot.checkpoint_id),
        _sql.maybe_text(snapshot.parent_id),
        snapshot.manifest,
        json.dumps(list(snapshot.chunk_refs)),
        _sql.maybe_text(snapshot.label),
        snapshot.metadata,
        snapshot.created_at_ms,
    )


def _stored_chunks(conn: Conn, hashes: list[str]) -> set[str]:
    """Which of `hashes` the chunks table holds."""
    return {row[0] for row in _chunk_rows(conn, _SELECT_CHUNK_HASHES, hashes)}


class PresentChunks:
    """The chunks a store saw stored, which its next saves need not look up.

    A save must not name a chunk that a collection deleted (`ChunksMissing`). Looked
    up in the save's transaction, each named chunk costs an index lookup, slow in
    a busy process whose caches are cold (a LangGraph step names two or three).
    Chunks go only by `delete_unreferenced_chunks`. One this store runs forgets
    them all (`forget`, in its transaction). One that another connection commits
    (the store thread's, another process's `resumable gc`) changes `PRAGMA
    data_version` on this one, which `unsure_txn` reads in the save's transaction:
    what was seen before is then looked up again.
    """

    def __init__(self) -> None:
        self._hashes: set[str] = set()
        self._seen: tuple[Conn, int] | None = None  # the connection and its version
        self._generation = 0  # bumped by `forget`: a save that began before adds none
        self._lock = threading.Lock()

    def unsure_txn(self, conn: Conn, refs: list[str]) -> tuple[list[str], int]:
        """Which of `refs` to look up in this transaction, and a token for `add`."""
        if not refs:
            return refs, self._generation
        (version,) = conn.execute("PRAGMA data_version").fetchone()
        with self._lock:
            if self._seen != (conn, version):
                self._hashes.clear()
                self._seen = (conn, version)
            return [ref for ref in refs if ref not in self._hashes], self._generation

    def add(self, token: int, hashes: Collection[str]) -> None:
        """Note `hashes` as stored by a save that committed (`token`: its unsure_txn's)."""
        with self._lock:
            if token != self._generation:
                return  # a collection ran meanwhile
            if len(self._hashes) + len(hashes) > _PRESENT_MAX:
                self._hashes.clear()
            self._hashes.update(hashes)

    def forget(self) -> None:
        """Chunks are being deleted: nothing seen before counts any more."""
        with self._lock:
            self._generation += 1
            self._hashes.clear()


def snapshot_from_row(row: sqlite3.Row) -> SnapshotRecord:
    """The record a `resumable_snapshots` row holds."""
    return _sql.snapshot_from_row(row, row["chunk_refs"])
