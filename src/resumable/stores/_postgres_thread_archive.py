"""PostgresStore's `SupportsThreadArchive`: a thread's older snapshots swapped for a stub.

The table is `resumable_archived_threads` (migration 0004). `ThreadArchiveMethods`
is mixed into `PostgresStore`, whose connections it borrows.

Archiving locks the references table (`resumable_snapshot_chunks`) in SHARE ROW
EXCLUSIVE mode, then the stub's row: saves (which check that the chunks they name
exist, holding ROW EXCLUSIVE) wait for it or are waited for, so a chunk it deletes
is never named by a save that commits, and two archivers take turns. Deletes
count what they removed and roll back when a snapshot named is gone.

Lock order, so that no two of these wait for each other: every writer that
touches both takes the references table before any row lock. Restoring takes it
first in ROW EXCLUSIVE mode (what its inserts need anyway), then the stub's row;
the packer's swap and a save are one statement each, and PostgreSQL takes a
statement's table locks when it starts, before the rows it locks as it runs; a
collection of chunks takes the table alone. An archive and a restore of one
thread therefore wait at the table, never one on the table and the other on
the stub (`tests/stores/test_thread_archive_locks.py` forces that interleaving).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, LiteralString

from psycopg import AsyncConnection, Rollback, sql
from psycopg.rows import DictRow

from resumable.stores import _sql
from resumable.stores._postgres_snapshot_sql import snapshot_params
from resumable.stores._records import converter
from resumable.stores.protocol import SnapshotRecord
from resumable.stores.stubs import ThreadStub, keys_of, namespaces_of

_t = _sql.to_text
Conn = AsyncConnection[DictRow]

_SELECT_STUB: Final = """
SELECT * FROM {schema}.resumable_archived_threads WHERE thread_id = %s FOR UPDATE
"""
_LOAD_STUB: Final = (
    "SELECT * FROM {schema}.resumable_archived_threads WHERE thread_id = %s"
)
_LIST_STUBS: Final = """
SELECT * FROM {schema}.resumable_archived_threads
 WHERE %(after)s::text IS NULL OR thread_id > %(after)s::text
 ORDER BY thread_id LIMIT %(limit)s
"""
_PUT_STUB: Final = """
INSERT INTO {schema}.resumable_archived_threads (thread_id, object_key, size,
    snapshots, chunks, archived_at_ms, newest, refers_to)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (thread_id) DO UPDATE
   SET object_key = EXCLUDED.object_key, size = EXCLUDED.size,
       snapshots = EXCLUDED.snapshots, chunks = EXCLUDED.chunks,
       archived_at_ms = EXCLUDED.archived_at_ms, newest = EXCLUDED.newest,
       refers_to = EXCLUDED.refers_to
"""
_DELETE_STUB: Final = (
    "DELETE FROM {schema}.resumable_archived_threads WHERE thread_id = %s"
)
_LOCK_REFERENCES: Final = (
    "LOCK TABLE {schema}.resumable_snapshot_chunks IN SHARE ROW EXCLUSIVE MODE"
)
_LOCK_REFERENCES_TO_WRITE: Final = (
    "LOCK TABLE {schema}.resumable_snapshot_chunks IN ROW EXCLUSIVE MODE"
)
_DELETE_REFERENCES: Final = """
DELETE FROM {schema}.resumable_snapshot_chunks r
 USING unnest(%(namespaces)s::text[], %(ids)s::text[]) AS m(ns, cp)
 WHERE r.thread_id = %(thread_id)s AND r.namespace = m.ns AND r.checkpoint_id = m.cp
"""
_DELETE_SNAPSHOTS: Final = """
DELETE FROM {schema}.resumable_snapshots s
 USING unnest(%(namespaces)s::text[], %(ids)s::text[]) AS m(ns, cp)
 WHERE s.thread_id = %(thread_id)s AND s.namespace = m.ns AND s.checkpoint_id = m.cp
"""
_DELETE_RELEASED: Final = """
DELETE FROM {schema}.resumable_chunks c
 WHERE c.hash = ANY(%s::text[])
   AND NOT EXISTS (SELECT 1 FROM {schema}.resumable_snapshot_chunks r
                    WHERE r.hash = c.hash)
"""
_PUT_CHUNKS: Final = """
INSERT INTO {schema}.resumable_chunks (hash, data)
SELECT * FROM unnest(%s::text[], %s::bytea[]) ON CONFLICT (hash) DO NOTHING
"""
_RESTORE_SNAPSHOT: Final = """
WITH saved AS (
    INSERT INTO {schema}.resumable_snapshots (thread_id, namespace, checkpoint_id,
        parent_id, manifest, label, metadata, created_at_ms)
    VALUES (%(thread_id)s, %(namespace)s, %(checkpoint_id)s, %(parent_id)s,
        %(manifest)s, %(label)s, %(metadata)s::bytea, %(created_at_ms)s)
    ON CONFLICT (thread_id, namespace, checkpoint_id) DO NOTHING
    RETURNING 1
)
INSERT INTO {schema}.resumable_snapshot_chunks (thread_id, namespace,
    checkpoint_id, hash)
SELECT %(thread_id)s, %(namespace)s, %(checkpoint_id)s, h
  FROM unnest(%(chunk_refs)s::text[]) AS h
 WHERE EXISTS (SELECT 1 FROM saved)
ON CONFLICT DO NOTHING
"""


class ThreadArchiveStatements:
    """The thread archive statements of one store, composed with its schema's name."""

    def __init__(self, schema: str) -> None:
        name = sql.Identifier(schema)

        def compose(template: LiteralString) -> bytes:
            return sql.SQL(template).format(schema=name).as_bytes(None)

        self.select_stub = compose(_SELECT_STUB)
        self.load_stub = compose(_LOAD_STUB)
        self.list_stubs = compose(_LIST_STUBS)
        self.put_stub = compose(_PUT_STUB)
        self.delete_stub = compose(_DELETE_STUB)
        self.lock_references = compose(_LOCK_REFERENCES)
        self.lock_references_to_write = compose(_LOCK_REFERENCES_TO_WRITE)
        self.delete_references = compose(_DELETE_REFERENCES)
        self.delete_snapshots = compose(_DELETE_SNAPSHOTS)
        self.delete_released = compose(_DELETE_RELEASED)
        self.put_chunks = compose(_PUT_CHUNKS)
        self.restore_snapshot = compose(_RESTORE_SNAPSHOT)


@converter("thread archive stub", lambda row: f"thread {row['thread_id']!r} stub")
def stub_from_row(row: DictRow) -> ThreadStub:
    """A ThreadStub from a row of resumable_archived_threads."""
    return ThreadStub(
        thread_id=_sql.from_text(row["thread_id"]),
        key=row["object_key"],
        size=row["size"],
        snapshots=row["snapshots"],
        chunks=row["chunks"],
        archived_at_ms=row["archived_at_ms"],
        newest=namespaces_of(json.loads(row["newest"])),
        refers_to=keys_of(json.loads(row["refers_to"])),
    )


def _stub_row(stub: ThreadStub) -> tuple[object, ...]:
    return (
        _t(stub.thread_id),
        stub.key,
        stub.size,
        stub.snapshots,
        stub.chunks,
        stub.archived_at_ms,
        json.dumps([list(pair) for pair in stub.newest]),
        json.dumps(list(stub.refers_to)),
    )


async def _held_key(conn: Conn, sqls: ThreadArchiveStatements, thread: str) -> Any:
    row = await (await conn.execute(sqls.select_stub, (thread,))).fetchone()
    return None if row is None else row["object_key"]


async def archive_snapshots_txn(
    conn: Conn,
    sqls: ThreadArchiveStatements,
    stub: ThreadStub,
    *,
    moved: Sequence[tuple[str, str]],
    chunks: list[str],
    replaces: str | None,
) -> bool:
    """`SupportsThreadArchive.archive_snapshots` on PostgreSQL."""
    thread = _t(stub.thread_id)
    await conn.execute(sqls.lock_references)
    if await _held_key(conn, sqls, thread) != replaces:
        return False
    where = {
        "thread_id": thread,
        "namespaces": [_t(ns) for ns, _ in moved],
        "ids": [_t(cp) for _, cp in moved],
    }
    await conn.execute(sqls.delete_references, where)
    gone = (await conn.execute(sqls.delete_snapshots, where)).rowcount
    if gone != len(set(moved)):
        raise Rollback  # one was deleted or packed since it was read: keep them all
    if chunks:
        await conn.execute(sqls.delete_released, (chunks,))
    await conn.execute(sqls.put_stub, _stub_row(stub))
    return True


async def restore_snapshots_txn(
    conn: Conn,
    sqls: ThreadArchiveStatements,
    stub: ThreadStub,
    snapshots: Sequence[SnapshotRecord],
    chunks: Mapping[str, bytes],
) -> bool:
    """`SupportsThreadArchive.restore_snapshots` on PostgreSQL."""
    thread = _t(stub.thread_id)
    await conn.execute(sqls.lock_references_to_write)  # the order: see the module
    if await _held_key(conn, sqls, thread) != stub.key:
        return False
    await conn.execute(sqls.delete_stub, (thread,))
    if chunks:
        await conn.execute(sqls.put_chunks, (list(chunks), list(chunks.values())))
    async with conn.cursor() as cur:
        await cur.executemany(
            sqls.restore_snapshot,
            [snapshot_params(s) for s in snapshots if s.thread_id == stub.thread_id],
        )
    return True


class ThreadArchiveMethods:
    """`SupportsThreadArchive` for `PostgresStore`, which provides `_connection`."""

    _thread_sql: ThreadArchiveStatements

    def _connection(
        self, *, run_id: str | None = None, seq: int | None = None
    ) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError  # pragma: no cover - PostgresStore's

    async def archive_snapshots(
        self,
        stub: ThreadStub,
        *,
        moved: Collection[tuple[str, str]],
        chunks: Collection[str],
        replaces: str | None,
    ) -> bool:
        done = False
        async with self._connection() as conn:
            async with conn.transaction():
                done = await archive_snapshots_txn(
                    conn,
                    self._thread_sql,
                    stub,
                    moved=list(moved),
                    chunks=list(chunks),
                    replaces=replaces,
                )
            return done

    async def load_thread_stub(self, thread_id: str) -> ThreadStub | None:
        async with self._connection() as conn:
            cur = await conn.execute(self._thread_sql.load_stub, (_t(thread_id),))
            row = await cur.fetchone()
        return None if row is None else stub_from_row(row)

    async def restore_snapshots(
        self,
        stub: ThreadStub,
        snapshots: Sequence[SnapshotRecord],
        chunks: Mapping[str, bytes],
    ) -> bool:
        async with self._connection() as conn, conn.transaction():
            return await restore_snapshots_txn(
                conn, self._thread_sql, stub, snapshots, chunks
            )

    async def list_thread_stubs(
        self, *, after: str | None, limit: int
    ) -> list[ThreadStub]:
        params = {"after": None if after is None else _t(after), "limit": limit}
        async with self._connection() as conn:
            cur = await conn.execute(self._thread_sql.list_stubs, params)
            rows = await cur.fetchall()
        return [stub_from_row(row) for row in rows]
