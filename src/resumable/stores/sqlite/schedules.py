"""Schedules on SQLite (`KeepsSchedules`): one row each in `resumable_schedules`.

Each function is one transaction, run by the store's `SQLiteThread.call`.
"""

from __future__ import annotations

from typing import Final

from resumable.stores import _sql
from resumable.stores.protocol import ScheduleRecord
from resumable.stores.sqlite.connection import Conn

_t = _sql.to_text

_SAVE: Final = """
INSERT INTO resumable_schedules (name, workflow, cron, tz, catch_up, paused,
    last_tick_ms, created_at_ms, updated_at_ms)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET workflow = excluded.workflow, cron = excluded.cron,
    tz = excluded.tz, catch_up = excluded.catch_up,
    updated_at_ms = excluded.updated_at_ms
"""
_SELECT_ONE: Final = "SELECT * FROM resumable_schedules WHERE name = ?"
_SELECT_ALL: Final = "SELECT * FROM resumable_schedules ORDER BY name"
# MAX(NULL, x) is NULL in SQLite: COALESCE keeps the later of the two ticks
_PAUSE: Final = """
UPDATE resumable_schedules SET paused = ?, updated_at_ms = ?,
    last_tick_ms = CASE WHEN ? IS NULL THEN last_tick_ms
                        ELSE MAX(COALESCE(last_tick_ms, ?), ?) END
 WHERE name = ?
"""
_TICKED: Final = """
UPDATE resumable_schedules SET last_tick_ms = ?, updated_at_ms = ?
 WHERE name = ? AND (last_tick_ms IS NULL OR last_tick_ms < ?)
"""


def save_schedule_txn(conn: Conn, record: ScheduleRecord) -> ScheduleRecord:
    """`KeepsSchedules.save_schedule`: insert, or take the definition, keep the state."""
    conn.execute(
        _SAVE,
        (
            _t(record.name),
            _t(record.workflow),
            record.cron,
            record.tz,
            record.catch_up,
            int(record.paused),
            record.last_tick_ms,
            record.created_at_ms,
            record.updated_at_ms,
        ),
    )
    return _sql.schedule_from_row(
        conn.execute(_SELECT_ONE, (_t(record.name),)).fetchone()
    )


def list_schedules_txn(conn: Conn) -> list[ScheduleRecord]:
    """`KeepsSchedules.list_schedules`."""
    return [_sql.schedule_from_row(row) for row in conn.execute(_SELECT_ALL)]


def set_paused_txn(
    conn: Conn, name: str, *, paused: bool, through_ms: int | None, now_ms: int
) -> ScheduleRecord | None:
    """`KeepsSchedules.set_schedule_paused`."""
    conn.execute(
        _PAUSE, (int(paused), now_ms, through_ms, through_ms, through_ms, _t(name))
    )
    row = conn.execute(_SELECT_ONE, (_t(name),)).fetchone()
    return None if row is None else _sql.schedule_from_row(row)


def mark_ticked_txn(conn: Conn, name: str, *, tick_ms: int, now_ms: int) -> bool:
    """`KeepsSchedules.mark_schedule_ticked`: raise last_tick_ms, never lower it."""
    return conn.execute(_TICKED, (tick_ms, now_ms, _t(name), tick_ms)).rowcount == 1
