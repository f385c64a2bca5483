"""`resumable check`: which stored runs would the new code break, and where?

Exit status 0 when every run checked can continue on the code in --app, 1 when
some would break (so it can gate a deploy in CI), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from datetime import timedelta
from typing import Any

from resumable._engine.check import DEFAULT_STATUSES, CheckReport, RunCheck
from resumable._engine.engine import Engine
from resumable._engine.specs import register_known_types
from resumable._plural import plural
from resumable.cli._table import clip, table
from resumable.cli.runs import _import_app
from resumable.stores.protocol import RUN_STATUSES, RunStatus

_SINCE = re.compile(r"^(?P<n>\d+(?:\.\d+)?)(?P<unit>[smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_ARGS_WIDTH = 200


def register(commands: Any, store: argparse.ArgumentParser) -> None:
    """Add the subcommand."""
    check = commands.add_parser(
        "check",
        parents=[store],
        help="replay stored runs against new code, executing nothing; "
        "exit 1 if any would break",
    )
    check.add_argument(
        "--app",
        required=True,
        action="append",
        help="module defining the NEW workflows (e.g. myapp.flows)",
    )
    check.add_argument(
        "--status",
        type=parse_statuses,
        default=DEFAULT_STATUSES,
        help="comma-separated run statuses (default: %(default)s)",
    )
    check.add_argument("--workflow", help="only runs of this workflow")
    check.add_argument(
        "--version", help="only runs that started on this @workflow(version=)"
    )
    check.add_argument("--limit", type=int, help="at most N runs, newest first")
    check.add_argument(
        "--since", type=parse_since, help="only runs updated within, e.g. 7d, 12h"
    )
    check.add_argument(
        "--timeout", type=float, default=10.0, help="seconds per run (default 10)"
    )
    check.add_argument(
        "--all", action="store_true", help="list compatible runs too, not only breaking"
    )
    check.add_argument("--json", action="store_true", help="print JSON, one document")
    check.set_defaults(handler=run_check)


def parse_statuses(text: str) -> tuple[RunStatus, ...]:
    """`running,waiting` -> ("running", "waiting"), refusing unknown statuses."""
    statuses = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [s for s in statuses if s not in RUN_STATUSES]
    if unknown or not statuses:
        raise argparse.ArgumentTypeError(
            f"unknown status {', '.join(unknown) or text!r}; choose from "
            + ", ".join(RUN_STATUSES)
        )
    return statuses  # type: ignore[return-value]  # each checked against RUN_STATUSES


def parse_since(text: str) -> timedelta:
    """`7d` -> 7 days (units s, m, h, d, w)."""
    match = _SINCE.match(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(
            f"--since {text!r}: expected a number and a unit, e.g. 30m, 12h, 7d, 2w"
        )
    return timedelta(seconds=float(match["n"]) * _UNIT_S[match["unit"]])


async def run_check(args: argparse.Namespace) -> int:
    """Import the new code, check the runs, print the report."""
    for app in args.app:
        _import_app(app)
    register_known_types()
    async with Engine(args.store) as engine:
        report = await engine.check(
            status=list(args.status),
            workflow=args.workflow,
            version=args.version,
            limit=args.limit,
            since=args.since,
            timeout_s=args.timeout,
        )
    if args.json:
        print(json.dumps(to_json(report), indent=2))
    else:
        print_report(report, everything=args.all)
    if not report.ok:
        print(
            f"resumable: {len(report.breaking)} of {plural(len(report.runs), 'run')} "
            f"would break on the new code",
            file=sys.stderr,
        )
        return 1
    return 0


def to_json(report: CheckReport) -> dict[str, Any]:
    """The report as plain JSON data."""
    return {
        "ok": report.ok,
        "runs": [
            {**dataclasses.asdict(run), "breaking": run.is_breaking}
            for run in report.runs
        ],
        "summary": [
            {"workflow": wf, "verdict": verdict, "runs": n}
            for (wf, verdict), n in report.summary().items()
        ],
        "patches_needed": {k: list(v) for k, v in report.patches_needed().items()},
    }


def print_report(report: CheckReport, *, everything: bool) -> None:
    """Runs (breaking ones, or all), a summary by workflow and verdict, patches."""
    if not report.runs:
        print("no runs to check")
        return
    shown = report.runs if everything else report.breaking
    for run in shown:
        print("\n".join(describe(run)))
    if shown:
        print()
    print(
        table(
            ["WORKFLOW", "VERDICT", "RUNS"],
            [[wf, v, str(n)] for (wf, v), n in report.summary().items()],
            right=[2],
        )
    )
    needed = report.patches_needed()
    if needed:
        print("\npatches still needed (runs that took the old branch):")
        for name, run_ids in needed.items():
            more = f" and {len(run_ids) - 5} more" if len(run_ids) > 5 else ""
            print(f"  {name}: {', '.join(run_ids[:5])}{more}")
    verdict = "OK: no run would break" if report.ok else "BREAKS"
    print(f"\n{verdict} ({plural(len(report.runs), 'run')} checked)")


def describe(run: RunCheck) -> list[str]:
    """A run's verdict as a few readable lines."""
    started = f", version {run.version}" if run.version is not None else ""
    head = (
        f"{run.run_id} ({run.workflow}{started}, {run.status}): {run.verdict.upper()}"
    )
    d = run.divergence
    if d is None:
        return [f"{head}: {run.describe()}"]
    return [
        f"{head} at step #{d.seq}",
        f"    recorded: {d.recorded}, args fingerprint {d.recorded_fingerprint[:12]}",
        f"    new code: {d.called}, args fingerprint {d.called_fingerprint[:12]}: "
        + clip(d.called_args, _ARGS_WIDTH),
        f"    {d.reason}: {d.hint}",
    ]
