"""`resumable runs | show | resume | cancel`: list, inspect and drive runs."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from resumable._engine.clock import deadline_text, moment_text
from resumable._engine.engine import Engine
from resumable._engine.history import StepView
from resumable._engine.ledger import Ledger, Spend, spend_text
from resumable._engine.listing import RunView
from resumable._engine.specs import WORKFLOWS, register_known_types
from resumable._plural import plural
from resumable.cli import _prices as prices
from resumable.cli import waiting
from resumable.cli._table import clip, duration, size, store_label, table, when
from resumable.errors import ResumableError, UsageError
from resumable.serde.view import one_line
from resumable.stores.kinds import JournalKind, index_of, kind_of
from resumable.stores.protocol import RUN_STATUSES

_OUTPUT_WIDTH = 60
_TRACEBACK_LINES = 6


def register(commands: Any, store: argparse.ArgumentParser) -> None:
    """Add this group's subcommands."""
    listing = commands.add_parser(
        "runs", parents=[store], help="list runs, newest first"
    )
    listing.add_argument(
        "--status", choices=RUN_STATUSES, help="only runs in this status"
    )
    listing.add_argument("--workflow", help="only runs of this workflow")
    listing.add_argument(
        "--version", help="only runs that started on this @workflow(version=)"
    )
    listing.add_argument(
        "--limit", type=int, default=50, help="at most N runs (default: %(default)s)"
    )
    prices.add_option(listing)
    listing.set_defaults(handler=list_runs)

    show = commands.add_parser(
        "show", parents=[store], help="show a run and its journal"
    )
    show.add_argument("run_id", help="the run to show")
    show.add_argument(
        "--full", action="store_true", help="print every step's whole value"
    )
    show.add_argument(
        "--app",
        action="append",
        default=[],
        help="import a module whose types outputs use, and show real objects "
        "(default: a generic view that needs no application code)",
    )
    show.add_argument(
        "--follow",
        action="store_true",
        help="then print each progress event the run publishes, until it ends",
    )
    prices.add_option(show)
    show.set_defaults(handler=show_run)
    _register_driving(commands, store)


def _register_driving(commands: Any, store: argparse.ArgumentParser) -> None:
    """The subcommands that change a run: resume, send, fork, cancel."""
    resume = commands.add_parser("resume", parents=[store], help="resume a run by id")
    resume.add_argument("run_id", help="the run to resume")
    resume.add_argument(
        "--app",
        required=True,
        help="module that defines the run's workflow (e.g. myapp.flows)",
    )
    resume.add_argument(
        "--wait",
        action="store_true",
        help="block while the run waits for input or sleeps, until it ends "
        "(default: return, saying what it waits for)",
    )
    resume.set_defaults(handler=resume_run)

    send = commands.add_parser(
        "send", parents=[store], help="deliver input to a run waiting in wait_for(KEY)"
    )
    send.add_argument("run_id", help="the waiting run")
    send.add_argument("key", help="the key it waits for in wait_for(KEY)")
    send.add_argument("value", help="the value, as JSON")
    send.add_argument(
        "--early",
        action="store_true",
        help="send KEY though the run does not wait for it now (its wait_for(KEY) "
        "later returns it at once)",
    )
    send.set_defaults(handler=send_input)

    fork = commands.add_parser(
        "fork", parents=[store], help="new run sharing the first N steps of a run"
    )
    fork.add_argument("run_id", help="the run to fork")
    fork.add_argument(
        "--at-step",
        type=int,
        required=True,
        help="the new run shares this run's steps up to this one (as `show` numbers them)",
    )
    fork.add_argument("--new-id", help="id for the new run (default: generated)")
    fork.set_defaults(handler=fork_run)

    cancel = commands.add_parser("cancel", parents=[store], help="cancel a run")
    cancel.add_argument("run_id", help="the run to cancel")
    cancel.set_defaults(handler=cancel_run)


async def list_runs(args: argparse.Namespace) -> int:
    """Print runs as a table."""
    async with Engine(args.store, prices=prices.price_table(args)) as engine:
        found = await engine.runs(
            status=args.status,
            workflow=args.workflow,
            limit=args.limit,
            version=args.version,
        )
        ledgers = [await _ledger_or_none(engine, run.run_id) for run in found]
    if not found:
        print(f"no runs in {store_label(args.store)}")
        return 0
    rows = [
        [
            run.run_id,
            run.workflow,
            run.version or "-",
            run.status,
            when(run.created_at),
            when(run.updated_at),
            _spend(ledger.incurred) if ledger else "?",
            _spend(ledger.reused) if ledger else "?",
        ]
        for run, ledger in zip(found, ledgers, strict=True)
    ]
    headers = [
        "RUN",
        "WORKFLOW",
        "VERSION",
        "STATUS",
        "CREATED (UTC)",
        "UPDATED (UTC)",
        "INCURRED",
        "REUSED",
    ]
    print(table(headers, rows))
    known = [ledger for ledger in ledgers if ledger is not None]
    incurred = sum((ledger.incurred for ledger in known), Spend())
    reused = sum((ledger.reused for ledger in known), Spend())
    print(f"\ntotal: incurred {_spend(incurred)}; replay reused {_spend(reused)}")
    print(f"store: {store_label(args.store)}")
    return 0


async def _ledger_or_none(engine: Engine, run_id: str) -> Ledger | None:
    try:
        return await engine.ledger(run_id)
    except ResumableError:  # unreadable here (e.g. encrypted, no key): shown as "?"
        return None


def _spend(spend: Spend) -> str:
    return spend_text(spend) if spend.calls else "-"


def _print_ledger(ledger: Ledger) -> None:
    """The run's spend: incurred, reused, per execution, and what is unpriced."""
    print(f"incurred  {_spend(ledger.incurred)}")
    print(f"reused    {_spend(ledger.reused)} (replayed instead of re-called)")
    if ledger.cached_steps:
        print(
            f"  of which {plural(ledger.cached_steps, 'step')} served from the "
            f"step cache: {_spend(ledger.cached)}"
        )
    for execution in ledger.executions:
        print(
            f"  execution {execution.fence}: incurred {_spend(execution.incurred)}; "
            f"replayed {plural(execution.replayed_steps, 'step')}, "
            f"reused {_spend(execution.reused)}"
        )
    if ledger.unpriced_models:
        print(
            f"unpriced  {', '.join(ledger.unpriced_models)}: tokens counted, no "
            "price known; give one with --price MODEL=IN,OUT (USD per 1M tokens)"
        )
    if ledger.incurred.unmetered_calls:
        print(
            f"unmetered {ledger.incurred.unmetered_calls} calls whose usage could "
            "not be known (no usage in the response, or a stream not read to "
            "its end): counted, tokens and $ unknown"
        )


async def show_run(args: argparse.Namespace) -> int:
    """Print a run's summary and its journal."""
    for app in args.app:
        _import_app(app)
    register_known_types()
    async with Engine(args.store, prices=prices.price_table(args)) as engine:
        run = await engine.get(args.run_id)
        steps = await engine.history(args.run_id)
        children = await engine.runs(parent=args.run_id, limit=1000)
        forks = await engine.runs(forked_from=args.run_id, limit=1000)
        ledger = await _ledger_or_none(engine, args.run_id)
        progress = (
            await engine.events(args.run_id)
            if engine.capabilities.feeds is not None
            else {}
        )
    print(f"run       {run.run_id}")
    print(f"workflow  {run.workflow}")
    if run.version is not None:
        print(f"version   {run.version} (the code version it started on)")
    print(f"status    {run.status}")
    _print_outcome(run, full=args.full)
    print(f"created   {when(run.created_at)} UTC   updated {when(run.updated_at)} UTC")
    if run.forked_from is not None:
        print(f"forked    from {run.forked_from} at step {run.fork_seq}")
    if run.parent_id is not None:
        print(f"parent    {run.parent_id}")
    if ledger is not None and (ledger.incurred.calls or ledger.reused.calls):
        _print_ledger(ledger)
    for child in sorted(children, key=lambda c: c.run_id):
        print(f"child     {child.run_id}  {child.workflow}  {child.status}")
    for forked in forks:
        print(f"fork      {forked.run_id} (at step {forked.fork_seq})  {forked.status}")
    for key, value in progress.items():
        print(f"progress  {key} = {one_line(value, _OUTPUT_WIDTH)}")
    _print_journal(steps, full=args.full, typed=bool(args.app))
    if args.follow:
        return await _follow(args)
    return 0


async def _follow(args: argparse.Namespace) -> int:
    """Print each progress event as the run publishes it, then how the run ended."""
    async with Engine(args.store) as engine:
        print(f"following {args.run_id} (Ctrl-C stops)", flush=True)
        async for event in engine.watch(args.run_id):
            print(
                f"event     {when(event.published_at)} UTC  #{event.offset}  "
                f"{event.key} = {one_line(event.value, _OUTPUT_WIDTH)}",
                flush=True,
            )
        run = await engine.get(args.run_id)
    print(f"status    {run.status}")
    return 0


def _print_outcome(run: RunView, *, full: bool) -> None:
    """When it wakes, why it failed (with where), its input and its result."""
    now = datetime.now(UTC)
    if run.wake_at is not None and run.status in ("sleeping", "waiting"):
        label = "wakes  " if run.status == "sleeping" else "timeout"
        print(f"{label}   {moment_text(run.wake_at, now)}")
    if run.error is not None:
        print(f"error     {run.error}")
        lines = (run.error_traceback or "").rstrip().splitlines()
        tail = lines if full else lines[-_TRACEBACK_LINES:]
        if len(tail) < len(lines):
            print(f"          ... (--full prints all {len(lines)} lines)")
        for line in tail:
            print(f"          {line}")
    if isinstance(run.input, dict):
        kwargs = run.input.get("kwargs")
        call = one_line(run.input.get("args"), _OUTPUT_WIDTH) + (
            f" {one_line(kwargs, _OUTPUT_WIDTH)}" if kwargs else ""
        )
        print(f"input     {call}")
    if run.status == "succeeded":
        print(f"result    {one_line(run.result, _OUTPUT_WIDTH * 2)}")
    for problem in run.unreadable:
        print(f"unreadable {problem}")


def _print_journal(steps: list[StepView], *, full: bool, typed: bool) -> None:
    """The journal table; `full` adds every step's whole value below it."""
    if not steps:
        print("\nno steps recorded")
        return
    headers = [
        "SEQ",
        "STEP",
        "STATUS",
        "ATTEMPTS",
        "DURATION",
        "OUTPUT",
        "ARGS",
        "VALUE",
    ]
    rows = [
        [
            step_label(s),
            s.name + _provenance(s),
            s.status,
            str(s.attempts),
            duration(s.duration_ms),
            size(s.output_bytes),
            s.fingerprint[:8],
            "" if full else _preview(s, typed=typed),
        ]
        for s in steps
    ]
    print()
    print(table(headers, rows, right=[3, 4, 5]))
    if full:
        for s in steps:
            print(f"\n#{step_label(s)} {s.name}\n{_whole(s, typed=typed)}")


def _provenance(step: StepView) -> str:
    """Where a step's value came from, if not from running it in this run."""
    if step.inherited_from:
        return f" (from {step.inherited_from})"
    source = step.cached_from()
    return "" if source is None else f" (cached from {source[0]})"


def step_label(step: StepView) -> str:
    """The step's number: `3`, a `map_steps` item under its call `3 [mail-0]`.

    An item recorded before map calls listed their keys shows its stored hash.
    """
    if step.item_key is not None:
        return f"{step.seq} [{clip(step.item_key, 24)}]"
    if kind_of(step.seq) is JournalKind.BATCH_ITEM:
        return f"item:{index_of(step.seq):x}"[:13]
    return str(step.seq)


def _import_app(app: str) -> None:
    sys.path.insert(0, str(Path.cwd()))
    try:
        importlib.import_module(app)
    except ImportError as exc:
        raise UsageError(f"cannot import --app {app!r}: {exc}") from None


def _preview(step: StepView, *, typed: bool) -> str:
    """One line of a step's value: its generic view, or with --app its repr."""
    try:
        if step.status == "waiting":  # a sleep or wait_for: its deadline, as a date
            deadline = deadline_text(step.view(), datetime.now(UTC))
            if deadline is not None:
                return deadline
        if typed:
            return clip(repr(step.output()), _OUTPUT_WIDTH)
        return one_line(step.view(), _OUTPUT_WIDTH)
    except ResumableError as exc:
        return clip(_unreadable(exc, typed=typed), _OUTPUT_WIDTH)


def _whole(step: StepView, *, typed: bool) -> str:
    """A step's whole value: its view as indented JSON, or with --app its repr."""
    try:
        if typed:
            return repr(step.output())
        return json.dumps(step.view(), indent=2, ensure_ascii=False)
    except ResumableError as exc:
        return _unreadable(exc, typed=typed)


def _unreadable(exc: ResumableError, *, typed: bool) -> str:
    if typed:  # a type the --app modules did not register, or a damaged value
        return f"<unreadable here: {exc}> (--app MODULE imports your types)"
    return f"<unreadable: {exc}>"


async def resume_run(args: argparse.Namespace) -> int:
    """Import the app module, then resume the run to its end or its next wait."""
    _import_app(args.app)
    stopped = waiting.Suspended(args.run_id)
    async with Engine(args.store, observers=[stopped]) as engine:
        run = await engine.get(args.run_id)
        spec = WORKFLOWS.get(run.workflow)
        if run.version is not None or (spec is not None and spec.version is not None):
            # versions are in use: say which code the run started on, even none
            print(f"run {args.run_id} {_started_on(run.version)}", flush=True)
        if args.wait:
            result = await engine.resume(args.run_id)
        else:
            result = await waiting.resume_until_suspended(engine, args.run_id, stopped)
            if result is waiting.SUSPENDED:
                await waiting.explain(engine, args)
                return 0
    print(f"run {args.run_id} succeeded: {clip(repr(result), 200)}")
    return 0


async def send_input(args: argparse.Namespace) -> int:
    """Parse the JSON value and deliver it."""
    try:
        value = json.loads(args.value)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"VALUE must be JSON ({exc}); quote strings: '\"yes\"'"
        ) from None
    async with Engine(args.store) as engine:
        if not args.early:
            await waiting.refuse_unawaited(engine, args.run_id, args.key)
        await engine.send(args.run_id, args.key, value)
    print(
        f"sent {args.key!r} to run {args.run_id}; a worker (or `resumable resume`) continues it"
    )
    return 0


async def fork_run(args: argparse.Namespace) -> int:
    """Create the fork and print its id."""
    async with Engine(args.store) as engine:
        new_id = await engine.fork(
            args.run_id, at_step=args.at_step, run_id=args.new_id
        )
        version = (await engine.get(new_id)).version
    started = "" if version is None else f"; {args.run_id} {_started_on(version)}"
    print(f"run {new_id} forked from {args.run_id} at step {args.at_step}{started}")
    print(f"continue it with: resumable resume {new_id} --app MODULE")
    return 0


def _started_on(version: str | None) -> str:
    if version is None:
        return "started on a workflow without a version"
    return f"started on workflow version {version}"


async def cancel_run(args: argparse.Namespace) -> int:
    """Cancel a run and say what it is now."""
    async with Engine(args.store) as engine:
        status = await engine.cancel(args.run_id)
    if status == "cancelled":
        print(f"run {args.run_id} cancelled")
        return 0
    print(f"run {args.run_id} had already ended: {status}")
    return 0
