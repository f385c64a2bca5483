from __future__ import annotations

import asyncio

from resumable import Engine, Queue, sleep, step, wait_for, workflow
from resumable.stores.protocol import RunRecord, Store
from resumable.testing import FakeClock

_IN_FLIGHT = {"now": 0, "max": 0}


@step
async def tracked(i: int) -> int:
    _IN_FLIGHT["now"] += 1
    _IN_FLIGHT["max"] = max(_IN_FLIGHT["max"], _IN_FLIGHT["now"])
    await asyncio.sleep(0.005)
    _IN_FLIGHT["now"] -= 1
    return i


@workflow(name="tests.worker.job")
async def job(i: int) -> int:
    return await tracked(i) + await tracked(i)


async def work_until(engine: Engine, done: int, **options: object) -> None:
    worker = engine.worker(poll_s=0.01, **options)  # type: ignore[arg-type]  # test options
    await asyncio.wait_for(worker.run(until=lambda w: w.completed >= done), timeout=30)


async def test_enqueue_is_idempotent_and_workers_run_queued_runs(store: Store) -> None:
    engine = Engine(store)
    ids = [await engine.enqueue(job, i, queue="q", run_id=f"job-{i}") for i in range(6)]
    assert await engine.enqueue(job, 0, queue="q", run_id="job-0") == "job-0"
    assert len(await engine.runs(status="queued")) == 6
    await work_until(engine, 6, concurrency=3, workflows=["tests.worker.job"])
    assert [
        await engine.run(job, i, run_id=run_id) for i, run_id in enumerate(ids)
    ] == [2 * i for i in range(6)]


async def test_queue_concurrency_holds(store: Store) -> None:
    engine = Engine(store)
    _IN_FLIGHT.update(now=0, max=0)
    for i in range(8):
        await engine.enqueue(job, i, queue="narrow", run_id=f"n-{i}")
    await work_until(
        engine,
        8,
        concurrency=8,
        queues={"narrow": Queue(concurrency=2)},
        workflows=["tests.worker.job"],
    )
    assert 1 <= _IN_FLIGHT["max"] <= 2
    assert len(await engine.runs(status="succeeded")) == 8


async def test_a_worker_takes_over_a_run_whose_owner_died(store: Store) -> None:
    engine = Engine(store, lease_ttl_s=0.2)
    await engine.enqueue(job, 7, run_id="orphan")
    # a process on another machine took the run and died: its lease just runs out
    await store.acquire_lease(
        "orphan", owner="elsewhere:1:x", now_ms=engine.clock.now_ms(), ttl_ms=200
    )
    await work_until(engine, 1, workflows=["tests.worker.job"])
    assert await engine.run(job, 7, run_id="orphan") == 14


async def test_workers_wake_sleeping_and_answered_runs(store: Store) -> None:
    clock = FakeClock()

    @workflow(name="tests.worker.patient")
    async def patient() -> str:
        await sleep(3600)
        return str(await wait_for("go"))

    engine = Engine(store, clock=clock)
    await engine.enqueue(patient, run_id="patient")
    worker = engine.worker(poll_s=0.01, workflows=["tests.worker.patient"])
    stop = asyncio.Event()
    task = asyncio.ensure_future(worker.run(stop=stop))

    async def status() -> str:
        run: RunRecord | None = await store.get_run("patient")
        return "missing" if run is None else run.status

    while await status() != "sleeping":
        await asyncio.sleep(0.01)
    clock.advance(3601)
    while await status() != "waiting":
        await asyncio.sleep(0.01)
    await engine.send("patient", "go", "now")
    while await status() != "succeeded":
        await asyncio.sleep(0.01)
    stop.set()
    await task
    assert await engine.run(patient, run_id="patient") == "now"
