"""PostgresStore's `SupportsArchive` transactions: swap a run's rows for a stub and back.

The table is `resumable_archived_runs` (migration 0003). Each function is given
a connection inside a transaction (`_txn`). Archiving locks the run row first
(`FOR UPDATE`): a lease change or a step commit, which lock it too, waits or is
waited for. Inputs are sent without that lock, so the deletes count what they
removed and roll back when it is not what the object holds.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final, LiteralString

from psycopg import AsyncConnection, Rollback, sql
from psycopg.rows import DictRow

from resumable.stores import _sql
from resumable.stores._records import converter
from resumable.stores.protocol import InputRecord, StepRecord
from resumable.stores.stubs import ArchiveStub, keys_of

_t = _sql.to_text
Conn = AsyncConnection[DictRow]

_LOCK_RUN: Final = """
SELECT 1 FROM {schema}.resumable_runs
 WHERE run_id = %s AND fence = %s AND status IN ('succeeded', 'failed', 'cancelled')
   FOR UPDATE
"""
_INSERT_STUB: Final = """
INSERT INTO {schema}.resumable_archived_runs (run_id, object_key, size, steps, inputs,
    fence, archived_at_ms, refers_to)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (run_id) DO NOTHING
"""
_DELETE_STEPS: Final = "DELETE FROM {schema}.resumable_steps WHERE run_id = %s"
_DELETE_INPUTS: Final = "DELETE FROM {schema}.resumable_inputs WHERE run_id = %s"
_SELECT_STUB: Final = """
SELECT * FROM {schema}.resumable_archived_runs WHERE run_id = %s FOR UPDATE
"""
_LOAD_STUB: Final = "SELECT * FROM {schema}.resumable_archived_runs WHERE run_id = %s"
_LIST_STUBS: Final = """
SELECT * FROM {schema}.resumable_archived_runs
 WHERE %(after)s::text IS NULL OR run_id > %(after)s::text
 ORDER BY run_id LIMIT %(limit)s
"""
_DELETE_STUB: Final = "DELETE FROM {schema}.resumable_archived_runs WHERE run_id = %s"
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


class ArchiveStatements:
    """The archive statements of one store, composed with its schema's quoted name."""

    def __init__(self, schema: str) -> None:
        name = sql.Identifier(schema)

        def compose(template: LiteralString) -> bytes:
            return sql.SQL(template).format(schema=name).as_bytes(None)

        self.lock_run = compose(_LOCK_RUN)
        self.insert_stub = compose(_INSERT_STUB)
        self.delete_steps = compose(_DELETE_STEPS)
        self.delete_inputs = compose(_DELETE_INPUTS)
        self.select_stub = compose(_SELECT_STUB)
        self.load_stub = compose(_LOAD_STUB)
        self.list_stubs = compose(_LIST_STUBS)
        self.delete_stub = compose(_DELETE_STUB)
        self.insert_steps = compose(_INSERT_STEPS)
        self.insert_inputs = compose(_INSERT_INPUTS)


async def archive_journal_txn(
    conn: Conn, statements: ArchiveStatements, stub: ArchiveStub
) -> bool:
    """`SupportsArchive.archive_journal` on PostgreSQL."""
    run_id = _t(stub.run_id)
    cur = await conn.execute(statements.lock_run, (run_id, stub.fence))
    if await cur.fetchone() is None:
        return False
    cur = await conn.execute(
        statements.insert_stub,
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
def stub_from_row(row: DictRow) -> ArchiveStub:
    """An ArchiveStub from a row of resumable_archived_runs."""
    return ArchiveStub(
        run_id=_sql.from_text(row["run_id"]),
        key=row["object_key"],
        size=row["size"],
        steps=row["steps"],
        inputs=row["inputs"],
        fence=row["fence"],
        archived_at_ms=row["archived_at_ms"],
        refers_to=keys_of(json.loads(row["refers_to"])),
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
    row = await (await conn.execute(statements.select_stub, (run_id,))).fetchone()
    if row is None or row["object_key"] != stub.key:
        return False
    await conn.execute(statements.delete_stub, (run_id,))
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
