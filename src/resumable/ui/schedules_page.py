"""Schedules: each one's state, last tick and next fire times, with pause and resume."""

from __future__ import annotations

from datetime import UTC, datetime

from resumable._engine.clock import datetime_of
from resumable._engine.engine import Engine
from resumable._engine.schedules import ScheduleView
from resumable.ui.html import csrf_field, esc, table, when


async def render_schedules(engine: Engine, csrf: str, note: str | None) -> str:
    """Every schedule in the store, a pause or resume button on each."""
    views = await engine.schedules()
    flash = f"<p class=flash>{esc(note)}</p>" if note else ""
    rows = [_row(view, csrf) for view in views]
    body = (
        table(
            [
                "Schedule",
                "State",
                "Cron",
                "Time zone",
                "Workflow",
                "Missed ticks",
                "Last tick (UTC)",
                "Next fire times (UTC)",
                "",
            ],
            rows,
            cls="schedules",
        )
        if rows
        else "<p class=empty>No schedule yet: a worker saves those its app "
        "declares (<code>@workflow(schedule=...)</code>, "
        "<code>engine.schedule(...)</code>).</p>"
    )
    return f"<h1>Schedules</h1>{flash}{body}"


def _row(view: ScheduleView, csrf: str) -> list[str]:
    record = view.record
    last = None if record.last_tick_ms is None else datetime_of(record.last_tick_ms)
    upcoming = "<br>".join(
        when(datetime.fromtimestamp(ms / 1000, tz=UTC)) for ms in view.next_ticks_ms
    )
    action = "resume" if record.paused else "pause"
    button = (
        f'<form method=post action="/schedules/{action}">{csrf_field(csrf)}'
        f'<input type=hidden name=name value="{esc(record.name)}">'
        f"<button>{action.capitalize()}</button></form>"
    )
    return [
        esc(record.name),
        "paused" if record.paused else "active",
        f"<code>{esc(record.cron)}</code>",
        esc(record.tz),
        esc(record.workflow),
        f"catch up {record.catch_up}" if record.catch_up else "skip",
        when(last),
        upcoming or "-",
        button,
    ]
