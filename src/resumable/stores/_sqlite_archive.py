"""SQLiteStore's `SupportsArchive` transactions: swap a run's rows for a stub and back.

Each function runs inside the caller's transaction (`_txn`), on the store's
connection; the table is `resumable_archived_runs` (migration 0004).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Final

from resumable.stores import _sql
from resumable.stores._records import converter
from resumable.stores.protocol import InputRecord, StepRecord
from resumable.stores.stubs import ArchiveStub, keys_of

_t = _sql.to_text
Conn = sqlite3.Connection

_STUB_COLUMNS: Final = (
    "run_id, object_key, size, steps, inputs, fence, archived_at_ms, refers_to"
)
# the guard and the counts in one statement: finished, same fence, no stub yet
_GUARD: Final = """
SELECT 1 FROM resumable_runs r
 WHERE r.run_id = ? AND r.fence = ? AND r.status IN ('succeeded', 'failed', 'cancelled')
   AND NOT EXISTS (SELECT 1 FROM resumable_archived_runs a WHERE a.run_id = r.run_id)
   AND (SELECT count(*) FROM resumable_steps s WHERE s.run_id = r.run_id) = ?
   AND (SELECT count(*) FROM resumable_inputs i WHERE i.run_id = r.run_id) = ?
"""
_INSERT_STUB: Final = (
    f"INSERT INTO resumable_archived_runs ({_STUB_COLUMNS}) "  # noqa: S608 - constant columns
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_SELECT_STUB: Final = (
    f"SELECT {_STUB_COLUMNS} FROM resumable_archived_runs WHERE run_id = ?"  # noqa: S608 - constant columns
)
_LIST_STUBS: Final = (
    f"SELECT {_STUB_COLUMNS} FROM resumable_archived_runs "  # noqa: S608 - constant columns
    "ORDER BY run_id LIMIT ?"
)
_LIST_STUBS_AFTER: Final = (
    f"SELECT {_STUB_COLUMNS} FROM resumable_archived_runs "  # noqa: S608 - constant columns
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
DELETE_STUBS: Final = "DELETE FROM resumable_archived_runs WHERE run_id IN ({marks})"
"""Run by `delete_runs` with the runs it deletes."""


def archive_journal_txn(conn: Conn, stub: ArchiveStub) -> bool:
    """`SupportsArchive.archive_journal` on SQLite."""
    run_id = _t(stub.run_id)
    guard = (run_id, stub.fence, stub.steps, stub.inputs)
    if conn.execute(_GUARD, guard).fetchone() is None:
        return False
    conn.execute("DELETE FROM resumable_steps WHERE run_id = ?", (run_id,))
    conn.execute("DELETE FROM resumable_inputs WHERE run_id = ?", (run_id,))
    conn.execute(
        _INSERT_STUB,
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
def _stub(row: Sequence[object]) -> ArchiveStub:
    run_id, key, size, steps, inputs, fence, archived, refers_to = row
    return ArchiveStub(
        run_id=_sql.from_text(str(run_id)),
        key=str(key),
        size=int(str(size)),
        steps=int(str(steps)),
        inputs=int(str(inputs)),
        fence=int(str(fence)),
        archived_at_ms=int(str(archived)),
        refers_to=keys_of(json.loads(str(refers_to))),
    )


def load_stub_txn(conn: Conn, run_id: str) -> ArchiveStub | None:
    """`SupportsArchive.load_archive_stub` on SQLite."""
    row = conn.execute(_SELECT_STUB, (_t(run_id),)).fetchone()
    return None if row is None else _stub(tuple(row))


def list_stubs_txn(conn: Conn, after: str | None, limit: int) -> list[ArchiveStub]:
    """`SupportsArchive.list_archive_stubs` on SQLite."""
    if after is None:
        rows = conn.execute(_LIST_STUBS, (limit,))
    else:
        rows = conn.execute(_LIST_STUBS_AFTER, (_t(after), limit))
    return [_stub(tuple(row)) for row in rows]


def restore_journal_txn(
    conn: Conn,
    stub: ArchiveStub,
    steps: Sequence[StepRecord],
    inputs: Sequence[InputRecord],
) -> bool:
    """`SupportsArchive.restore_journal` on SQLite."""
    held = load_stub_txn(conn, stub.run_id)
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
