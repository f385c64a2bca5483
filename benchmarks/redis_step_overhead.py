"""What a durable step costs on Redis, against the floor of one awaited HSET.

Engine: a @workflow loops over a @step returning a ~1 KB string, 1000 times, through
`Engine("redis://...")`: each step is encoded, checksummed and committed by one
fenced Lua script before the workflow moves on. Floor: the same bytes written with
one awaited redis-py HSET per step, measured in the same process on the same server.
Each figure is the median of 5 runs (after one warm-up of each); all keys are
deleted afterwards. The µs per step and the bytes a run and a step take (MEMORY
USAGE of the store's keys) are written to resumable/data/overhead.json for
`resumable cost-model`.

Run: .venv/bin/python benchmarks/redis_step_overhead.py [redis://127.0.0.1:6379/0]
(or set RESUMABLE_BENCH_REDIS_URL)
"""

from __future__ import annotations

import asyncio
import logging
import os
import statistics
import sys
import time
import uuid

from _overhead import save, storage_figures
from redis.asyncio import Redis

from resumable import Engine, step, workflow
from resumable.stores.redis import RedisStore

STEPS = 1000
RUNS = 9
PAYLOAD = ("the model returned a summary of the document " * 30)[
    :1000
]  # under the 1 KiB compression threshold: stored as-is


@step
async def produce(i: int) -> str:
    return PAYLOAD


@workflow
async def many_steps(n: int) -> int:
    for i in range(n):
        await produce(i)
    return n


async def engine_run_s(engine: Engine, run_id: str) -> float:
    started = time.perf_counter()
    assert await engine.run(many_steps, STEPS, run_id=run_id) == STEPS
    return time.perf_counter() - started


async def raw_run_s(client: Redis, key: bytes, payload: bytes) -> float:
    started = time.perf_counter()
    for i in range(STEPS):
        await client.hset(key, str(i + 1), payload)
    return time.perf_counter() - started


async def main(base_url: str) -> None:
    prefix = f"bench-{uuid.uuid4().hex[:8]}:"
    separator = "&" if "?" in base_url else "?"
    store = RedisStore(f"{base_url}{separator}prefix={prefix}")
    engine = Engine(store)
    raw = Redis.from_url(base_url)
    raw_key = f"{{{prefix}}}raw".encode()
    try:
        await engine_run_s(engine, "warm-up")
        journal = await store.load_journal("warm-up")
        step_bytes = len(journal[0].output or b"")
        payload = os.urandom(step_bytes)  # what the engine stores for one step
        await raw_run_s(raw, raw_key + b":warm-up", payload)

        # interleaved, run by run: the machine's drift hits both alike
        engine_s, raw_s = [], []
        for i in range(RUNS):
            engine_s.append(await engine_run_s(engine, f"run-{i}"))
            raw_s.append(await raw_run_s(raw, raw_key + f":{i}".encode(), payload))
        per_run, per_step = await storage_figures(
            engine, lambda: used_bytes(raw, store.prefix)
        )
    finally:
        await store.drop()
        await engine.close()
        async for key in raw.scan_iter(match=raw_key + b"*"):
            await raw.unlink(key)
        await raw.aclose()

    engine_us = statistics.median(engine_s) / STEPS * 1e6
    raw_us = statistics.median(raw_s) / STEPS * 1e6
    print(
        f"redis step overhead: {STEPS} sequential steps of {step_bytes} stored bytes, median of {RUNS}"
    )
    print(f"  raw floor (awaited HSET):     {raw_us:8.1f} us/step")
    print(f"  Engine('redis://...') @step:  {engine_us:8.1f} us/step")
    print(f"  ratio engine / floor:         {engine_us / raw_us:8.2f}x")
    pairs = sorted(e / r for e, r in zip(engine_s, raw_s, strict=True))
    print(f"  ratio per interleaved pair:   {', '.join(f'{p:.2f}' for p in pairs)}")
    print(f"  engine runs (s): {', '.join(f'{s:.3f}' for s in engine_s)}")
    print(f"  raw runs (s):    {', '.join(f'{s:.3f}' for s in raw_s)}")
    await save(
        "redis",
        us_per_step=engine_us,
        bytes_per_run=per_run,
        bytes_per_step=per_step,
        source=f"benchmarks/redis_step_overhead.py, median of {RUNS} runs of {STEPS} steps",
    )


async def used_bytes(client: Redis, prefix: str) -> float:
    """MEMORY USAGE summed over the store's keys."""
    total = 0
    async for key in client.scan_iter(match=f"{{{prefix}}}*"):
        total += int(await client.memory_usage(key) or 0)
    return float(total)


if __name__ == "__main__":
    logging.basicConfig(
        level=logging.ERROR
    )  # the no-persistence warning is expected here
    url = (
        sys.argv[1]
        if len(sys.argv) > 1
        else os.environ.get("RESUMABLE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    asyncio.run(main(url))
