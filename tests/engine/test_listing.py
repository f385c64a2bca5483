"""Engine.runs_page and Engine.count_runs on every store: paging, filters, counts."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from resumable import Engine, ResumableError, RunFilter, workflow
from resumable.stores.memory import MemoryStore
from resumable.stores.protocol import Store
from resumable.testing import FakeClock, run_record


@workflow
async def listed(n: int) -> int:
    return n


@workflow
async def other(n: int) -> int:
    return -n


async def test_runs_page_walks_every_run_once_newest_first(
    store_engine: Engine,
) -> None:
    engine = store_engine
    for i in range(7):
        await engine.enqueue(listed, i, run_id=f"job-{i}", queue="q" if i % 2 else "p")
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = await engine.runs_page(limit=3, cursor=cursor)
        seen += [run.run_id for run in page.runs]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [f"job-{i}" for i in reversed(range(7))]
    last = await engine.runs_page(limit=7)
    assert len(last.runs) == 7
    assert last.next_cursor is None


async def test_runs_page_and_count_runs_apply_every_filter(
    store_engine: Engine, clock: FakeClock
) -> None:
    engine = store_engine
    await engine.enqueue(listed, 1, run_id="alpha-1")
    clock.advance(10)
    await engine.enqueue(listed, 2, run_id="alpha-2", queue="fast")
    await engine.enqueue(other, 3, run_id="beta-3")
    await engine.cancel("alpha-2")
    page = await engine.runs_page(RunFilter(run_id_prefix="alpha"))
    assert [run.run_id for run in page.runs] == ["alpha-2", "alpha-1"]
    other_name = (await engine.get("beta-3")).workflow
    page = await engine.runs_page(RunFilter(workflow=other_name))
    assert [run.run_id for run in page.runs] == ["beta-3"]
    since = datetime.fromtimestamp(clock.now_ms() / 1000, UTC)
    page = await engine.runs_page(RunFilter(created_since=since))
    assert {run.run_id for run in page.runs} == {"alpha-2", "beta-3"}
    page = await engine.runs_page(RunFilter(created_before=since))
    assert [run.run_id for run in page.runs] == ["alpha-1"]
    counts = await engine.count_runs()
    assert counts.total == 3
    assert counts.by_status() == {"queued": 2, "cancelled": 1}
    assert counts.by_queue() == {"default": {"queued": 2}, "fast": {"cancelled": 1}}
    alpha = await engine.count_runs(RunFilter(run_id_prefix="alpha", status=["queued"]))
    assert alpha.by_status() == {"queued": 1}


async def test_a_cursor_not_made_by_runs_page_is_refused(store_engine: Engine) -> None:
    with pytest.raises(ResumableError, match="first page"):
        await store_engine.runs_page(cursor="not a cursor")


@pytest.fixture
def store_engine(store: Store, clock: FakeClock) -> Engine:
    return Engine(store, clock=clock)


async def test_run_view_shows_the_lease_and_survives_a_damaged_expiry(
    store_engine: Engine, clock: FakeClock
) -> None:
    engine = store_engine
    await engine.enqueue(listed, 1, run_id="leased")
    lease = await engine.store.acquire_lease(
        "leased", owner="worker-1", now_ms=clock.now_ms(), ttl_ms=5_000
    )
    assert lease is not None
    view = await engine.get("leased")
    assert view.lease_owner == "worker-1"
    assert view.lease_expires_at is not None
    assert int(view.lease_expires_at.timestamp() * 1000) == lease.expires_at_ms
    damaged = MemoryStore()
    await damaged.create_run(run_record("far", lease_expires_at_ms=2**62))
    assert (await Engine(damaged).get("far")).lease_expires_at is None
