"""Redis' connection pool: its size and wait come from the URL, as on PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from redis.exceptions import MaxConnectionsError

from conftest import service_url, store_url
from resumable import Engine, step, workflow
from resumable.errors import StoreError
from resumable.stores.redis import RedisStore, parse_url
from resumable.stores.redis.connection import WaitingPool


def test_pool_options_are_the_stores_own_and_never_reach_redis_py() -> None:
    assert parse_url("redis://h/0?pool_max=5&pool_timeout_s=2&prefix=p") == (
        "redis://h/0",
        "p",
    )


@pytest.mark.parametrize(
    "query", ["pool_max=0", "pool_max=many", "pool_timeout_s=0", "pool_timeout_s=nan"]
)
def test_a_bad_pool_option_is_refused_when_the_store_is_made(query: str) -> None:
    with pytest.raises(StoreError, match="pool_max and pool_timeout_s"):
        RedisStore(f"redis://127.0.0.1/0?{query}")


@step
async def echo(i: int) -> int:
    await asyncio.sleep(0)
    return i


@workflow(name="pool.small")
async def small(i: int) -> int:
    return await echo(i)


@pytest.mark.redis
async def test_runs_wait_for_a_connection_of_a_pool_of_two(tmp_path: Path) -> None:
    engine = Engine(f"{store_url('redis', tmp_path)}&pool_max=2", store_retry_s=5)
    try:
        results = await asyncio.gather(
            *(engine.run(small, i, run_id=f"p{i}") for i in range(30))
        )
        assert results == list(range(30))
    finally:
        drop = getattr(engine.store, "drop", None)
        if drop is not None:
            await drop()
        await engine.close()


@pytest.mark.redis
async def test_a_full_pool_serves_its_waiters_in_turn_and_gives_up_after_wait_s() -> (
    None
):
    pool = WaitingPool.from_url(service_url("redis"), max_connections=1, wait_s=0.2)
    try:
        held = await pool.get_connection()
        with pytest.raises(MaxConnectionsError, match=r"no free connection in 0\.2 s"):
            await pool.get_connection()
        waiter = asyncio.ensure_future(pool.get_connection())
        await asyncio.sleep(0)  # it queues for the connection held
        await pool.release(held)
        await pool.release(await asyncio.wait_for(waiter, 5))
    finally:
        await pool.disconnect()
