"""A run that waits: `resume` returns at a wait and says how to answer it, `send` checks the key.

`resumable resume` drives a run until it ends or suspends (waits for input or
sleeps), then says what it waits for and prints the `resumable send` line that
answers it; `--wait` blocks instead, as `Engine.resume` does. `resumable send`
refuses a key the run does not wait for, listing those it does, unless `--early`
(the engine keeps taking early sends: `wait_for` then returns at once).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
from typing import Any, Final

from resumable._engine.engine import Engine
from resumable._engine.waits import unawaited
from resumable.observability import Observer
from resumable.stores import DEFAULT_URL

__all__ = [
    "SUSPENDED",
    "Suspended",
    "explain",
    "refuse_unawaited",
    "resume_until_suspended",
]

SUSPENDED: Final = object()
"""What `resume_until_suspended` returns when the run waits or sleeps."""


class Suspended(Observer):
    """Set when an execution of one run stops because it waits or sleeps."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.event = asyncio.Event()

    def execution_ended(
        self, ctx: Any, outcome: str, error: BaseException | None
    ) -> None:
        """Note a suspension of the watched run."""
        if ctx.run_id == self.run_id and outcome in ("waiting", "sleeping"):
            self.event.set()


async def resume_until_suspended(
    engine: Engine, run_id: str, stopped: Suspended
) -> Any:
    """The run's result, or SUSPENDED once it waits for input not sent or sleeps."""
    if await engine.awaited_keys(run_id):
        return SUSPENDED  # nothing it waits for has come: executing would only wait
    task = asyncio.ensure_future(engine.resume(run_id))
    while True:
        stop = asyncio.ensure_future(stopped.event.wait())
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if task.done():
            return task.result()
        stopped.event.clear()
        view = await engine.get(run_id)
        # an input sent meanwhile makes it runnable again: keep driving it
        if view.status == "sleeping" or await engine.awaited_keys(run_id):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            return SUSPENDED


async def explain(engine: Engine, args: argparse.Namespace) -> None:
    """Say what the suspended run waits for, and how to continue it."""
    view = await engine.get(args.run_id)
    awaited = await engine.awaited_keys(args.run_id)
    store = "" if args.store == DEFAULT_URL else f" --store {shlex.quote(args.store)}"
    run = shlex.quote(args.run_id)
    if not awaited:
        print(
            f"run {args.run_id} is {view.status}; a worker (`resumable worker --app "
            f"{args.app}`) continues it when it wakes, or `resumable resume {run} "
            f"--app {args.app} --wait`{store} waits for it here"
        )
        return
    names = ", ".join(repr(key) for key in awaited)
    print(f"run {args.run_id} is waiting for input {names}; send it with:")
    for key in awaited:
        print(f"  resumable send {run} {shlex.quote(key)} VALUE{store}")
    print(
        f"(VALUE as JSON, e.g. true or '\"yes\"'; then a worker or "
        f"`resumable resume {run} --app {args.app}` continues the run)"
    )


async def refuse_unawaited(engine: Engine, run_id: str, key: str) -> None:
    """Refuse a key the run does not wait for now, naming those it waits for.

    Raises:
        UsageError: the run waits for other keys, or for no input at all.
    """
    view = await engine.get(run_id)
    refusal = unawaited(
        run_id,
        key,
        awaited=await engine.awaited_keys(run_id),
        status=view.status,
        early="--early",
    )
    if refusal is not None:
        raise refusal
