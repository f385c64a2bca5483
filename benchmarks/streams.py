"""Durable streams: write overhead per chunk and reader latency, against plain SSE.

For each store (SQLite, and PostgreSQL when RESUMABLE_TEST_POSTGRES_URL is set):

- write: a streaming step yields CHUNKS chunks of ~20 characters as fast as it
  can; the run's time per chunk, against the baseline measured in the same run:
  the same generator turned into SSE frames with no store (what an app streaming
  an SDK's answer straight to the browser does);
- latency: a step yields a chunk every 5 ms, stamped with the time it was
  yielded; a reader (another Engine, `engine.stream`, default polling 0.2 s and
  `poll_s=0.01`) notes when each arrives. First-chunk latency and p50/p99 of all.

Medians of RUNS runs.

    RESUMABLE_TEST_POSTGRES_URL=postgresql://... python benchmarks/streams.py
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import table

from resumable import Engine, step, workflow
from resumable.stores import create_store

CHUNKS = 2000
PACED = 100
RUNS = 3


async def pieces(n: int) -> AsyncIterator[str]:
    for i in range(n):
        yield f"token {i:>6} of text "


@step
async def fast(n: int) -> AsyncIterator[str]:
    async for piece in pieces(n):
        yield piece


@step
async def paced(n: int) -> AsyncIterator[float]:
    for _ in range(n):
        await asyncio.sleep(0.005)
        yield time.perf_counter()


@workflow
async def write_fast(n: int) -> str:
    return await fast(n)


@workflow
async def write_paced(n: int) -> list[float]:
    return await paced(n)


async def plain_sse(n: int) -> float:
    """The baseline: SSE frames of the same chunks, no store."""
    started = time.perf_counter()
    frames = []
    async for i, piece in _numbered(pieces(n)):
        frames.append(f"id: {i}\nevent: chunk\ndata: {json.dumps(piece)}\n\n".encode())
    return time.perf_counter() - started


async def _numbered(it: AsyncIterator[str]) -> AsyncIterator[tuple[int, str]]:
    i = 0
    async for piece in it:
        i += 1
        yield i, piece


async def write_once(url: str) -> float:
    async with Engine(url) as engine:
        started = time.perf_counter()
        await engine.run(write_fast, CHUNKS, run_id=f"w-{uuid.uuid4().hex}")
        return time.perf_counter() - started


async def latency_once(url: str, poll_s: float) -> tuple[float, list[float]]:
    run_id = f"l-{uuid.uuid4().hex}"
    async with Engine(url) as writer, Engine(url) as reader:
        started = time.perf_counter()
        task = asyncio.create_task(writer.run(write_paced, PACED, run_id=run_id))
        while True:
            try:
                await reader.get(run_id)
                break
            except Exception:  # noqa: BLE001 - not created yet
                await asyncio.sleep(0.001)
        delays, first = [], None
        async for event in reader.stream(run_id, 1, poll_s=poll_s):
            if event.kind == "chunk":
                now = time.perf_counter()
                first = first if first is not None else now - started
                delays.append(now - event.value)
        await task
    return first or 0.0, delays


async def drop(url: str) -> None:
    store = create_store(url)
    dropper = getattr(store, "drop", None)
    if dropper is not None:
        await dropper()
    await store.close()


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


async def main() -> None:
    urls = {}
    with tempfile.TemporaryDirectory() as folder:
        urls["sqlite"] = f"sqlite:///{folder}/bench.db"
        pg = os.environ.get("RESUMABLE_TEST_POSTGRES_URL")
        if pg:
            sep = "&" if "?" in pg else "?"
            urls["postgres"] = f"{pg}{sep}schema=bench_{uuid.uuid4().hex[:8]}"
        rows = [
            [
                "store",
                "per chunk, stored (µs)",
                "per chunk, plain SSE (µs)",
                "ratio",
                "first chunk (ms)",
                "p50 (ms)",
                "p99 (ms)",
                "p50 at poll_s=0.01",
                "p99 at poll_s=0.01",
            ]
        ]
        for name, url in urls.items():
            try:
                stored = statistics.median([await write_once(url) for _ in range(RUNS)])
                plain = statistics.median(
                    [await plain_sse(CHUNKS) for _ in range(RUNS)]
                )
                lat = [await latency_once(url, 0.2) for _ in range(RUNS)]
                fast_lat = [await latency_once(url, 0.01) for _ in range(RUNS)]
            finally:
                await drop(url)

            def q(delays: list[list[float]], p: int) -> float:
                return statistics.median(
                    statistics.quantiles(d, n=100)[p - 1] for d in delays
                )

            rows.append(
                [
                    name,
                    f"{stored / CHUNKS * 1e6:.1f}",
                    f"{plain / CHUNKS * 1e6:.2f}",
                    f"{stored / plain:.0f}x",
                    ms(statistics.median(first for first, _ in lat)),
                    ms(q([d for _, d in lat], 50)),
                    ms(q([d for _, d in lat], 99)),
                    ms(q([d for _, d in fast_lat], 50)),
                    ms(q([d for _, d in fast_lat], 99)),
                ]
            )
    print(
        f"{CHUNKS} chunks written as fast as possible; {PACED} chunks 5 ms apart read"
    )
    print(f"medians of {RUNS} runs")
    print(table(rows))


if __name__ == "__main__":
    asyncio.run(main())
