"""SQLite: runs, their journals and inputs, as functions of one transaction.

`SQLiteStore` runs each on its connection (`SQLiteThread.call`); the `*_txn` suffix
means the function runs inside the caller's transaction. Leases and claims are in
`claims`.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from resumable.errors import LeaseLost, RunNotFound
from resumable.stores import _sql
from resumable.stores.protocol import (
    DeleteResult,
    InputRecord,
    RunQuery,
    RunRecord,
    RunUpdate,
    StepRecord,
)
from resumable.stores.sqlite import archive as _archive
from resumable.stores.sqlite import feeds as _feeds
from resumable.stores.sqlite.claims import TERMINAL_SQL as _TERMINAL_SQL

_t = _sql.to_text
Conn = sqlite3.Connection

_SELECT_RUN: Final = "SELECT * FROM resumable_runs WHERE run_id = ?"
_INSERT_RUN: Final = (
    f"INSERT INTO resumable_runs ({', '.join(_sql.RUN_COLUMNS)}) "  # noqa: S608 - constant columns
    f"VALUES ({', '.join('?' * len(_sql.RUN_COLUMNS))}) ON CONFLICT (run_id) DO NOTHING"
)
_SELECT_JOURNAL: Final = (
    f"SELECT {', '.join(_sql.JOURNAL_COLUMNS)} FROM resumable_steps WHERE run_id = ?"  # noqa: S608 - constant columns
)
_LOAD_JOURNAL: Final = _SELECT_JOURNAL + " ORDER BY seq"
_LOAD_JOURNAL_UP_TO: Final = _SELECT_JOURNAL + " AND seq <= ? ORDER BY seq"
# the fence check and the write are one statement, so no other writer can slip between
_COMMIT_STEP: Final = (
    f"INSERT OR REPLACE INTO resumable_steps ({', '.join(_sql.STEP_COLUMNS)}) "  # noqa: S608 - constant columns
    f"SELECT {', '.join('?' * len(_sql.STEP_COLUMNS))} WHERE EXISTS "
    "(SELECT 1 FROM resumable_runs WHERE run_id = ? AND fence = ?)"
)
# payload bytes of the runs `delete_runs` is about to delete ({marks}: placeholders)
_PAYLOAD_BYTES: Final = (
    "SELECT total(length(input)) + total(length(output)) FROM resumable_runs"
    " WHERE run_id IN ({marks})",
    "SELECT total(length(output)) + total(length(usage)) FROM resumable_steps"
    " WHERE run_id IN ({marks})",
    "SELECT total(length(value)) FROM resumable_inputs WHERE run_id IN ({marks})",
)
_RENEW: Final = """
UPDATE resumable_runs SET lease_expires_at_ms = ?
 WHERE run_id = ? AND fence = ? AND status = 'running'
"""
_UPDATE_RUN: Final = """
UPDATE resumable_runs
   SET status = :status, output = COALESCE(:output, output), wake_at_ms = :wake_at_ms,
       expires_at_ms = COALESCE(:expires_at_ms, expires_at_ms), updated_at_ms = :now_ms,
       lease_owner = CASE WHEN :status = 'running' THEN lease_owner END,
       lease_expires_at_ms = CASE WHEN :status = 'running' THEN lease_expires_at_ms ELSE 0 END
 WHERE run_id = :run_id AND fence = :fence
"""
_CANCEL: Final = f"""
UPDATE resumable_runs
   SET status = 'cancelled', lease_owner = NULL, lease_expires_at_ms = 0,
       fence = fence + 1, wake_at_ms = NULL, updated_at_ms = ?
 WHERE run_id = ? AND status NOT IN {_TERMINAL_SQL}
"""  # noqa: S608 - built from constants
_WAKE: Final = """
UPDATE resumable_runs SET status = 'queued', wake_at_ms = NULL, updated_at_ms = ?
 WHERE run_id = ? AND status = 'waiting'
"""


def create_run_txn(conn: Conn, run: RunRecord) -> RunRecord:
    """Insert `run` unless its id exists; the run as stored."""
    conn.execute(_INSERT_RUN, _sql.run_values(run))
    return _sql.run_from_row(conn.execute(_SELECT_RUN, (_t(run.run_id),)).fetchone())


def get_run_txn(conn: Conn, run_id: str) -> RunRecord | None:
    """The run, or None."""
    row = conn.execute(_SELECT_RUN, (_t(run_id),)).fetchone()
    return None if row is None else _sql.run_from_row(row)


def list_runs_query(query: RunQuery) -> tuple[str, list[object]]:
    """The statement and parameters of `Store.list_runs`."""
    where, params = run_filters(query)
    if query.after is not None:
        where += " AND (created_at_ms, run_id) < (?, ?)"
        params += [query.after[0], _t(query.after[1])]
    sql = f"SELECT * FROM resumable_runs WHERE {where} ORDER BY created_at_ms DESC, run_id DESC LIMIT ?"  # noqa: S608 - fragments are constants, values are parameters
    params.append(query.limit)
    return sql, params


def select_runs_txn(conn: Conn, sql: str, params: list[object]) -> list[RunRecord]:
    """The runs `list_runs_query` selects."""
    return [_sql.run_from_row(row) for row in conn.execute(sql, params)]


def count_runs_txn(conn: Conn, query: RunQuery) -> dict[tuple[str, str | None], int]:
    """`Store.count_runs`."""
    where, params = run_filters(query)
    sql = f"SELECT status, queue, count(*) AS n FROM resumable_runs WHERE {where} GROUP BY status, queue"  # noqa: S608 - fragments are constants, values are parameters
    return {
        (row["status"], _sql.maybe_from_text(row["queue"])): row["n"]
        for row in conn.execute(sql, params)
    }


def renew_lease_txn(
    conn: Conn, run_id: str, *, fence: int, now_ms: int, ttl_ms: int
) -> None:
    """Extend the lease `fence` holds; LeaseLost if it no longer does."""
    if conn.execute(_RENEW, (now_ms + ttl_ms, _t(run_id), fence)).rowcount == 0:
        raise LeaseLost(run_id=run_id, fence=fence)


def update_run_txn(conn: Conn, run_id: str, *, fence: int, update: RunUpdate) -> None:
    """Apply the lease holder's `update`; LeaseLost if `fence` no longer holds it."""
    params = _sql.update_values(run_id, fence, update)
    if conn.execute(_UPDATE_RUN, params).rowcount == 0:
        raise LeaseLost(run_id=run_id, fence=fence)


def cancel_run_txn(conn: Conn, run_id: str, now_ms: int) -> RunRecord:
    """Cancel the run unless it ended; the run as it now stands."""
    conn.execute(_CANCEL, (now_ms, _t(run_id)))
    row = conn.execute(_SELECT_RUN, (_t(run_id),)).fetchone()
    if row is None:
        raise RunNotFound(run_id=run_id)
    return _sql.run_from_row(row)


def reopen_run_txn(conn: Conn, run_id: str, now_ms: int) -> bool:
    """Queue a failed run again; whether it was failed."""
    changed = conn.execute(
        "UPDATE resumable_runs SET status = 'queued', updated_at_ms = ? "
        "WHERE run_id = ? AND status = 'failed'",
        (now_ms, run_id),
    ).rowcount
    if not changed and conn.execute(_SELECT_RUN, (_t(run_id),)).fetchone() is None:
        raise RunNotFound(run_id=run_id)
    return bool(changed)


def delete_runs_txn(conn: Conn, ids: list[str]) -> DeleteResult:
    """Delete the finished runs among `ids` (text-encoded) with everything they own."""
    marks = ", ".join("?" * len(ids))
    found = [
        row["run_id"]
        for row in conn.execute(
            f"SELECT run_id FROM resumable_runs WHERE run_id IN ({marks}) "  # noqa: S608 - placeholders only
            f"AND status IN {_TERMINAL_SQL}",
            ids,
        )
    ]
    if not found:
        return DeleteResult()
    marks = ", ".join("?" * len(found))
    size = sum(
        int(conn.execute(sql.format(marks=marks), found).fetchone()[0])
        for sql in _PAYLOAD_BYTES
    )
    steps = conn.execute(
        f"DELETE FROM resumable_steps WHERE run_id IN ({marks})",  # noqa: S608 - placeholders only
        found,
    ).rowcount
    inputs = conn.execute(
        f"DELETE FROM resumable_inputs WHERE run_id IN ({marks})",  # noqa: S608 - placeholders only
        found,
    ).rowcount
    conn.execute(f"DELETE FROM resumable_runs WHERE run_id IN ({marks})", found)  # noqa: S608 - placeholders only
    conn.execute(_archive.DELETE_RUN_STUBS.format(marks=marks), found)
    conn.execute(_feeds.DELETE_FEEDS.format(marks=marks), found)
    conn.execute(
        f"DELETE FROM resumable_step_cache WHERE run_id IN ({marks})",  # noqa: S608 - placeholders only
        found,
    )
    return DeleteResult(
        runs=len(found),
        steps=steps,
        inputs=inputs,
        run_ids=tuple(_sql.from_text(run_id) for run_id in found),
        bytes=size,
    )


def load_journal_txn(
    conn: Conn, run_id: str, up_to_seq: int | None
) -> list[StepRecord]:
    """The run's journal in seq order (up to `up_to_seq` if given)."""
    cursor = conn.cursor()
    cursor.row_factory = None  # plain tuples: see _sql.journal_records
    if up_to_seq is None:
        cursor.execute(_LOAD_JOURNAL, (_t(run_id),))
    else:
        cursor.execute(_LOAD_JOURNAL_UP_TO, (_t(run_id), up_to_seq))
    return _sql.journal_records(run_id, cursor.fetchall())


def commit_step_params(step: StepRecord, fence: int) -> tuple[object, ...]:
    """`_COMMIT_STEP`'s parameters."""
    values = _sql.step_values(step)
    return (*values, values[0], fence)  # values[0]: the run id, escaped once


def commit_step_txn(
    conn: Conn, params: tuple[object, ...], step: StepRecord, fence: int
) -> None:
    """Write the step if `fence` still holds the run's lease, else LeaseLost."""
    if conn.execute(_COMMIT_STEP, params).rowcount == 0:
        raise LeaseLost(run_id=step.run_id, seq=step.seq, fence=fence)


def send_input_txn(conn: Conn, record: InputRecord) -> bool:
    """Store the input unless its key was sent; wake a waiting run. Whether stored."""
    if conn.execute(_SELECT_RUN, (_t(record.run_id),)).fetchone() is None:
        raise RunNotFound(run_id=record.run_id)
    inserted = conn.execute(
        "INSERT INTO resumable_inputs (run_id, key, value, sent_at_ms) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (run_id, key) DO NOTHING",
        (_t(record.run_id), _t(record.key), record.value, record.sent_at_ms),
    ).rowcount
    if inserted:
        conn.execute(_WAKE, (record.sent_at_ms, _t(record.run_id)))
    return bool(inserted)


def get_inputs_txn(conn: Conn, run_id: str) -> dict[str, bytes]:
    """The run's inputs by key."""
    rows = conn.execute(
        "SELECT key, value FROM resumable_inputs WHERE run_id = ?", (_t(run_id),)
    )
    return {_sql.from_text(row["key"]): _sql.blob(row["value"]) for row in rows}


def list_inputs_txn(conn: Conn, run_id: str) -> list[InputRecord]:
    """The run's inputs in the order they were sent."""
    rows = conn.execute(
        "SELECT key, value, sent_at_ms FROM resumable_inputs WHERE run_id = ? "
        "ORDER BY sent_at_ms, key",
        (_t(run_id),),
    )
    return [
        InputRecord(
            run_id=run_id,
            key=_sql.from_text(row["key"]),
            value=_sql.blob(row["value"]),
            sent_at_ms=row["sent_at_ms"],
        )
        for row in rows
    ]


def run_filters(query: RunQuery) -> tuple[str, list[object]]:
    """The WHERE clause (never empty) and its parameters for a run query's filters."""
    clauses = ["1 = 1"]
    params: list[object] = []
    if query.status:
        clauses.append(f"status IN ({', '.join('?' * len(query.status))})")
        params.extend(query.status)
    for column, value in (
        ("workflow", query.workflow),
        ("parent_id", query.parent_id),
        ("forked_from", query.forked_from),
        ("queue", query.queue),
        ("version", query.version),
    ):
        if value is not None:
            clauses.append(f"{column} = ?")  # column names are our constants
            params.append(_t(value))
    for clause, bound in (
        ("updated_at_ms < ?", query.updated_before_ms),
        ("created_at_ms >= ?", query.created_since_ms),
        ("created_at_ms < ?", query.created_before_ms),
    ):
        if bound is not None:
            clauses.append(clause)
            params.append(bound)
    if query.run_id_prefix is not None:
        prefix = _t(query.run_id_prefix)
        clauses.append("substr(run_id, 1, ?) = ?")
        params += [len(prefix), prefix]
    return " AND ".join(clauses), params
