"""`Engine.check` speed: 10,000 stored runs of 20 steps checked on SQLite (target < 60 s).

Each run was left failed by v1 code after 20 recorded steps; v2 replays the same
20 steps and then calls one more, so every run is replayed in full (the worst
case: a divergence stops earlier). The check's time is compared with a floor
measured in the same run: listing the same runs and loading each one's journal
with the store API (what any check must at least read), without replaying.

RUNS (default 3) timings of each; medians quoted. N_RUNS and STEPS override the size.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import table

from resumable import Engine, WorkflowFailed, step, workflow
from resumable.stores.protocol import RunQuery, Store

RUNS = int(os.environ.get("RUNS", "3"))
N_RUNS = int(os.environ.get("N_RUNS", "10000"))
STEPS = int(os.environ.get("STEPS", "20"))
NAME = "bench.check"


class Crash(Exception):
    """v1 stops after its steps: a failed run, which check selects by default."""


@step(name="bench.check.work")
async def work(doc: str, i: int) -> str:
    return f"{doc} step {i}: " + "x" * 200


@step(name="bench.check.publish")
async def publish(doc: str) -> str:
    return doc


async def v1(doc: str) -> str:
    for i in range(STEPS):
        await work(doc, i)
    raise Crash(doc)


async def v2(doc: str) -> str:
    for i in range(STEPS):
        await work(doc, i)
    return await publish(doc)


async def seed(url: str) -> None:
    engine = Engine(url)
    flow = workflow(name=NAME)(v1)

    async def one(n: int) -> None:
        with contextlib.suppress(WorkflowFailed):  # left failed, as v1 does
            await engine.run(flow, f"doc-{n}", run_id=f"run-{n:05d}")

    batch = 64
    for start in range(0, N_RUNS, batch):
        await asyncio.gather(
            *(one(n) for n in range(start, min(N_RUNS, start + batch)))
        )
    await engine.close()


async def time_check(url: str) -> float:
    engine = Engine(url)
    start = time.perf_counter()
    report = await engine.check()
    elapsed = time.perf_counter() - start
    await engine.close()
    assert len(report.runs) == N_RUNS, len(report.runs)
    assert report.ok
    assert all(run.new_after_seq == STEPS for run in report.runs)
    return elapsed


async def time_floor(url: str) -> float:
    engine = Engine(url)
    start = time.perf_counter()
    store = engine.store
    assert isinstance(store, Store)  # every built-in store is a full one
    runs = await store.list_runs(RunQuery(status=("failed",), limit=2**31))
    for run in runs:
        await store.load_journal(run.run_id)
    elapsed = time.perf_counter() - start
    await engine.close()
    assert len(runs) == N_RUNS
    return elapsed


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'check.db'}?durability=normal"
        start = time.perf_counter()
        await seed(url)
        print(
            f"seeded {N_RUNS} runs x {STEPS} steps in {time.perf_counter() - start:.1f} s"
        )
        workflow(name=NAME)(v2)  # the deploy: v2 replaces v1 under the same name
        checks, floors = [], []
        for _ in range(RUNS):
            floors.append(await time_floor(url))
            checks.append(await time_check(url))
    check_s, floor_s = statistics.median(checks), statistics.median(floors)
    print(
        f"Engine.check of {N_RUNS} runs x {STEPS} steps on SQLite, median of {RUNS}; "
        f"floor: list the runs and load every journal, no replay"
    )
    print(
        table(
            [
                ("what", "median s", "min s", "per run ms", "target"),
                (
                    "check",
                    f"{check_s:.2f}",
                    f"{min(checks):.2f}",
                    f"{check_s / N_RUNS * 1000:.2f}",
                    "< 60 s",
                ),
                (
                    "floor (read only)",
                    f"{floor_s:.2f}",
                    f"{min(floors):.2f}",
                    f"{floor_s / N_RUNS * 1000:.2f}",
                    "-",
                ),
                ("ratio check / floor", f"{check_s / floor_s:.2f}x", "", "", ""),
            ]
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
