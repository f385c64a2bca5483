"""The step cache across runs: `@step(cache=...)`, served from another run's journal."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from pathlib import Path

import pytest

from resumable import CachePolicy, Engine, current_run, map_steps, step, workflow
from resumable.observability.metrics import Metrics
from resumable.serde import KeyRing
from resumable.stores.blobs import FileBlobs
from resumable.stores.offload import OffloadStore
from resumable.stores.protocol import Store
from resumable.stores.stubs import SupportsArchive
from resumable.testing import FakeClock
from resumable.ui.run_page import render_live

CALLS: list[str] = []


@step(name="tests.cache.summarize", cache=True)
async def summarize(doc: str) -> str:
    CALLS.append(doc)
    current_run().record_usage(model="gpt-5-mini", input_tokens=1000, output_tokens=100)
    return f"summary of {doc}"


@step(name="tests.cache.report")
async def report(summaries: list[str]) -> str:
    CALLS.append("report")
    return " | ".join(summaries)


@workflow(name="tests.cache.pipeline")
async def pipeline(docs: list[str]) -> str:
    summaries = await map_steps(summarize, docs, progress=False)
    return await report(summaries)


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    CALLS.clear()


async def test_a_second_run_is_served_from_the_first_runs_journal(store: Store) -> None:
    engine = Engine(store)
    docs = ["a", "b", "c"]
    first = await engine.run(pipeline, docs, run_id="cache-1")
    assert sorted(CALLS) == ["a", "b", "c", "report"]
    CALLS.clear()
    second = await engine.run(pipeline, docs, run_id="cache-2")
    assert second == first
    assert CALLS == ["report"]  # the uncached step only
    source, served = await engine.ledger("cache-1"), await engine.ledger("cache-2")
    assert served.incurred.calls == 0
    assert served.cached_steps == 3
    assert served.reused.calls == 3
    assert served.reused.total_tokens == source.incurred.total_tokens
    assert served.reused.cost_usd == pytest.approx(source.incurred.cost_usd)
    assert served.cached.cost_usd == pytest.approx(source.incurred.cost_usd)
    assert served.cached.cost_usd > 0
    # the served rows are the run's own: replayed like any step, showing their source
    history = await engine.history("cache-2")
    sources = {s.item_key: s.cached_from() for s in history if s.item_key}
    assert {key: src[0] for key, src in sources.items() if src} == {
        "a": "cache-1",
        "b": "cache-1",
        "c": "cache-1",
    }
    exported = [s async for s in engine.export(["cache-2"]) if s.item_key]
    assert {s.cached_from_run for s in exported} == {"cache-1"}
    CALLS.clear()
    assert await engine.run(pipeline, docs, run_id="cache-2") == first
    assert CALLS == []


async def test_keys_change_with_the_arguments_and_the_steps_code(store: Store) -> None:
    engine = Engine(store)
    await engine.run(pipeline, ["a", "b"], run_id="args-1")
    CALLS.clear()
    await engine.run(pipeline, ["a", "z"], run_id="args-2")
    assert sorted(CALLS) == ["report", "z"]

    CALLS.clear()

    @step(name="tests.cache.summarize", cache=True)  # same name, new code
    async def summarize_v2(doc: str) -> str:
        CALLS.append(doc)
        return f"short summary of {doc}"

    @workflow(name="tests.cache.pipeline_v2")
    async def pipeline_v2(docs: list[str]) -> list[str]:
        return await map_steps(summarize_v2, docs, progress=False)

    assert await engine.run(pipeline_v2, ["a"], run_id="code-1") == [
        "short summary of a"
    ]
    assert CALLS == ["a"]


@step(name="tests.cache.versioned", cache=CachePolicy(scope="store"), version="1")
async def versioned(n: int) -> int:
    CALLS.append(f"v{n}")
    return n * 2


@workflow(name="tests.cache.one")
async def one(n: int) -> int:
    return await versioned(n)


@workflow(name="tests.cache.other")
async def other(n: int) -> int:
    return await versioned(n) + 1


async def test_a_store_scoped_entry_serves_every_workflow_and_clear_removes_it(
    store: Store,
) -> None:
    engine = Engine(store)
    assert await engine.run(one, 4, run_id="scope-1") == 8
    assert await engine.run(other, 4, run_id="scope-2") == 9
    assert CALLS == ["v4"]
    assert await engine.clear_cache(step="tests.cache.versioned") == 1
    assert await engine.run(one, 4, run_id="scope-3") == 8
    assert CALLS == ["v4", "v4"]
    assert await engine.clear_cache(workflow="no-such-workflow") == 0
    assert await engine.clear_cache(workflow="tests.cache.one") == 1


@step(name="tests.cache.fleeting", cache=CachePolicy(ttl=timedelta(minutes=5)))
async def fleeting(n: int) -> int:
    CALLS.append(f"f{n}")
    return n


@workflow(name="tests.cache.fleeting_flow")
async def fleeting_flow(n: int) -> int:
    return await fleeting(n)


async def test_an_entry_past_its_ttl_is_a_miss(store: Store) -> None:
    clock = FakeClock()
    engine = Engine(store, clock=clock)
    await engine.run(fleeting_flow, 1, run_id="ttl-1")
    clock.advance(299)
    await engine.run(fleeting_flow, 1, run_id="ttl-2")
    assert CALLS == ["f1"]
    clock.advance(2)  # 301 s after it was recorded
    await engine.run(fleeting_flow, 1, run_id="ttl-3")
    assert CALLS == ["f1", "f1"]


async def test_an_encrypted_value_is_sealed_again_for_its_new_row(store: Store) -> None:
    keys = KeyRing({"k": os.urandom(32)}, current="k")
    engine = Engine(store, encryption_key=keys)
    first = await engine.run(pipeline, ["a"], run_id="enc-1")
    CALLS.clear()
    assert await engine.run(pipeline, ["a"], run_id="enc-2") == first
    assert CALLS == ["report"]
    item = next(s for s in await engine.history("enc-2") if s.item_key)
    assert item.output() == "summary of a"  # readable under its own row's place
    # an engine whose key cannot open the cached value misses, never fails
    stranger = Engine(store, encryption_key=KeyRing({"x": os.urandom(32)}, current="x"))
    CALLS.clear()
    assert await stranger.run(pipeline, ["a"], run_id="enc-3") == first
    assert CALLS == ["a", "report"]


async def test_a_hit_keeps_its_value_when_the_source_run_is_deleted(
    store: Store,
) -> None:
    clock = FakeClock()
    engine = Engine(store, clock=clock)
    first = await engine.run(pipeline, ["a", "b"], run_id="gc-1")
    clock.advance(2 * 86400)
    await engine.run(pipeline, ["a", "b"], run_id="gc-2")
    report = await engine.gc(older_than=timedelta(days=1))
    assert report.run_ids == ("gc-1",)
    CALLS.clear()
    assert await engine.run(pipeline, ["a", "b"], run_id="gc-2") == first
    assert CALLS == []  # gc-2's rows hold the values
    # the entries named gc-1's rows: gone, so the next run misses and executes
    assert await engine.run(pipeline, ["a", "b"], run_id="gc-3") == first
    assert sorted(CALLS) == ["a", "b", "report"]


async def test_an_archived_source_run_keeps_its_entries_and_serves_once_unarchived(
    store: Store, tmp_path: Path
) -> None:
    clock = FakeClock()
    engine = Engine(OffloadStore(store, FileBlobs(tmp_path / "objects")), clock=clock)
    if engine.capabilities.step_cache is None or not isinstance(store, SupportsArchive):
        pytest.skip("the store does not archive runs or keep a step cache")
    first = await engine.run(pipeline, ["a", "b"], run_id="arc-1")
    clock.advance(2 * 86400)
    archived = await engine.archive(older_than=timedelta(days=1))
    assert [a.name for a in archived if a.kind == "run"] == ["arc-1"]
    assert await engine.unarchive("arc-1")
    CALLS.clear()
    # the entries stayed while the rows were cold: served again (report is uncached)
    assert await engine.run(pipeline, ["a", "b"], run_id="arc-2") == first
    assert CALLS == ["report"]


BOTH_STARTED: list[asyncio.Event] = []  # made in the test, on its loop
STARTED: list[int] = []


@step(name="tests.cache.slow", cache=True)
async def slow(n: int) -> int:
    STARTED.append(n)
    if len(STARTED) == 2:
        BOTH_STARTED[0].set()
    await asyncio.wait_for(BOTH_STARTED[0].wait(), timeout=10)
    return n + 100


@workflow(name="tests.cache.slow_flow")
async def slow_flow(n: int) -> int:
    return await slow(n)


async def test_two_runs_that_miss_at_once_both_execute_and_commit_consistently(
    store: Store,
) -> None:
    BOTH_STARTED[:] = [asyncio.Event()]
    STARTED.clear()
    engine = Engine(store)
    a, b = await asyncio.gather(
        engine.run(slow_flow, 5, run_id="race-1"),
        engine.run(slow_flow, 5, run_id="race-2"),
    )
    assert (a, b) == (105, 105)
    assert STARTED == [5, 5]
    assert await engine.run(slow_flow, 5, run_id="race-3") == 105
    assert STARTED == [5, 5]  # served by whichever wrote the entry last
    for run_id in ("race-1", "race-2", "race-3"):
        assert await engine.resume(run_id) == 105


async def test_show_the_dashboard_and_export_say_where_a_cached_value_came_from(
    store: Store,
) -> None:
    engine = Engine(store)
    await engine.run(pipeline, ["a"], run_id="mark-1")
    await engine.rerun("mark-1", run_id="mark-2")
    page = await render_live(engine, "mark-2")
    assert page.count("(cached from <a href=") == 1
    assert "mark-1" in page
    rows = [s async for s in engine.export(["mark-2"])]
    assert [(s.item_key, s.cached_from_run) for s in rows] == [
        (None, None),
        ("a", "mark-1"),
        (None, None),
    ]
    run = await engine.get("mark-2")
    assert (run.forked_from, run.fork_seq) == ("mark-1", 0)


async def test_metrics_count_hits_misses_and_the_dollars_a_hit_saved(
    store: Store,
) -> None:
    metrics = Metrics()
    engine = Engine(store, observers=[metrics])
    await engine.run(pipeline, ["a", "b"], run_id="metrics-1")
    await engine.run(pipeline, ["a", "c"], run_id="metrics-2")
    labels = {"workflow": "tests.cache.pipeline", "step": "tests.cache.summarize"}
    assert metrics.value("resumable_step_cache_lookups", **labels, result="miss") == 3
    assert metrics.value("resumable_step_cache_lookups", **labels, result="hit") == 1
    saved = metrics.value(
        "resumable_llm_cost_usd",
        workflow="tests.cache.pipeline",
        model="gpt-5-mini",
        source="cached",
    )
    ledger = await engine.ledger("metrics-2")
    assert saved == pytest.approx(ledger.cached.cost_usd)
    assert saved > 0
