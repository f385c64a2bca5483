from __future__ import annotations

import asyncio
from datetime import timedelta

from resumable import Engine, step, wait_for, workflow
from resumable.stores.protocol import Store
from resumable.testing import FakeClock

DAY = 86_400


@step
async def work(i: int) -> int:
    return i


@workflow(name="tests.gc.job")
async def job(i: int) -> int:
    return await work(i)


@workflow(name="tests.gc.waiter")
async def waiter() -> str:
    return str(await wait_for("never"))


async def test_gc_deletes_old_finished_runs_and_nothing_else(store: Store) -> None:
    clock = FakeClock()
    engine = Engine(store, clock=clock)
    for i in range(3):
        await engine.run(job, i, run_id=f"old-{i}")
    handle = await engine.start(waiter, run_id="waiting")
    while await handle.status() != "waiting":
        await asyncio.sleep(0.01)
    await engine.enqueue(job, 9, run_id="queued")
    fork = await engine.fork("old-0", at_step=1, run_id="fork-of-old-0")
    clock.advance(40 * DAY)
    await engine.run(job, 7, run_id="recent")

    preview = await engine.gc(older_than=timedelta(days=30), dry_run=True)
    assert sorted(preview.run_ids) == ["old-1", "old-2"]  # old-0 is shared by a fork
    assert preview.kept_for_forks == 1
    assert await store.get_run("old-1") is not None  # a dry run deletes nothing

    report = await engine.gc(older_than=timedelta(days=30))
    assert (report.runs, report.steps) == (2, 2)
    remaining = {r.run_id for r in await engine.runs(limit=100)}
    assert remaining == {"old-0", "waiting", "queued", fork, "recent"}
    assert await store.load_journal("old-1") == []  # no orphan journal left behind
    calls: list[int] = []

    @step
    async def fresh(i: int) -> int:
        calls.append(i)
        return i

    @workflow(name="tests.gc.reuse")
    async def reuse() -> int:
        return await fresh(5)

    assert await engine.run(reuse, run_id="old-1") == 5  # a reused id starts afresh
    assert calls == [5]
    handle_task = asyncio.ensure_future(handle.cancel())
    await handle_task


async def test_ttl_and_keep_last(store: Store) -> None:
    clock = FakeClock()
    engine = Engine(store, clock=clock)
    await engine.run(job, 1, run_id="short-lived", ttl=timedelta(hours=1))
    await engine.run(job, 2, run_id="kept")
    clock.advance(2 * 3600)
    report = await engine.gc()
    assert report.run_ids == ("short-lived",)

    for i in range(5):
        clock.advance(1)
        await engine.run(job, 10 + i, run_id=f"batch-{i}")
    clock.advance(90 * DAY)
    report = await engine.gc(older_than=timedelta(days=30), keep_last=2)
    assert sorted(report.run_ids) == ["batch-0", "batch-1", "batch-2", "kept"]
    assert {r.run_id for r in await engine.runs()} == {"batch-3", "batch-4"}


async def test_gc_sweeps_chunks_no_snapshot_uses(store: Store) -> None:
    engine = Engine(store)
    await engine.save_state("t1", {"messages": ["x" * 300, "y" * 300]})
    await engine.save_state("t2", {"messages": ["x" * 300]})
    await engine.delete_thread("t1")
    report = await engine.gc()
    assert report.chunks == 1  # "y..." only; "x..." is still used by t2
    assert await engine.load_state("t2") == {"messages": ["x" * 300]}
