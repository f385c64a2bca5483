"""The tamper suite's scenario: what it fills a store with, and what it then does.

`populate` writes, through the public API, every kind of row the suite damages
(the states only where the store implements `SnapshotStore`):
a finished run with a child and a gather, a failed run, a run waiting for its
second input, a fork, a ledger (recorded usage) and a state thread of 18 saves
(enough for its older rows to be packed). `actions` are what the suite does to
a damaged store: resume every run, list, show (through the API and the CLI) and
load every saved state.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import io
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from resumable._engine.context import current_run
from resumable._engine.decorators import step, workflow
from resumable._engine.engine import Engine
from resumable._engine.waits import wait_for
from resumable.errors import ResumableError

# --------------------------------------------------------------- the scenario

EXECUTED: Counter[tuple[str, str]] = Counter()
"""(run id, step) -> how many times the suite's steps ran (process-wide, reset per case)."""


@dataclasses.dataclass(frozen=True)
class TamperScore:
    """A registered type inside stored values (named by a step annotation)."""

    label: str
    value: float


def _executed(name: str) -> None:
    EXECUTED[(current_run().run_id, name)] += 1


@step(name="tamper.fetch")
async def _fetch(i: int) -> str:
    _executed("tamper.fetch")
    current_run().record_usage(model="gpt-5-mini", input_tokens=100, output_tokens=20)
    return f"document {i}: " + "lorem ipsum dolor sit amet " * 80


@step(name="tamper.score")
async def _score(i: int) -> TamperScore:
    _executed("tamper.score")
    return TamperScore(label=f"s{i}", value=i / 3)


@step(name="tamper.broken")
async def _broken() -> None:
    _executed("tamper.broken")
    raise RuntimeError("this step always fails")


@workflow(name="resumable.tamper:child")
async def _child(i: int) -> TamperScore:
    return await _score(i + 100)


@workflow(name="resumable.tamper:flow")
async def _flow(n: int) -> dict[str, Any]:
    texts = [await _fetch(i) for i in range(n)]
    scores = list(await asyncio.gather(*(_score(i) for i in range(n))))
    child = await _child(n)
    return {"texts": texts, "scores": scores, "child": child, "when": (n, b"\x00")}


@workflow(name="resumable.tamper:fails")
async def _fails() -> None:
    await _fetch(0)
    await _broken()


@workflow(name="resumable.tamper:waits")
async def _waits() -> Any:
    await _fetch(1)
    return [await wait_for("approval"), await wait_for("second")]


RUNS = ("t-done", "t-failed", "t-waiting", "t-fork")
THREAD = "t-thread"


async def populate(engine: Engine) -> None:
    """Fill a store through the public API: every kind of row the suite damages."""
    await engine.run(_flow, 2, run_id="t-done")
    with contextlib.suppress(ResumableError):
        await engine.run(_fails, run_id="t-failed")
    waiting = asyncio.ensure_future(engine.run(_waits, run_id="t-waiting"))
    await _until_waiting(engine, "t-waiting", inputs=0)
    await engine.send("t-waiting", "approval", {"ok": True, "by": "tamper"})
    await _until_waiting(engine, "t-waiting", inputs=1)
    waiting.cancel()  # the run stays recorded as waiting for "second"
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    await engine.fork("t-done", at_step=1, run_id="t-fork")
    if not engine.capabilities.snapshots:
        return  # a store of runs alone: there are no states to damage
    messages: list[Any] = []
    for i in range(18):  # past the 16 saves that pack a thread's older rows
        messages.append({"role": "user", "content": f"message {i} " * 20})
        await engine.save_state(
            THREAD,
            {"messages": list(messages), "score": TamperScore(label="m", value=i)},
            label=f"save {i}",
        )


async def _until_waiting(engine: Engine, run_id: str, *, inputs: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        await asyncio.sleep(0.005)
        with contextlib.suppress(ResumableError):  # not created yet
            steps = await engine.history(run_id)
            if (await engine.get(run_id)).status == "waiting" and len(
                steps
            ) > inputs + 1:
                return
    raise AssertionError(f"{run_id} did not wait")


# --------------------------------------------------------------- the actions


async def _resume(engine: Engine, run_id: str) -> None:
    if run_id == "t-waiting":  # resumed, it would wait for this
        with contextlib.suppress(ResumableError):
            await engine.send(run_id, "second", [1, 2])
    await engine.resume(run_id)


async def _show(engine: Engine, run_id: str) -> None:
    await engine.get(run_id)
    for entry in await engine.history(run_id):
        entry.output()
    await engine.ledger(run_id)


async def _load(engine: Engine) -> None:
    await engine.load_state(THREAD)
    for checkpoint in await engine.state_history(THREAD):
        await engine.load_state(THREAD, checkpoint_id=checkpoint.checkpoint_id)


async def _list(engine: Engine) -> None:
    await engine.runs(limit=100)
    await engine.runs(status="failed", limit=100)
    await engine.count_runs()  # the dashboard's runs page


async def _threads(engine: Engine) -> None:
    await engine.threads(limit=100)  # the dashboard's /threads


async def _export(engine: Engine) -> None:
    async for _ in engine.export():
        pass


def _cli_show(url: str, run_id: str) -> None:
    from resumable.cli import main

    with (
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()) as err,
    ):
        status = main(["show", run_id, "--store", url])
    message = err.getvalue()
    if status not in (0, 1) or "Traceback" in message or "never retrieved" in message:
        raise AssertionError(f"exit {status}, stderr {message[-300:]!r}")


async def _cli_show_elsewhere(url: str, run_id: str) -> None:
    # the CLI runs its own event loop: on a thread of its own, as in a shell
    await asyncio.to_thread(_cli_show, url, run_id)


def actions(
    engine: Engine, url: str | None
) -> Iterator[tuple[str, Callable[[], Awaitable[Any]]]]:
    """(name, call) of each action the suite takes on a damaged store.

    Those a store cannot serve are left out: listing without `RunListing`, states
    without `SnapshotStore`, the CLI when the store has no URL.
    """
    if engine.capabilities.listing:
        yield "list runs", functools.partial(_list, engine)
        yield "export", functools.partial(_export, engine)
    for run_id in RUNS:
        yield f"show {run_id}", functools.partial(_show, engine, run_id)
        yield f"resume {run_id}", functools.partial(_resume, engine, run_id)
    if url is not None:  # the CLI opens the store itself
        yield "cli show t-done", functools.partial(_cli_show_elsewhere, url, "t-done")
    if engine.capabilities.snapshots:
        yield "load state", functools.partial(_load, engine)
        if engine.capabilities.listing:
            yield "list threads", functools.partial(_threads, engine)
