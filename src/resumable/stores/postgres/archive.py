"""PostgreSQL: archiving runs and threads, their rows swapped for a stub and back.

A run's journal (steps, inputs) or a thread's older snapshots move to an object
(RCOLD1/RCOLDT1, written by `resumable.stores.archive`); its rows here are
swapped for a stub in `resumable_archived_runs` (migration 0003) or
`resumable_archived_threads` (0004), and back on restore. Each `_txn` function is
given a connection inside a transaction.

Runs: archiving locks the run row first (`FOR UPDATE`): a lease change or a step
commit, which lock it too, waits or is waited for. Inputs are sent without that
lock, so the deletes count what they removed and roll back when it is not what
the object holds.

Threads: archiving locks the references table (`resumable_snapshot_chunks`) in
SHARE ROW EXCLUSIVE mode, then the stub's row: saves (which check that the chunks
they name exist, holding ROW EXCLUSIVE) wait for it or are waited for, so a chunk
it deletes is never named by a save that commits, and two archivers take turns.
Deletes count what they removed and roll back when a snapshot named is gone.

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
from collections.abc import Mapping, Sequence
from typing import Any, Final

from psycopg import Rollback
from psycopg.rows import DictRow

from resumable.stores import _sql
from resumable.stores._records import converter
from resumable.stores.postgres.connection import Conn, composer
from resumable.stores.postgres.snapshots import snapshot_params
from resumable.stores.protocol import InputRecord, SnapshotRecord, StepRecord
from resumable.stores.stubs import (
    ArchiveStub,
    ThreadStub,
    keys_of,
    most_run_refs,
    most_thread_refs,
    namespaces_of,
)

_t = _sql.to_text

# the archive of runs, in resumable_archived_runs
_LOCK_RUN: Final = """
SELECT 1 FROM {schema}.resumable_runs
 WHERE run_id = %s AND fence = %s AND status IN ('succeeded', 'failed', 'cancelled')
   FOR UPDATE
"""
_INSERT_RUN_STUB: Final = """
INSERT INTO {schema}.resumable_archived_runs (run_id, object_key, size, steps, inputs,
    fence, archived_at_ms, refers_to)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (run_id) DO NOTHING
"""
_DELETE_STEPS: Final = "DELETE FROM {schema}.resumable_steps WHERE run_id = %s"
_DELETE_INPUTS: Final = "DELETE FROM {schema}.resumable_inputs WHERE run_id = %s"
_SELECT_RUN_STUB: Final = """
SELECT * FROM {schema}.resumable_archived_runs WHERE run_id = %s FOR UPDATE
"""
_LOAD_RUN_STUB: Final = (
    "SELECT * FROM {schema}.resumable_archived_runs WHERE run_id = %s"
)
_LIST_RUN_STUBS: Final = """
SELECT * FROM {schema}.resumable_archived_runs
 WHERE %(after)s::text IS NULL OR run_id > %(after)s::text
 ORDER BY run_id LIMIT %(limit)s
"""
_DELETE_RUN_STUB: Final = (
    "DELETE FROM {schema}.resumable_archived_runs WHERE run_id = %s"
)
_INSERT_STEPS: Final = """
INSERT INTO {schema}.resumable_steps (run_id, seq, name, fingerprint, status, output,
    attempts, started_at_ms, finished_at_ms, usage)
SELECT * FROM unnest(%s::text[], %s::bigint[], %s::text[], %s::text[], %s::text[],
    %s::bytea[], %s::integer[], %s::bigint[], %s::bigint[], %s::bytea[])
ON CONFLICT (run_id, seq) DO NOTHING
"""
_INSERT_INPUTS: Final = """
INSERT INTO {schema}.resumable_inputs (run_id, key, value, sent_at_ms)
SELECT * FROM unnest(%s::text[], %s::text[], %s::bytea[], %s::bigint[])
ON CONFLICT (run_id, key) DO NOTHING
"""
# the archive of threads, in resumable_archived_threads
_SELECT_THREAD_STUB: Final = """
SELECT * FROM {schema}.resumable_archived_threads WHERE thread_id = %s FOR UPDATE
"""
_LOAD_THREAD_STUB: Final = (
    "SELECT * FROM {schema}.resumable_archived_threads WHERE thread_id = %s"
)
_LIST_THREAD_STUBS: Final = """
SELECT * FROM {schema}.resumable_archived_threads
 WHERE %(after)s::text IS NULL OR thread_id > %(after)s::text
 ORDER BY thread_id LIMIT %(limit)s
"""
_PUT_THREAD_STUB: Final = """
INSERT INTO {schema}.resumable_archived_threads (thread_id, object_key, size,
    snapshots, chunks, archived_at_ms, newest, refers_to)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (thread_id) DO UPDATE
   SET object_key = EXCLUDED.object_key, size = EXCLUDED.size,
       snapshots = EXCLUDED.snapshots, chunks = EXCLUDED.chunks,
       archived_at_ms = EXCLUDED.archived_at_ms, newest = EXCLUDED.newest,
       refers_to = EXCLUDED.refers_to
"""
_DELETE_THREAD_STUB: Final = (
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


class ArchiveStatements:
    """The run and thread archive statements of one store, composed with its schema."""

    def __init__(self, schema: str) -> None:
        compose = composer(schema)
        self.lock_run = compose(_LOCK_RUN)
        self.insert_run_stub = compose(_INSERT_RUN_STUB)
        self.delete_steps = compose(_DELETE_STEPS)
        self.delete_inputs = compose(_DELETE_INPUTS)
        self.select_run_stub = compose(_SELECT_RUN_STUB)
        self.load_run_stub = compose(_LOAD_RUN_STUB)
        self.list_run_stubs = compose(_LIST_RUN_STUBS)
        self.delete_run_stub = compose(_DELETE_RUN_STUB)
        self.insert_steps = compose(_INSERT_STEPS)
        self.insert_inputs = compose(_INSERT_INPUTS)
        self.select_thread_stub = compose(_SELECT_THREAD_STUB)
        self.load_thread_stub = compose(_LOAD_THREAD_STUB)
        self.list_thread_stubs = compose(_LIST_THREAD_STUBS)
        self.put_thread_stub = compose(_PUT_THREAD_STUB)
        self.delete_thread_stub = compose(_DELETE_THREAD_STUB)
        self.lock_references = compose(_LOCK_REFERENCES)
        self.lock_references_to_write = compose(_LOCK_REFERENCES_TO_WRITE)
        self.delete_references = compose(_DELETE_REFERENCES)
        self.delete_snapshots = compose(_DELETE_SNAPSHOTS)
        self.delete_released = compose(_DELETE_RELEASED)
        self.put_chunks = compose(_PUT_CHUNKS)
        self.restore_snapshot = compose(_RESTORE_SNAPSHOT)


async def archive_journal_txn(
    conn: Conn, statements: ArchiveStatements, stub: ArchiveStub
) -> bool:
    """`SupportsArchive.archive_journal` on PostgreSQL."""
    run_id = _t(stub.run_id)
    cur = await conn.execute(statements.lock_run, (run_id, stub.fence))
    if await cur.fetchone() is None:
        return False
    cur = await conn.execute(
        statements.insert_run_stub,
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
    if cur.rowcount != 1:
        return False  # archived already
    steps = (await conn.execute(statements.delete_steps, (run_id,))).rowcount
    inputs = (await conn.execute(statements.delete_inputs, (run_id,))).rowcount
    if (steps, inputs) != (stub.steps, stub.inputs):
        raise Rollback  # something was added since it was read: keep the rows
    return True


@converter("archive stub", lambda row: f"run {row['run_id']!r} archive stub")
def run_stub_from_row(row: DictRow) -> ArchiveStub:
    """An ArchiveStub from a row of resumable_archived_runs."""
    return ArchiveStub(
        run_id=_sql.from_text(row["run_id"]),
        key=row["object_key"],
        size=row["size"],
        steps=row["steps"],
        inputs=row["inputs"],
        fence=row["fence"],
        archived_at_ms=row["archived_at_ms"],
        refers_to=keys_of(
            row["refers_to"], most=most_run_refs(row["steps"], row["inputs"])
        ),
    )


async def restore_journal_txn(
    conn: Conn,
    statements: ArchiveStatements,
    stub: ArchiveStub,
    steps: Sequence[StepRecord],
    inputs: Sequence[InputRecord],
) -> bool:
    """`SupportsArchive.restore_journal` on PostgreSQL."""
    run_id = _t(stub.run_id)
    row = await (await conn.execute(statements.select_run_stub, (run_id,))).fetchone()
    if row is None or row["object_key"] != stub.key:
        return False
    await conn.execute(statements.delete_run_stub, (run_id,))
    if steps:
        values = [_sql.step_values(step) for step in steps]
        columns: list[list[Any]] = [
            list(column) for column in zip(*values, strict=True)
        ]
        await conn.execute(statements.insert_steps, columns)
    if inputs:
        await conn.execute(
            statements.insert_inputs,
            (
                [run_id] * len(inputs),
                [_t(r.key) for r in inputs],
                [r.value for r in inputs],
                [r.sent_at_ms for r in inputs],
            ),
        )
    return True


@converter("thread archive stub", lambda row: f"thread {row['thread_id']!r} stub")
def thread_stub_from_row(row: DictRow) -> ThreadStub:
    """A ThreadStub from a row of resumable_archived_threads."""
    return ThreadStub(
        thread_id=_sql.from_text(row["thread_id"]),
        key=row["object_key"],
        size=row["size"],
        snapshots=row["snapshots"],
        chunks=row["chunks"],
        archived_at_ms=row["archived_at_ms"],
        newest=namespaces_of(json.loads(row["newest"])),
        refers_to=keys_of(
            row["refers_to"], most=most_thread_refs(row["snapshots"], row["chunks"])
        ),
    )


def _thread_stub_row(stub: ThreadStub) -> tuple[object, ...]:
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


async def _held_key(conn: Conn, statements: ArchiveStatements, thread: str) -> Any:
    row = await (
        await conn.execute(statements.select_thread_stub, (thread,))
    ).fetchone()
    return None if row is None else row["object_key"]


async def archive_snapshots_txn(
    conn: Conn,
    statements: ArchiveStatements,
    stub: ThreadStub,
    *,
    moved: Sequence[tuple[str, str]],
    chunks: list[str],
    replaces: str | None,
) -> bool:
    """`SupportsThreadArchive.archive_snapshots` on PostgreSQL."""
    thread = _t(stub.thread_id)
    await conn.execute(statements.lock_references)
    if await _held_key(conn, statements, thread) != replaces:
        return False
    where = {
        "thread_id": thread,
        "namespaces": [_t(ns) for ns, _ in moved],
        "ids": [_t(cp) for _, cp in moved],
    }
    await conn.execute(statements.delete_references, where)
    gone = (await conn.execute(statements.delete_snapshots, where)).rowcount
    if gone != len(set(moved)):
        raise Rollback  # one was deleted or packed since it was read: keep them all
    if chunks:
        await conn.execute(statements.delete_released, (chunks,))
    await conn.execute(statements.put_thread_stub, _thread_stub_row(stub))
    return True


async def restore_snapshots_txn(
    conn: Conn,
    statements: ArchiveStatements,
    stub: ThreadStub,
    snapshots: Sequence[SnapshotRecord],
    chunks: Mapping[str, bytes],
) -> bool:
    """`SupportsThreadArchive.restore_snapshots` on PostgreSQL."""
    thread = _t(stub.thread_id)
    await conn.execute(
        statements.lock_references_to_write
    )  # the order: see the module doc
    if await _held_key(conn, statements, thread) != stub.key:
        return False
    await conn.execute(statements.delete_thread_stub, (thread,))
    if chunks:
        await conn.execute(statements.put_chunks, (list(chunks), list(chunks.values())))
    async with conn.cursor() as cur:
        await cur.executemany(
            statements.restore_snapshot,
            [snapshot_params(s) for s in snapshots if s.thread_id == stub.thread_id],
        )
    return True
