"""RedisStore's kept indexes (threads, run counts): exact, and built for schema 1."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from resumable.errors import StoreError
from resumable.stores.protocol import RunQuery, RunUpdate
from resumable.stores.redis import SCHEMA_VERSION, RedisStore
from resumable.testing import T0, run_record, snapshot_record

pytestmark = pytest.mark.redis


def _url() -> str:
    url = os.environ.get("RESUMABLE_TEST_REDIS_URL")
    if not url:
        reason = "RESUMABLE_TEST_REDIS_URL is not set: no redis server to test against"
        if os.environ.get("RESUMABLE_REQUIRE_SERVICES") == "1":
            pytest.fail(f"{reason} (RESUMABLE_REQUIRE_SERVICES=1)")
        pytest.skip(reason)
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}prefix=threads{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def url() -> AsyncIterator[str]:
    url = _url()
    yield url
    store = RedisStore(url)
    with contextlib.suppress(StoreError):
        await store.drop()
    await store.close()


async def test_a_schema_1_store_gets_its_threads_indexed_when_opened(url: str) -> None:
    old = RedisStore(url)
    for thread, ms in (("t-old", 1), ("t-new", 5)):
        await old.save_snapshot(snapshot_record(thread, "0001", (), created_at_ms=T0))
        await old.save_snapshot(
            snapshot_record(thread, "0002", (), namespace="ns", created_at_ms=T0 + ms)
        )
    base = b"{" + old.prefix.encode() + b"}"
    await old.close()
    # what a schema 1 store holds: no threads zset
    admin = Redis.from_url(url.partition("?")[0])
    try:
        assert await admin.delete(base + b"threads") == 1
        await admin.hset(base + b"meta", "schema_version", 1)
        store = RedisStore(url)
        listed = await store.list_threads()
        assert [(t.thread_id, t.updated_at_ms - T0) for t in listed] == [
            ("t-new", 5),
            ("t-old", 1),
        ]
        version = await admin.hget(base + b"meta", "schema_version")
        assert version == str(SCHEMA_VERSION).encode()
        await store.close()
    finally:
        await admin.aclose()


async def _mixed_runs(store: RedisStore) -> None:
    """Runs in every status, some in queues, some leased, some deleted."""
    for i in range(12):
        queue = None if i % 3 == 0 else f"q{i % 3}"
        await store.create_run(
            run_record(f"r{i}", queue=queue, workflow="w", created_at_ms=T0 + i)
        )
    lease = await store.acquire_lease("r1", owner="w1", now_ms=T0, ttl_ms=60_000)
    assert lease is not None
    await store.acquire_lease("r2", owner="w1", now_ms=T0, ttl_ms=60_000)
    await store.cancel_run("r3", now_ms=T0)
    await store.cancel_run("r4", now_ms=T0)
    await store.update_run(
        "r1",
        fence=lease.fence,
        update=RunUpdate(status="succeeded", output=b"ok", now_ms=T0),
    )
    await store.delete_runs(["r4"])
    await store.create_run(run_record("r0", queue="ignored"))  # exists: no change


async def test_kept_counts_agree_with_counts_by_reading_every_run(url: str) -> None:
    store = RedisStore(url)
    await _mixed_runs(store)
    for query in (
        RunQuery(),
        RunQuery(status=["queued"]),
        RunQuery(queue="q1"),
        RunQuery(status=["cancelled", "running"], queue="q2"),
    ):
        assert await store.count_runs(query) == await store.count_runs_by_reading(query)
    assert sum((await store.count_runs(RunQuery())).values()) == 11
    await store.close()


async def test_a_schema_1_store_gets_its_run_counts_when_opened(url: str) -> None:
    old = RedisStore(url)
    await _mixed_runs(old)
    expected = await old.count_runs_by_reading(RunQuery())
    base = b"{" + old.prefix.encode() + b"}"
    await old.close()
    admin = Redis.from_url(url.partition("?")[0])
    try:
        assert await admin.delete(base + b"counts") == 1
        await admin.hset(base + b"meta", "schema_version", 1)
        store = RedisStore(url)
        assert await store.count_runs(RunQuery()) == expected
        await store.close()
        # opened again at schema 2: counted once, not twice
        again = RedisStore(url)
        assert await again.count_runs(RunQuery()) == expected
        await again.close()
    finally:
        await admin.aclose()


async def test_a_damaged_schedule_hash_is_a_store_error_naming_it(url: str) -> None:
    from resumable.testing.contract.schedules import schedule_record

    store = RedisStore(url)
    await store.save_schedule(schedule_record("nightly"))
    base = b"{" + store.prefix.encode() + b"}"
    admin = Redis.from_url(url.partition("?")[0])
    try:
        await admin.hset(base + b"schedule:nightly", "catch_up", "many")
        with pytest.raises(StoreError, match="schedule 'nightly' is damaged"):
            await store.list_schedules()
        await admin.hdel(base + b"schedule:nightly", "cron")
        with pytest.raises(StoreError, match="schedule 'nightly' is damaged"):
            await store.list_schedules()
    finally:
        await admin.aclose()
        await store.close()
