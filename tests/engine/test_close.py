"""Closing an Engine while a run it started waits for input (the approval pattern)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from conftest import store_url
from resumable import Engine, RunHandle, StoreError, wait_for, workflow
from resumable.stores import create_store
from resumable.stores.protocol import Store
from resumable.testing import FakeClock


@workflow(name="tests.close.approval")
async def approval() -> str:
    approved = await wait_for("approval")
    return "paid" if approved else "rejected"


async def until_waiting(handle: RunHandle) -> None:
    """Poll for up to 10 s until the started run is recorded as waiting."""
    for _ in range(1000):
        if await handle.status() == "waiting":
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {handle.run_id} never waited")


def store_threads(tmp_path: Path) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if str(tmp_path) in t.name]


async def test_closing_an_engine_stops_its_waiting_run_which_stays_waiting_in_the_store(
    backend: str, tmp_path: Path
) -> None:
    url = store_url(backend, tmp_path)
    memory = create_store(url) if backend == "memory" else None

    def a_process_store() -> Store:  # memory: one store stands for both processes
        return memory if memory is not None else create_store(url)

    # a FakeClock's sleep returns at once: the started run re-reads its status in
    # a loop, so it is ready to call the store while the engine closes it
    engine = Engine(a_process_store(), clock=FakeClock())
    handle = await engine.start(approval, run_id="expense-1")
    await until_waiting(handle)
    async with asyncio.timeout(10):  # a hang guard: close returns in ms
        await engine.close()
    result = asyncio.ensure_future(handle.result())
    await asyncio.wait({result}, timeout=10)  # a hang guard, as above
    assert result.cancelled()  # stopped by close, not polling a closed store
    assert store_threads(tmp_path) == []  # the store was not opened again
    later = Engine(a_process_store())
    try:  # another process continues the run, which still waits
        assert (await later.get("expense-1")).status == "waiting"
        await later.send("expense-1", "approval", True)
        assert await later.resume("expense-1") == "paid"
    finally:
        drop = getattr(later.store, "drop", None)
        if drop is not None:
            await drop()
        await later.close()


async def test_a_closed_sqlite_store_refuses_calls_instead_of_opening_again(
    tmp_path: Path,
) -> None:
    store = create_store(f"sqlite:///{tmp_path / 'state.db'}")
    assert await store.get_run("none") is None
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.get_run("none")
    assert store_threads(tmp_path) == []
    await store.close()  # closing twice is harmless
