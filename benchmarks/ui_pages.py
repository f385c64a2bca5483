"""Dashboard runs page on a store holding 100,000 runs: SQLite, PostgreSQL, Redis.

Each figure is the median of RUNS full HTTP requests to a real uvicorn server
(the page's count by status, its page of runs and the HTML). Pages measured: the
first page, a status filter, a run-id prefix search, and the page after a deep
cursor. The baseline, measured in the same run on the same store, is the CLI's
own listing call, `Engine.runs(limit=50)` (no counts, no HTML). Target: under
300 ms. PostgreSQL is measured when RESUMABLE_TEST_POSTGRES_URL is set, Redis when
RESUMABLE_TEST_REDIS_URL is; BACKENDS=sqlite,redis (say) picks some. On Redis it also
times `count_runs` from the counts the store keeps against the same counts read run
by run (`count_runs_by_reading`, what the store did before it kept them).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import uvicorn
from _common import table

from resumable import Engine
from resumable.stores.protocol import RunQuery, RunRecord, Store
from resumable.stores.redis import RedisStore
from resumable.ui.app import create_app

RUNS = int(os.environ.get("RUNS", "7"))
N = int(os.environ.get("UI_RUNS", "100000"))
STATUSES = ("succeeded",) * 7 + ("failed", "waiting", "cancelled")
T0 = 1_780_000_000_000
HEADER = ["page", "ms", "Engine.runs(limit=50) ms", "ratio"]


async def fill(store: Store) -> None:
    """N runs created through the Store protocol, 64 at a time."""

    async def one(i: int) -> None:
        await store.create_run(
            RunRecord(
                run_id=f"batch-{i:06d}",
                workflow="analyze" if i % 3 else "summarize",
                status=STATUSES[i % len(STATUSES)],  # type: ignore[arg-type]  # literals
                input=b"{}",
                created_at_ms=T0 + i,
                updated_at_ms=T0 + i,
                queue="q" if i % 2 else None,
            )
        )

    for start in range(0, N, 64):
        await asyncio.gather(*(one(i) for i in range(start, min(N, start + 64))))


def timed_ms(fn: object) -> float:
    times = []
    for _ in range(RUNS):
        began = time.perf_counter()
        fn()  # type: ignore[operator]  # a callable
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


async def prepare(url: str) -> tuple[float, str | None]:
    """Fill the store; the baseline's median ms and a cursor deep in the list."""
    async with Engine(url) as engine:
        assert isinstance(engine.store, Store)  # every built-in store is a full one
        await fill(engine.store)
        times = []
        for _ in range(RUNS):
            began = time.perf_counter()
            await engine.runs(limit=50)
            times.append((time.perf_counter() - began) * 1000)
        page = await engine.runs_page(limit=N * 9 // 10)
    return statistics.median(times), page.next_cursor


def measure(url: str) -> list[list[str]]:
    baseline, cursor = asyncio.run(prepare(url))
    rows = []
    served = Engine(url)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(served), host="127.0.0.1", port=0, log_level="warning"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    base = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    pages = {
        "first page": "/",
        "status=failed": "/?status=failed",
        "run-id prefix": "/?q=batch-0999",
        f"page at run {N * 9 // 10:,}": f"/?cursor={cursor}",
    }
    for name, path in pages.items():

        def get(path: str = path) -> None:
            with urllib.request.urlopen(base + path, timeout=30) as response:
                assert response.status == 200
                response.read()

        ms = timed_ms(get)
        rows.append([name, f"{ms:.1f}", f"{baseline:.2f}", f"{ms / baseline:.1f}x"])
    server.should_exit = True
    thread.join()
    return rows


async def redis_counts(url: str) -> list[list[str]]:
    """count_runs from the kept counts vs by reading every run, on the filled store."""
    store = RedisStore(url)
    rows = []
    for name, query in (
        ("all runs", RunQuery()),
        ("status=failed", RunQuery(status=["failed"])),
    ):
        kept, read = [], []
        for _ in range(RUNS):
            began = time.perf_counter()
            fast = await store.count_runs(query)
            kept.append((time.perf_counter() - began) * 1000)
            began = time.perf_counter()
            slow = await store.count_runs_by_reading(query)
            read.append((time.perf_counter() - began) * 1000)
            assert fast == slow
        k, r = statistics.median(kept), statistics.median(read)
        rows.append([name, f"{k:.2f}", f"{r:.1f}", f"{r / k:.0f}x"])
    await store.close()
    return rows


def main() -> None:
    backends = set(os.environ.get("BACKENDS", "sqlite,postgres,redis").split(","))
    if "sqlite" in backends:
        with tempfile.TemporaryDirectory() as tmp:
            print(f"SQLite, {N:,} runs (median of {RUNS} requests)")
            print(table([HEADER, *measure(f"sqlite:///{tmp}/ui.db")]))
    pg = os.environ.get("RESUMABLE_TEST_POSTGRES_URL")
    if pg and "postgres" in backends:
        schema = f"bench_ui_{uuid.uuid4().hex[:8]}"
        url = f"{pg}{'&' if '?' in pg else '?'}schema={schema}"
        print(f"\nPostgreSQL, {N:,} runs (median of {RUNS} requests)")
        try:
            print(table([HEADER, *measure(url)]))
        finally:
            engine = Engine(url)
            asyncio.run(engine.store.drop())  # type: ignore[attr-defined]  # PostgresStore
    redis = os.environ.get("RESUMABLE_TEST_REDIS_URL")
    if redis and "redis" in backends:
        prefix = f"bench-ui-{uuid.uuid4().hex[:8]}:"
        url = f"{redis}{'&' if '?' in redis else '?'}prefix={prefix}"
        print(f"\nRedis, {N:,} runs (median of {RUNS} requests)")
        try:
            print(table([HEADER, *measure(url)]))
            print(f"\nRedis count_runs, {N:,} runs (median of {RUNS})")
            counts = asyncio.run(redis_counts(url))
            print(table([["counts of", "kept ms", "by reading ms", "ratio"], *counts]))
        finally:
            asyncio.run(RedisStore(url).drop())
    print("\ntarget: every page under 300 ms")


if __name__ == "__main__":
    main()
