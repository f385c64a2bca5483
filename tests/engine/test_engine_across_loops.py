"""One Engine, made once (as at module level), used from consecutive `asyncio.run`s."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest

from conftest import BACKENDS, store_url
from resumable import Engine, step, workflow
from resumable.stores import create_store


@step
async def plus_one(x: int) -> int:
    return x + 1


@workflow(name="tests.loops.add")
async def add(x: int) -> int:
    return await plus_one(x)


async def _statuses(engine: Engine) -> dict[str, str]:
    return {view.run_id: view.status for view in await engine.runs()}


async def _drop(url: str) -> None:
    store = create_store(url)
    try:
        drop = getattr(store, "drop", None)
        if drop is not None:
            await drop()
    finally:
        await store.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_engine_serves_consecutive_event_loops_and_closes_from_any(
    backend: str, tmp_path: Path
) -> None:
    url = store_url(backend, tmp_path)
    engine = Engine(url)
    try:
        assert asyncio.run(engine.run(add, 1, run_id="a")) == 2
        assert asyncio.run(engine.run(add, 2, run_id="b")) == 3
        assert asyncio.run(_statuses(engine)) == {"a": "succeeded", "b": "succeeded"}
    finally:
        asyncio.run(engine.close())  # a loop of its own, after the others closed
        asyncio.run(_drop(url))
    gc.collect()  # a client left on a closed loop would warn (an error here) now


@pytest.mark.timeout(30)
@pytest.mark.parametrize("backend", BACKENDS)
def test_loop_after_loop_never_waits_on_a_connection_being_made(
    backend: str, tmp_path: Path
) -> None:
    # asyncio.run cancels the tasks a loop leaves and waits for them: a pool
    # task still connecting then (psycopg's retries a cancelled connect) hung
    # the third or so of these loops
    url = store_url(backend, tmp_path)
    try:
        for i in range(12):
            engine = Engine(url)
            assert asyncio.run(engine.run(add, i, run_id=f"r{i}")) == i + 1
            assert asyncio.run(_statuses(engine))[f"r{i}"] == "succeeded"
            asyncio.run(engine.close())
    finally:
        asyncio.run(_drop(url))
    gc.collect()


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_engine_closed_inside_a_later_loop_closes_cleanly(
    backend: str, tmp_path: Path
) -> None:
    url = store_url(backend, tmp_path)
    engine = Engine(url)

    async def second() -> int:
        try:
            return await engine.run(add, 5, run_id="b")
        finally:
            await engine.close()

    try:
        assert asyncio.run(engine.run(add, 4, run_id="a")) == 5
        assert asyncio.run(second()) == 6
    finally:
        asyncio.run(_drop(url))
    gc.collect()
