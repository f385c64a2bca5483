"""`resumable gc`: delete finished runs and unused content, with a dry run."""

from __future__ import annotations

import argparse
import re
from datetime import timedelta
from typing import Any, cast

from resumable._engine.engine import Engine
from resumable._plural import plural
from resumable.errors import UsageError
from resumable.stores.protocol import TERMINAL_STATUSES, RunStatus

_AGE = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def register(commands: Any, store: argparse.ArgumentParser) -> None:
    """Add the subcommand."""
    gc = commands.add_parser(
        "gc",
        parents=[store],
        help="delete finished runs, their journals and unused chunks",
    )
    gc.add_argument(
        "--older-than", help="age since the run last changed, e.g. 30d, 12h"
    )
    gc.add_argument(
        "--status",
        action="append",
        choices=sorted(TERMINAL_STATUSES),
        help="repeatable",
    )
    gc.add_argument(
        "--keep-last",
        type=int,
        help="keep the newest N finished runs of each workflow; alone (no "
        "--older-than), delete every other finished run; with it, only those older",
    )
    gc.add_argument(
        "--dry-run", action="store_true", help="report only; delete nothing"
    )
    gc.add_argument(
        "--blobs-grace",
        default="1h",
        help="with ?blobs=: delete unreferenced objects older than this (default 1h)",
    )
    gc.set_defaults(handler=collect_garbage)


def parse_age(text: str) -> timedelta:
    """`30d` -> 30 days; units s, m, h, d."""
    match = _AGE.match(text.strip())
    if match is None:
        raise UsageError(
            f"--older-than {text!r}: use a number and a unit: 90s, 15m, 12h, 30d"
        )
    return timedelta(seconds=float(match.group(1)) * _UNIT_S[match.group(2)])


async def collect_garbage(args: argparse.Namespace) -> int:
    """Run one retention pass and print what it removed."""
    if args.keep_last is not None and args.keep_last < 0:
        raise UsageError(f"--keep-last must be 0 or more (got {args.keep_last})")
    older_than = parse_age(args.older_than) if args.older_than else None
    status = cast(
        "tuple[RunStatus, ...]", tuple(args.status or sorted(TERMINAL_STATUSES))
    )
    async with Engine(args.store) as engine:
        report = await engine.gc(
            older_than=older_than,
            status=status,
            keep_last=args.keep_last,
            dry_run=args.dry_run,
            blobs_grace=parse_age(args.blobs_grace),
        )
    verb = "would delete" if report.dry_run else "deleted"
    print(
        f"gc {verb} {plural(report.runs, 'run')}"
        + (
            ""
            if report.dry_run
            else f", {plural(report.steps, 'step')}, {plural(report.inputs, 'input')}, "
            f"{plural(report.chunks, 'chunk')}"
            + (f", {plural(report.blobs, 'offloaded object')}" if report.blobs else "")
            + f" ({plural(report.bytes, 'byte')} of payloads)"
        )
        + (
            f"; kept {report.kept_for_forks} that forks or live parents still need"
            if report.kept_for_forks
            else ""
        )
    )
    for run_id in report.run_ids[:20]:
        print(f"  {run_id}")
    if len(report.run_ids) > 20:
        print(f"  ... and {len(report.run_ids) - 20} more")
    return 0
