"""`resumable schedules [list|pause NAME|resume NAME]`: the store's schedules.

A schedule is in the store once a worker that runs it has started (the worker
saves the definition its code declares); `list` shows each with its state and
next fire times, `pause` and `resume` change it for every worker.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from resumable._engine.clock import datetime_of, moment_text
from resumable._engine.engine import Engine
from resumable._engine.schedules import ScheduleView
from resumable.cli.opening import for_reading, for_reading_and_writing


def register(commands: Any, store: argparse.ArgumentParser) -> None:
    """Add the subcommand."""
    schedules = commands.add_parser(
        "schedules",
        parents=[store],
        help="list scheduled workflows with their next fire times; pause or resume one",
    )
    actions = schedules.add_subparsers(dest="action", metavar="ACTION")
    actions.add_parser("list", parents=[store], help="every schedule (the default)")
    for action, what in (
        ("pause", "stop starting its ticks, in every worker"),
        ("resume", "start its ticks again, from the next one"),
    ):
        parser = actions.add_parser(action, parents=[store], help=what)
        parser.add_argument("name", help="the schedule's name")
    schedules.set_defaults(handler=run_schedules)


async def run_schedules(args: argparse.Namespace) -> int:
    """List, pause or resume."""
    action = args.action or "list"
    if action == "list":
        async with Engine(for_reading(args.store)) as engine:
            views = await engine.schedules()
            now = datetime_of(engine.clock.now_ms())
        if not views:
            print("no schedules (a worker saves those its --app declares)")
        for view in views:
            print(describe(view, now))
        return 0
    async with Engine(for_reading_and_writing(args.store)) as engine:
        if action == "pause":
            view = await engine.pause_schedule(args.name)
        else:
            view = await engine.resume_schedule(args.name)
        now = datetime_of(engine.clock.now_ms())
    print(describe(view, now))
    return 0


def describe(view: ScheduleView, now: datetime) -> str:
    """A schedule in a few lines: name, cron, state, last tick, next fire times."""
    record = view.record
    policy = f"catch up {record.catch_up}" if record.catch_up else "skip missed"
    state = "paused" if record.paused else "active"
    lines = [
        f"{record.name}  {state}  {record.cron!r} ({record.tz})  "
        f"workflow {record.workflow}  {policy}"
    ]
    if record.last_tick_ms is not None:
        last = datetime_of(record.last_tick_ms)
        lines.append(f"  last tick  {moment_text(last, now)}")
    for tick in view.next_ticks_ms:
        moment = datetime.fromtimestamp(tick / 1000, tz=UTC)
        lines.append(f"  next       {moment_text(moment, now)}")
    return "\n".join(lines)
