"""Resume latency: from `engine.run(...)` on a run with N recorded steps to reaching
the point where it failed (step N+1 starts executing), on a fresh Engine over the
same SQLite file (durability=full). Everything on the way is counted: reading the
run, taking its lease, loading the journal, replaying N steps, and recording the
execution's ledger entry before step N+1 may spend anything.

The floor, measured in the same run on a file of the same size: opening a fresh
connection, reading the same N ~1 KB JSON results with one SELECT and decoding
each with json.loads, which any journal replay must at least do.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _common import table

from resumable import Engine, step, workflow

RUNS = int(os.environ.get("RUNS", "7"))
PAYLOAD = "x" * 1000


class Reached(BaseException):
    """Raised at step N+1: the resumed run got back to where it died."""


@step
async def produce(i: int) -> str:
    return PAYLOAD + str(i)


REACHED_AT: list[float] = []


@step
async def fail_here(at: float) -> None:
    REACHED_AT.append(time.perf_counter())
    raise Reached(at)


@workflow(name="bench.resume")
async def long_run(n: int, crash: bool) -> int:
    for i in range(n):
        await produce(i)
    if crash:
        await fail_here(0)
    return n


@step
def produce_sync(i: int) -> str:
    return PAYLOAD + str(i)


@step
def fail_here_sync(at: float) -> None:
    REACHED_AT.append(time.perf_counter())
    raise Reached(at)


@workflow(name="bench.resume-sync")
def long_run_sync(n: int, crash: bool) -> int:
    """The same run as plain `def` code, which replays on its workflow thread."""
    for i in range(n):
        produce_sync(i)
    if crash:
        fail_here_sync(0)
    return n


async def measure(
    directory: Path, steps: int, flow: Callable[[int, bool], Any]
) -> list[float]:
    url = f"sqlite:///{directory / f'resume-{flow.__name__}-{steps}.db'}"
    setup = Engine(url)
    with contextlib.suppress(Reached):
        await setup.run(flow, steps, True, run_id="r")
    await setup.close()
    samples = []
    for _ in range(RUNS):
        engine = Engine(url)
        await engine.store.get_run(
            "r"
        )  # open the file: we time the resume, not the open
        REACHED_AT.clear()
        start = time.perf_counter()
        with contextlib.suppress(Reached):
            await engine.run(flow, steps, True, run_id="r")
        samples.append((REACHED_AT[0] - start) * 1000)
        await engine.close()
    return samples


def floor_ms(directory: Path, steps: int) -> list[float]:
    """Read and decode `steps` recorded JSON results with plain sqlite3."""
    path = directory / f"floor-{steps}.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE steps (seq INTEGER PRIMARY KEY, output BLOB)")
        conn.executemany(
            "INSERT INTO steps VALUES (?, ?)",
            ((i, json.dumps(PAYLOAD + str(i)).encode()) for i in range(steps)),
        )
    conn.close()
    samples = []
    for _ in range(RUNS):
        start = time.perf_counter()
        conn = sqlite3.connect(path)
        rows = conn.execute("SELECT seq, output FROM steps ORDER BY seq").fetchall()
        values = [json.loads(output) for _, output in rows]
        samples.append((time.perf_counter() - start) * 1000)
        conn.close()
        assert len(values) == steps
    return samples


async def main() -> None:
    rows = [("recorded steps", "median ms", "min ms", "floor ms", "ratio", "target")]
    floors: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for steps, flow, target in (
            (1000, long_run, "< 10 ms"),
            (3000, long_run, "< 30 ms"),
            (1000, long_run_sync, "-"),
        ):
            samples = await measure(Path(tmp), steps, flow)
            if steps not in floors:
                floors[steps] = statistics.median(floor_ms(Path(tmp), steps))
            floor = floors[steps]
            median = statistics.median(samples)
            rows.append(
                (
                    f"{steps}{' (def workflow)' if flow is long_run_sync else ''}",
                    f"{median:.1f}",
                    f"{min(samples):.1f}",
                    f"{floor:.1f}",
                    f"{median / floor:.2f}x",
                    target,
                )
            )
    print(
        f"resume to the failure point on SQLite, median of {RUNS} runs; floor: "
        f"SELECT + json.loads of the same results in plain sqlite3"
    )
    print(table(rows))


if __name__ == "__main__":
    asyncio.run(main())
