"""`resumable rerun | cache clear`: run again on today's code, served from the step cache."""

from __future__ import annotations

import argparse
from typing import Any

from resumable._engine.engine import Engine
from resumable._plural import plural
from resumable.cli._table import clip
from resumable.cli.runs import _import_app
from resumable.errors import CapabilityMissing, UsageError


def register(commands: Any, store: argparse.ArgumentParser) -> None:
    """Add `rerun` and `cache clear`."""
    rerun = commands.add_parser(
        "rerun",
        parents=[store],
        help="run a run's workflow again with its input on today's code; "
        "steps with @step(cache=...) whose key matches are served from the cache",
    )
    rerun.add_argument("run_id", help="the run whose workflow and input to run again")
    rerun.add_argument(
        "--app",
        required=True,
        help="module that defines the workflow (e.g. myapp.flows)",
    )
    rerun.add_argument("--new-id", help="id for the new run (default: generated)")
    rerun.set_defaults(handler=rerun_run)

    cache = commands.add_parser("cache", help="the step cache across runs")
    actions = cache.add_subparsers(dest="action", metavar="ACTION", required=True)
    clear = actions.add_parser(
        "clear", parents=[store], help="delete step cache entries (all by default)"
    )
    clear.add_argument(
        "--step", help="only the entries of this step (its journal name)"
    )
    clear.add_argument("--workflow", help="only the entries recorded by this workflow")
    clear.set_defaults(handler=clear_cache)


async def rerun_run(args: argparse.Namespace) -> int:
    """Run the workflow again to its end; say what the cache saved."""
    _import_app(args.app)
    async with Engine(args.store) as engine:
        new_id = await engine.rerun(args.run_id, run_id=args.new_id)
        result = await engine.resume(new_id)  # recorded: returned, not run again
        ledger = await engine.ledger(new_id)
    print(
        f"run {new_id} (a rerun of {args.run_id}) succeeded: {clip(repr(result), 200)}"
    )
    saved = ledger.cached
    print(
        f"served from the step cache: {plural(ledger.cached_steps, 'step')}"
        + (f", {saved.calls} calls, ${saved.cost_usd:.4f} saved" if saved.calls else "")
    )
    spent = ledger.incurred
    print(f"incurred: {plural(spent.calls, 'call')}, ${spent.cost_usd:.4f}")
    return 0


async def clear_cache(args: argparse.Namespace) -> int:
    """Delete the entries asked for and say how many."""
    async with Engine(args.store) as engine:
        try:
            cleared = await engine.clear_cache(step=args.step, workflow=args.workflow)
        except CapabilityMissing as exc:
            raise UsageError(str(exc)) from None
    print(f"cleared {plural(cleared, 'cache entry', 'cache entries')}")
    return 0
