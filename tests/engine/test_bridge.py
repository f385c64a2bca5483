"""Where sync callers run coroutines: `run_here`, on the caller's own thread; the
bridge module is the only crossing, on public asyncio API."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import inspect
import re
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from resumable import Engine, step, workflow
from resumable._engine.bridge import run_here, running_loop

_who: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


async def _where() -> tuple[threading.Thread, asyncio.AbstractEventLoop]:
    await asyncio.sleep(0)
    return threading.current_thread(), asyncio.get_running_loop()


def test_run_here_runs_on_the_calling_thread_and_keeps_its_loop() -> None:
    first_thread, first_loop = run_here(_where())
    second_thread, second_loop = run_here(_where())

    assert first_thread is second_thread is threading.current_thread()
    assert first_loop is second_loop
    assert running_loop() is None  # the loop runs only during a call


def test_each_thread_has_its_own_loop_closed_when_the_thread_ends() -> None:
    found: list[tuple[threading.Thread, asyncio.AbstractEventLoop]] = []
    worker = threading.Thread(target=lambda: found.append(run_here(_where())))
    worker.start()
    worker.join()
    gc.collect()

    ((thread, loop),) = found
    assert thread is worker
    assert loop is not run_here(_where())[1]
    assert loop.is_closed()


def test_the_callers_context_variables_are_visible() -> None:
    async def who() -> str:
        return _who.get()

    token = _who.set("caller")
    try:
        assert run_here(who()) == "caller"
    finally:
        _who.reset(token)


def test_a_coroutine_runs_as_a_task_and_its_context_changes_stay_in_it() -> None:
    async def waits() -> tuple[str, str, asyncio.Task[Any] | None]:
        _who.set("inside")
        before = _who.get()
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        threading.Timer(
            0.01, lambda: loop.call_soon_threadsafe(done.set_result, "x")
        ).start()
        after = await done + _who.get()
        return before, after, asyncio.current_task()

    token = _who.set("caller")
    try:
        before, after, task = run_here(waits())
        assert _who.get() == "caller"  # the coroutine's own setting stayed in it
    finally:
        _who.reset(token)
    assert (before, after) == ("inside", "xinside")
    assert task is not None


@pytest.mark.parametrize("waits", [False, True])
def test_an_error_raised_before_or_after_waiting_reaches_the_caller(
    waits: bool,
) -> None:
    async def fails() -> None:
        if waits:
            await asyncio.sleep(0.001)
        raise LookupError("the coroutine's own error")

    with pytest.raises(LookupError, match="own error"):
        run_here(fails())
    assert running_loop() is None


async def test_run_here_refuses_a_thread_that_runs_a_loop() -> None:
    coro = _where()
    with pytest.raises(
        RuntimeError, match=r"runs an event loop.*await the coroutine on that loop"
    ):
        run_here(coro)
    # closed, not left to warn "never awaited" (warnings are errors here)
    assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED


def test_run_sync_works_from_plain_threads_and_from_a_thread_running_a_loop(
    tmp_path: Path,
) -> None:
    @step
    def double(x: int) -> int:
        return 2 * x

    @workflow
    def total(n: int) -> int:
        return sum(double(i) for i in range(n))

    engine = Engine(f"sqlite:///{tmp_path / 'b.db'}")
    with ThreadPoolExecutor(4) as pool:
        found = list(
            pool.map(lambda n: engine.run_sync(total, n, run_id=f"t{n}"), range(8))
        )
    assert found == [n * (n - 1) for n in range(8)]

    async def in_a_loop() -> int:  # blocks this loop: the run goes on the bridge's
        return engine.run_sync(total, 4, run_id="from-a-loop")

    assert asyncio.run(in_a_loop()) == 12


def test_run_sync_in_a_run_it_drives_raises_instead_of_deadlocking() -> None:
    engine = Engine("memory://")

    @workflow
    async def inner() -> int:
        return 1

    @workflow
    async def outer() -> str:
        try:
            engine.run_sync(inner, run_id="inner")
        except RuntimeError as exc:
            return str(exc)
        return "no error"

    assert "await engine.run(...) there instead" in engine.run_sync(outer, run_id="o")


def test_src_uses_public_asyncio_api_only_and_crosses_in_the_bridge_module() -> None:
    src = Path(__file__).parents[2] / "src" / "resumable"
    private = re.compile(r"asyncio\.(events\.)?_[a-z]")
    crossing = re.compile(r"run_coroutine_threadsafe|new_event_loop|run_until_complete")
    found: dict[str, list[str]] = {"private": [], "crossing": []}
    for path in src.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if private.search(text):
            found["private"].append(path.name)
        if crossing.search(text) and path.name != "bridge.py":
            found["crossing"].append(path.name)
    assert found == {"private": [], "crossing": []}


_EXITING_STEP = """
from resumable import Engine, step, workflow

@step
{async_}def leave() -> int:
    raise SystemExit(3)

@workflow(name="tests.exit")
{async_}def flow() -> int:
    return {await_}leave()

Engine("memory://").run_sync(flow, run_id="x")
print("not reached")
"""


@pytest.mark.parametrize("kind", ["async def", "def"])
def test_a_step_calling_sys_exit_under_run_sync_ends_the_program(kind: str) -> None:
    """asyncio re-raises SystemExit out of the bridge's loop; the caller still gets it."""
    is_async = kind == "async def"
    script = _EXITING_STEP.format(
        async_="async " if is_async else "", await_="await " if is_async else ""
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, timeout=30, check=False
    )
    assert done.returncode == 3, done.stderr.decode()
    assert b"not reached" not in done.stdout
