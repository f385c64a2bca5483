"""Workers start each tick of a schedule once, on every store, on a fake clock."""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import pytest

from resumable import Engine, step, workflow
from resumable.errors import ScheduleNotFound
from resumable.observability import Metrics
from resumable.stores.protocol import Store
from resumable.testing import FakeClock

START = int(datetime(2026, 11, 28, 10, 0, tzinfo=UTC).timestamp() * 1000)
MINUTE = 60.0
executed: collections.Counter[str] = collections.Counter()


@step
async def record_tick(run_id: str) -> str:
    executed[run_id] += 1
    return run_id


@workflow(name="tests.schedules.digest")
async def digest(topic: str) -> str:
    from resumable import current_run

    return await record_tick(f"{current_run().run_id}|{topic}")


def tick_id(minute: int, hour: int = 10) -> str:
    return f"sched:digest:2026-11-28T{hour:02d}:{minute:02d}:00Z"


@asynccontextmanager
async def workers(
    store: Store,
    clock: FakeClock,
    count: int = 3,
    *,
    catch_up: int = 0,
    observers: tuple[Metrics, ...] = (),
) -> AsyncIterator[Engine]:
    """`count` engines on one store, each with the schedule and a running worker."""
    engines = [Engine(store, clock=clock, observers=observers) for _ in range(count)]
    for engine in engines:
        engine.schedule(
            digest, "*/15 * * * *", name="digest", args=("news",), catch_up=catch_up
        )
    stop = asyncio.Event()
    tasks = [
        asyncio.ensure_future(e.worker(poll_s=0.02, concurrency=2).run(stop=stop))
        for e in engines
    ]
    try:
        yield engines[0]
    finally:
        stop.set()
        await asyncio.gather(*tasks)


async def eventually(check: Callable[[], object], timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def succeeded(engine: Engine) -> list[str]:
    runs = await engine.runs(workflow="tests.schedules.digest", limit=100)
    return sorted(r.run_id for r in runs if r.status == "succeeded")


async def settle(engine: Engine, expected: list[str]) -> None:
    async def done() -> bool:
        return await succeeded(engine) == sorted(expected)

    await eventually(done)
    await asyncio.sleep(0.1)  # a duplicate would show up now
    assert await succeeded(engine) == sorted(expected)


@pytest.fixture(autouse=True)
def _reset() -> None:
    executed.clear()


async def test_three_workers_start_each_tick_exactly_once(store: Store) -> None:
    clock = FakeClock(START + 60_000)  # 10:01: the schedule is saved after 10:00
    async with workers(store, clock) as engine:
        await eventually(lambda: _saved(engine))
        expected: list[str] = []
        for minute in (15, 30, 45):
            clock.advance(15 * MINUTE)
            expected.append(tick_id(minute))
            await settle(engine, expected)
    assert sorted(executed) == sorted(f"{run}|news" for run in expected)
    assert set(executed.values()) == {1}


async def _saved(engine: Engine) -> bool:
    return bool(await engine.schedules())


async def test_after_downtime_skip_starts_only_the_latest_due_tick(
    store: Store,
) -> None:
    clock = FakeClock(START + 60_000)
    metrics = Metrics()
    async with workers(store, clock, observers=(metrics,)) as engine:
        await eventually(lambda: _saved(engine))
        clock.advance(15 * MINUTE)
        await settle(engine, [tick_id(15)])
    clock.advance(60 * MINUTE)  # 11:16, no worker: 10:30 10:45 11:00 11:15 missed
    async with workers(store, clock, count=2, observers=(metrics,)) as engine:
        await settle(engine, [tick_id(15), tick_id(15, hour=11)])
    assert (
        metrics.value("resumable_schedule_ticks", schedule="digest", outcome="skipped")
        == 3
    )
    assert (
        metrics.value("resumable_schedule_ticks", schedule="digest", outcome="fired")
        == 2
    )


async def test_after_downtime_catch_up_starts_at_most_n_missed_ticks(
    store: Store,
) -> None:
    clock = FakeClock(START + 60_000)
    metrics = Metrics()
    async with workers(store, clock, catch_up=2) as engine:
        await eventually(lambda: _saved(engine))
        clock.advance(15 * MINUTE)
        await settle(engine, [tick_id(15)])
    clock.advance(60 * MINUTE)  # 11:16
    async with workers(store, clock, catch_up=2, observers=(metrics,)) as engine:
        await settle(
            engine,
            [tick_id(15), tick_id(45), tick_id(0, hour=11), tick_id(15, hour=11)],
        )
    assert (
        metrics.value(
            "resumable_schedule_ticks", schedule="digest", outcome="caught_up"
        )
        == 2
    )
    assert (
        metrics.value("resumable_schedule_ticks", schedule="digest", outcome="skipped")
        == 1
    )


async def test_a_paused_schedule_starts_nothing_and_resumes_from_the_next_tick(
    store: Store,
) -> None:
    clock = FakeClock(START + 60_000)
    async with workers(store, clock, catch_up=5) as engine:
        await eventually(lambda: _saved(engine))
        paused = await engine.pause_schedule("digest")
        assert paused.record.paused
        assert paused.next_ticks_ms == ()
        clock.advance(30 * MINUTE)  # 10:31: 10:15 and 10:30 fall due while paused
        await asyncio.sleep(0.3)
        assert await succeeded(engine) == []
        resumed = await engine.resume_schedule("digest")
        assert not resumed.record.paused
        assert resumed.next_ticks_ms[0] == START + 45 * 60_000
        clock.advance(15 * MINUTE)
        await settle(engine, [tick_id(45)])
        with pytest.raises(ScheduleNotFound, match="nobody"):
            await engine.pause_schedule("nobody")
