"""Metrics that need the store's help: takeovers by claim, gc bytes, commit batches."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from conftest import open_test_store
from resumable import Engine, step, workflow
from resumable.observability import Metrics
from resumable.stores.protocol import Store
from resumable.testing import FakeClock


@step
async def _noted(i: int) -> int:
    return i + 1


@workflow(name="metered.claimed")
async def _claimed(i: int) -> int:
    return await _noted(i)


async def _crashed_elsewhere(store: Store, run_id: str, now_ms: int) -> None:
    """Leave the run as a process on another host that crashed would: leased, expired."""
    lease = await store.acquire_lease(
        run_id, owner="other-host:4242:dead", now_ms=now_ms - 60_000, ttl_ms=1000
    )
    assert lease is not None


async def test_a_worker_claiming_an_expired_lease_counts_a_takeover(
    store: Store,
) -> None:
    """On every store: the claim says whose lease it took; queued runs are no takeover."""
    metrics = Metrics()
    engine = Engine(store, observers=[metrics])
    now_ms = engine.clock.now_ms()
    await engine.enqueue(_claimed, 1, run_id="claimed-crashed")
    await engine.enqueue(_claimed, 2, run_id="claimed-queued")
    await _crashed_elsewhere(store, "claimed-crashed", now_ms)
    worker = engine.worker(poll_s=0.05)
    await asyncio.wait_for(worker.run(until=lambda w: w.completed >= 2), 20)
    assert await engine.run(_claimed, 1, run_id="claimed-crashed") == 2
    assert metrics.value("resumable_runs_claimed", queue="default") == 2
    assert metrics.value("resumable_lease_takeovers") == 1
    # resuming by id a run whose owner crashed elsewhere is a takeover too
    await engine.enqueue(_claimed, 3, run_id="resumed-crashed")
    await _crashed_elsewhere(store, "resumed-crashed", now_ms)
    assert await engine.resume("resumed-crashed") == 4
    assert metrics.value("resumable_lease_takeovers") == 2


@step
async def _sized(text: str) -> str:
    return text * 100


@workflow(name="metered.collected")
async def _collected(text: str) -> str:
    first = await _sized(text)
    return await _sized(first[:50])


async def test_gc_reports_and_counts_the_payload_bytes_it_deleted(
    store: Store,
) -> None:
    """On every store: the bytes gc reports are those the store held for the runs."""
    metrics = Metrics()
    clock = FakeClock()
    engine = Engine(store, observers=[metrics], clock=clock)
    held = 0
    for i in range(3):
        run_id = f"collected-{i}"
        await engine.run(_collected, f"doc {i} ", run_id=run_id)
        run = await store.get_run(run_id)
        assert run is not None
        held += len(run.input) + len(run.output or b"")
        held += sum(
            len(s.output or b"") + len(s.usage or b"")
            for s in await store.load_journal(run_id)
        )
        held += sum(len(value) for value in (await store.get_inputs(run_id)).values())
    assert held > 0
    clock.advance(7200)
    report = await engine.gc(older_than=timedelta(hours=1))
    assert report.runs == 3
    assert report.bytes == held
    assert metrics.value("resumable_gc_deleted_bytes") == held


@step
async def _grouped(run: int, i: int) -> int:
    await asyncio.sleep(0)
    return run * 10 + i


@workflow(name="metered.grouped")
async def _grouped_flow(run: int) -> int:
    return sum([await _grouped(run, i) for i in range(5)])


def _histogram(metrics: Metrics, name: str, **labels: str) -> tuple[float, float]:
    """A histogram's (count, sum) for these labels, as a registry exposes them."""
    registry = CollectorRegistry()
    registry.register(metrics)
    found = {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for sample in family.samples
    }
    key = frozenset(labels.items())
    return found.get((f"{name}_count", key), 0.0), found.get((f"{name}_sum", key), 0.0)


@pytest.mark.postgres
async def test_postgres_reports_the_size_of_each_group_of_step_commits(
    tmp_path: Path,
) -> None:
    """Concurrent runs' commits share transactions; each one's size is observed."""
    metrics = Metrics()
    async with open_test_store("postgres", tmp_path) as store:
        engine = Engine(store, observers=[metrics])
        runs = 20
        results = await asyncio.gather(
            *(engine.run(_grouped_flow, r, run_id=f"grouped-{r}") for r in range(runs))
        )
        assert results == [r * 50 + 10 for r in range(runs)]
    commits = metrics.value(
        "resumable_checkpoint_writes", store="postgresql", outcome="ok"
    )
    assert commits == runs * 5
    groups, written = _histogram(
        metrics, "resumable_commit_batch_size", store="postgresql"
    )
    assert written == commits  # every commit was in exactly one group
    assert groups < commits  # and some groups held several


async def test_stores_that_do_not_group_commits_report_no_batch_size(
    tmp_path: Path,
) -> None:
    metrics = Metrics()
    async with Engine(f"sqlite:///{tmp_path / 'one.db'}", observers=[metrics]) as e:
        await asyncio.gather(
            *(e.run(_grouped_flow, r, run_id=f"single-{r}") for r in range(3))
        )
    assert _histogram(metrics, "resumable_commit_batch_size", store="sqlite") == (0, 0)
