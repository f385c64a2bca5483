"""RedisStore's threads index: schema 1 stores gain it when opened by this version."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from resumable.errors import StoreError
from resumable.stores.redis import SCHEMA_VERSION, RedisStore
from resumable.testing import T0, snapshot_record

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
        assert int(await admin.hget(base + b"meta", "schema_version")) == SCHEMA_VERSION
        await store.close()
    finally:
        await admin.aclose()
