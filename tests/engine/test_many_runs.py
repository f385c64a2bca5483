"""Hundreds of runs at once in one engine all finish, on every store.

More runs than the store's connection pool holds must wait for a connection, not
fail: Redis' default pool raised MaxConnectionsError past 100.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from conftest import store_url
from resumable import Engine, step, workflow

RUNS = 400


@step
async def double(i: int) -> int:
    return 2 * i


@workflow(name="many.runs")
async def twice(i: int) -> int:
    return await double(i) + await double(i + 1)


async def test_four_hundred_concurrent_runs_in_one_engine_all_succeed(
    backend: str, tmp_path: Path
) -> None:
    url = store_url(backend, tmp_path)
    if backend == "sqlite":
        url += "?durability=normal"  # the pool is the point here, not fsync
    engine = Engine(url, store_retry_s=5)
    try:
        results = await asyncio.gather(
            *(engine.run(twice, i, run_id=f"many-{i}") for i in range(RUNS)),
            return_exceptions=True,
        )
        failures = [r for r in results if isinstance(r, BaseException)]
        assert failures == [], f"{len(failures)} runs failed, first: {failures[0]!r}"
        assert results == [4 * i + 2 for i in range(RUNS)]
        assert len(await engine.runs(status="succeeded", limit=RUNS + 1)) == RUNS
    finally:
        drop = getattr(engine.store, "drop", None)
        if drop is not None:
            await drop()
        await engine.close()
