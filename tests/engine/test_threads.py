"""Engine.threads on every store: save_state threads listed newest first, paged."""

from __future__ import annotations

import pytest

from resumable import Engine, ResumableError
from resumable.integrations.langgraph_threads import register_thread
from resumable.stores.protocol import Store
from resumable.stores.roles import STAGING_SUFFIX
from resumable.testing import T0, FakeClock


@pytest.fixture
def threads_engine(store: Store, clock: FakeClock) -> Engine:
    return Engine(store, clock=clock)


async def _walk(engine: Engine, *, limit: int, prefix: str | None = None) -> list[str]:
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = await engine.threads(prefix=prefix, limit=limit, cursor=cursor)
        assert len(page.threads) <= limit
        seen += [thread.thread_id for thread in page.threads]
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor


async def test_threads_lists_save_state_threads_newest_first_without_internal_ones(
    threads_engine: Engine, clock: FakeClock
) -> None:
    engine = threads_engine
    for name in ("user-1", "user-2", "other"):
        clock.advance(1)
        await engine.save_state(name, {"n": name})
    clock.advance(1)
    await engine.save_state("user-1", {"n": 2}, namespace="sub")  # user-1 is newest
    # the library's own threads, saved after every user thread
    for i in range(5):
        clock.advance(1)
        await register_thread(engine, f"lg-{i}")
        await engine.save_state(f"user-2{STAGING_SUFFIX}", {"i": i})
    page = await engine.threads(limit=10)
    assert [t.thread_id for t in page.threads] == ["user-1", "other", "user-2"]
    assert page.next_cursor is None
    assert page.threads[0].updated_at.timestamp() * 1000 == T0 + 4000
    # pages of one, read past the internal threads, still see each thread once
    assert await _walk(engine, limit=1) == ["user-1", "other", "user-2"]
    assert await _walk(engine, limit=2, prefix="user-") == ["user-1", "user-2"]
    assert (await engine.threads(limit=0)).threads == []


async def test_a_thread_cursor_not_made_by_threads_is_refused(
    threads_engine: Engine,
) -> None:
    with pytest.raises(ResumableError, match="cursor=None"):
        await threads_engine.threads(cursor="not-a-cursor")
