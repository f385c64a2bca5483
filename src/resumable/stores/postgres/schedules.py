"""Schedules on PostgreSQL (`KeepsSchedules`): one row each in `resumable_schedules`.

Each method of the store is one statement here, in its own transaction; a
concurrent `mark_schedule_ticked` and pause cannot lower `last_tick_ms`, which
only ever moves to the later of the stored and the given tick (`GREATEST`).
"""

from __future__ import annotations

from typing import Final

from psycopg.rows import DictRow

from resumable.stores import _sql
from resumable.stores.postgres.connection import (
    Connections,
    composer,
)
from resumable.stores.protocol import ScheduleRecord

_t = _sql.to_text

_SAVE: Final = """
INSERT INTO {schema}.resumable_schedules AS s (name, workflow, cron, tz, catch_up,
    paused, last_tick_ms, created_at_ms, updated_at_ms)
VALUES (%(name)s, %(workflow)s, %(cron)s, %(tz)s, %(catch_up)s, %(paused)s,
    %(last_tick_ms)s, %(created_at_ms)s, %(updated_at_ms)s)
ON CONFLICT (name) DO UPDATE SET workflow = EXCLUDED.workflow, cron = EXCLUDED.cron,
    tz = EXCLUDED.tz, catch_up = EXCLUDED.catch_up,
    updated_at_ms = EXCLUDED.updated_at_ms
RETURNING s.*
"""
_LIST: Final = "SELECT * FROM {schema}.resumable_schedules ORDER BY name"
# GREATEST ignores NULLs: a schedule never ticked takes the given tick
_PAUSE: Final = """
UPDATE {schema}.resumable_schedules
   SET paused = %(paused)s, updated_at_ms = %(now_ms)s,
       last_tick_ms = GREATEST(last_tick_ms, %(through_ms)s::bigint)
 WHERE name = %(name)s
RETURNING *
"""
_TICKED: Final = """
UPDATE {schema}.resumable_schedules
   SET last_tick_ms = %(tick_ms)s, updated_at_ms = %(now_ms)s
 WHERE name = %(name)s AND (last_tick_ms IS NULL OR last_tick_ms < %(tick_ms)s)
RETURNING name
"""


class Schedules:
    """The schedule statements of one store's schema, run on its connections."""

    def __init__(self, schema: str, db: Connections) -> None:
        compose = composer(schema)
        self._save, self._list = compose(_SAVE), compose(_LIST)
        self._pause, self._ticked = compose(_PAUSE), compose(_TICKED)
        self._db = db

    async def _write(self, query: bytes, params: dict[str, object]) -> list[DictRow]:
        async def write() -> list[DictRow]:
            async with self._db.connection() as conn:
                cur = await conn.execute(query, params)
                return await cur.fetchall() if cur.description else []

        return await self._db.abandoned.run(write())

    async def save(self, record: ScheduleRecord) -> ScheduleRecord:
        """`KeepsSchedules.save_schedule`."""
        (row,) = await self._write(
            self._save,
            {
                "name": _t(record.name),
                "workflow": _t(record.workflow),
                "cron": record.cron,
                "tz": record.tz,
                "catch_up": record.catch_up,
                "paused": record.paused,
                "last_tick_ms": record.last_tick_ms,
                "created_at_ms": record.created_at_ms,
                "updated_at_ms": record.updated_at_ms,
            },
        )
        return _sql.schedule_from_row(row)

    async def list(self) -> list[ScheduleRecord]:
        """`KeepsSchedules.list_schedules`."""
        return [
            _sql.schedule_from_row(row) for row in await self._db.read(self._list, {})
        ]

    async def set_paused(
        self, name: str, *, paused: bool, through_ms: int | None, now_ms: int
    ) -> ScheduleRecord | None:
        """`KeepsSchedules.set_schedule_paused`."""
        rows = await self._write(
            self._pause,
            {
                "name": _t(name),
                "paused": paused,
                "through_ms": through_ms,
                "now_ms": now_ms,
            },
        )
        return _sql.schedule_from_row(rows[0]) if rows else None

    async def mark_ticked(self, name: str, *, tick_ms: int, now_ms: int) -> bool:
        """`KeepsSchedules.mark_schedule_ticked`."""
        rows = await self._write(
            self._ticked, {"name": _t(name), "tick_ms": tick_ms, "now_ms": now_ms}
        )
        return bool(rows)
