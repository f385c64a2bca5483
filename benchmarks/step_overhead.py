"""Per-step overhead: 1000 sequential ~1 KB steps, resumable vs its raw floors.

Prints µs per step (median of RUNS runs) for plain Python, resumable on memory,
SQLite full and SQLite normal, and -- measured in this same run -- raw sqlite3
INSERT+COMMIT of the same row in WAL with synchronous FULL and NORMAL.

The floors run on SQLite's defaults. resumable's full mode checkpoints a smaller
WAL (`WAL_PAGES_FULL` in resumable.stores.sqlite.connection), which makes raw sqlite3 faster too,
so the raw FULL floor is also measured with that setting and its ratio printed.
A last row runs the same steps as 50 runs at once, whose commits share fsyncs.

The added µs per step (resumable minus plain python) and the bytes a run and a
step take on SQLite are written to resumable/data/overhead.json for
`resumable cost-model`.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import median_us_per_op, table
from _overhead import save, storage_figures

from resumable import Engine, step, workflow
from resumable.stores.sqlite.connection import WAL_PAGES_FULL

STEPS = int(os.environ.get("STEPS", "1000"))
CONCURRENT = 50  # runs at once in the group-commit row, STEPS // CONCURRENT steps each
RUNS = int(os.environ.get("RUNS", "7"))
PAYLOAD = "x" * 1000


def produce_plain(i: int) -> str:
    return PAYLOAD + str(i)


@step
async def produce(i: int) -> str:
    return PAYLOAD + str(i)


@workflow(name="bench.steps")
async def many_steps(n: int) -> int:
    total = 0
    for i in range(n):
        total += len(await produce(i))
    return total


async def plain(_: int) -> None:
    for i in range(STEPS):
        produce_plain(i)


def raw_sqlite(directory: Path, synchronous: str, wal_pages: int | None) -> None:
    """The floor: the journal row a step writes, inserted and committed by hand."""
    path = directory / f"raw-{synchronous}-{time.perf_counter_ns()}.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    if wal_pages is not None:
        conn.execute(f"PRAGMA wal_autocheckpoint = {wal_pages}")
    conn.execute(
        "CREATE TABLE steps (run_id TEXT, seq INTEGER, name TEXT, output BLOB, "
        "PRIMARY KEY (run_id, seq))"
    )
    payload = PAYLOAD.encode()
    for i in range(STEPS):
        conn.execute("BEGIN")
        conn.execute(
            "INSERT INTO steps VALUES (?, ?, ?, ?)", ("run", i, "produce", payload)
        )
        conn.execute("COMMIT")
    conn.close()


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)

        def engine_bench(
            url_of: str, runs: int = 1
        ) -> Callable[[int], Awaitable[float]]:
            """STEPS steps on a new store at `url_of`, as `runs` runs at once."""

            async def bench(run: int) -> float:
                url = url_of.format(
                    path=directory / f"bench-{run}-{time.perf_counter_ns()}.db"
                )
                engine = Engine(url)
                await engine.run(many_steps, 1, run_id="warm-up")  # open + migrate
                start = time.perf_counter()
                await asyncio.gather(
                    *(
                        engine.run(many_steps, STEPS // runs, run_id=f"bench-{i}")
                        for i in range(runs)
                    )
                )
                elapsed = time.perf_counter() - start
                await engine.close()
                return elapsed

            return bench

        async def raw(
            synchronous: str, wal_pages: int | None = None
        ) -> Callable[[int], Awaitable[None]]:
            async def bench(_: int) -> None:
                raw_sqlite(directory, synchronous, wal_pages)

            return bench

        # interleaved: every round measures each floor and its resumable twin back to
        # back, so drift in the machine's fsync latency hits both sides alike
        benches = {
            "plain python": plain,
            "resumable memory": engine_bench("memory://"),
            "raw sqlite FULL": await raw("FULL"),
            "resumable sqlite full": engine_bench("sqlite:///{path}"),
            f"raw sqlite FULL, WAL {WAL_PAGES_FULL} pages": await raw(
                "FULL", wal_pages=WAL_PAGES_FULL
            ),
            f"resumable sqlite full, {CONCURRENT} runs at once": engine_bench(
                "sqlite:///{path}", runs=CONCURRENT
            ),
            "raw sqlite NORMAL": await raw("NORMAL"),
            "resumable sqlite normal": engine_bench(
                "sqlite:///{path}?durability=normal"
            ),
        }
        samples: dict[str, list[float]] = {name: [] for name in benches}
        for run in range(RUNS):
            for name, bench in benches.items():
                samples[name].append(
                    await median_us_per_op(bench, ops=STEPS, runs=1, first=run)
                )
        results = {name: statistics.median(values) for name, values in samples.items()}
    floors = {
        "resumable sqlite full": "raw sqlite FULL",
        f"resumable sqlite full, {CONCURRENT} runs at once": "raw sqlite FULL",
        "resumable sqlite normal": "raw sqlite NORMAL",
    }
    rows = [("what", "µs/step", "ratio to floor")]
    for name, us in results.items():
        floor = floors.get(name)
        ratio = f"{us / results[floor]:.2f}x {floor}" if floor else ""
        rows.append((name, f"{us:.1f}", ratio))
    print(
        f"{STEPS} steps of ~1 KB, one after another unless said, median of {RUNS} runs"
    )
    print(table(rows))
    tuned = (
        results["resumable sqlite full"]
        / results[f"raw sqlite FULL, WAL {WAL_PAGES_FULL} pages"]
    )
    print(f"resumable sqlite full against raw FULL with its own WAL size: {tuned:.2f}x")
    await save_figures(results)


async def save_figures(results: dict[str, float]) -> None:
    """The added latency per step and SQLite's bytes per run and step, for cost-model."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "size.db"
        engine = Engine(f"sqlite:///{path}")

        async def used_bytes() -> float:
            conn = sqlite3.connect(path)
            try:
                (pages,) = conn.execute("PRAGMA page_count").fetchone()
                (free,) = conn.execute("PRAGMA freelist_count").fetchone()
                (page,) = conn.execute("PRAGMA page_size").fetchone()
            finally:
                conn.close()
            return float((pages - free) * page)

        await engine.run(many_steps, 0, run_id="migrate")
        per_run, per_step = await storage_figures(engine, used_bytes)
        await engine.close()
    plain = results["plain python"]
    source = f"benchmarks/step_overhead.py, median of {RUNS} runs of {STEPS} steps"
    for kind, row in (
        ("sqlite", "resumable sqlite full"),
        ("sqlite-normal", "resumable sqlite normal"),
        ("memory", "resumable memory"),
    ):
        await save(
            kind,
            us_per_step=results[row] - plain,
            bytes_per_run=per_run,
            bytes_per_step=per_step,
            source=source
            if kind != "memory"
            else f"{source} (bytes: the SQLite figures; memory:// keeps them in RAM)",
        )


if __name__ == "__main__":
    asyncio.run(main())
