"""The step cache: `rerun` with one prompt changed against a full run, and a miss's cost.

1. The pipeline: DOCS documents, each summarized and its entities extracted (two
   LLM calls through the real `openai` SDK against the simulated provider, with
   LATENCY_S of latency per answer), then one report call; every step cached.
   Each round, on a fresh SQLite file: run it with the first summary prompt,
   change the prompt (a second step of the same name, other source), then
   - rerun: `Engine.rerun` of the first run (entities served from the cache);
   - full: the cache cleared, the same workflow run from scratch (the baseline).
   Dollars are the ledger's incurred (the simulator's usage, priced); seconds
   are wall time. Medians over RUNS rounds, and their ratio.
2. A miss's cost: STEPS sequential steps of one run on a SQLite file, each with
   new arguments, with `cache=True` (a lookup that misses; the entries written
   in one batch when the run ends) and without (the baseline), alternating;
   µs per step, medians.
3. SQLite's own floor for the same work, measured in the same run with plain
   `sqlite3` on the file the miss runs left (the real cache table, its indexes
   and its entries), synchronous FULL and the WAL checkpointed as resumable's
   durability=full does: a ~1 KB row inserted and committed per step; the same
   with a point SELECT of the cache table before each (a lookup that misses);
   and with the steps' entries written in batches of 500 (the entries' write).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import openai
from _common import table

from resumable import Engine, map_steps, step, workflow
from resumable.pricing import Price, PriceTable
from resumable.simulator import SimulatedProvider
from resumable.stores.sqlite.connection import WAL_PAGES_FULL

DOCS = int(os.environ.get("DOCS", "50"))
RUNS = int(os.environ.get("RUNS", "5"))
STEPS = int(os.environ.get("STEPS", "300"))
LATENCY_S = float(os.environ.get("LATENCY_S", "0.05"))
PRICES = PriceTable({"sim-model": Price(input_per_mtok=1.0, output_per_mtok=4.0)})
CLIENT: list[openai.AsyncOpenAI] = []
CURRENT: dict[str, Any] = {}


async def _complete(prompt: str) -> str:
    response = await CLIENT[0].chat.completions.create(
        model="sim-model", temperature=0, messages=[{"role": "user", "content": prompt}]
    )
    return response.choices[0].message.content or ""


@step(name="bench.cache.summarize", cache=True)
async def summarize_v1(doc: str) -> str:
    return await _complete(f"Summarize in one line: {doc}")


@step(name="bench.cache.summarize", cache=True)
async def summarize_v2(doc: str) -> str:
    return await _complete(f"Summarize in five words, for an executive: {doc}")


@step(name="bench.cache.entities", cache=True)
async def entities(doc: str) -> str:
    return await _complete(f"List the people, companies and places named in: {doc}")


@step(name="bench.cache.report", cache=True)
async def report(summaries: list[str], found: list[str]) -> str:
    return await _complete("Write a report from: " + " / ".join(summaries + found))


@workflow(name="bench.cache.pipeline")
async def pipeline(docs: list[str]) -> str:
    summaries = await map_steps(CURRENT["summarize"], docs, progress=False)
    found = await map_steps(entities, docs, progress=False)
    return await report(summaries, found)


@step(name="bench.cache.cached_plain", cache=True)
async def cached_plain(i: int) -> int:
    return i


@step(name="bench.cache.plain")
async def plain(i: int) -> int:
    return i


@workflow(name="bench.cache.loop")
async def loop(n: int, cached: bool, salt: int) -> int:
    fn = cached_plain if cached else plain
    return sum([await fn(salt * 1_000_000 + i) for i in range(n)])


async def _round(tmp: Path, n: int) -> tuple[float, float, float, float]:
    docs = [
        f"Report {i}: the Lisbon warehouse shipped {i * 7} orders late."
        for i in range(DOCS)
    ]
    async with Engine(f"sqlite:///{tmp / f'pipeline-{n}.db'}", prices=PRICES) as engine:
        CURRENT["summarize"] = summarize_v1
        await engine.run(pipeline, docs, run_id="first")
        CURRENT["summarize"] = summarize_v2
        start = time.perf_counter()
        rerun = await engine.rerun("first", run_id="rerun")
        rerun_s = time.perf_counter() - start
        rerun_usd = (await engine.ledger(rerun)).incurred.cost_usd
        await engine.clear_cache()
        start = time.perf_counter()
        await engine.run(pipeline, docs, run_id="full")
        full_s = time.perf_counter() - start
        full_usd = (await engine.ledger("full")).incurred.cost_usd
    return rerun_usd, rerun_s, full_usd, full_s


async def _miss_cost(tmp: Path) -> tuple[float, float]:
    cached: list[float] = []
    plain_us: list[float] = []
    async with Engine(f"sqlite:///{tmp / 'loop.db'}") as engine:
        await engine.run(loop, 10, False, 0, run_id="warm")
        for n in range(RUNS * 2):
            for is_cached, sink in ((True, cached), (False, plain_us))[
                :: 1 if n % 2 else -1
            ]:
                start = time.perf_counter()
                await engine.run(
                    loop,
                    STEPS,
                    is_cached,
                    n * 2 + is_cached,
                    run_id=f"loop-{n}-{is_cached}",
                )
                sink.append((time.perf_counter() - start) / STEPS * 1e6)
    return statistics.median(cached), statistics.median(plain_us)


def _raw_floor(path: Path) -> dict[str, float]:
    """µs per step of plain sqlite3 doing a miss's SQL (module doc, part 3)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_PAGES_FULL}")
    conn.execute("CREATE TABLE floor (n INTEGER PRIMARY KEY, body BLOB)")
    body, batch = b"x" * 1000, 500
    lookup = "SELECT * FROM resumable_step_cache WHERE key = ?"
    put = (
        "INSERT INTO resumable_step_cache (key, step, workflow, run_id, seq, "
        "created_at_ms) VALUES (?, 'bench.cache.cached_plain', 'bench.cache.loop', "
        "?, ?, 0)"
    )
    times: dict[str, list[float]] = {"insert+commit": [], "+ lookup": [], "+ entry": []}
    for n in range(RUNS * 2):
        for kind in list(times)[:: 1 if n % 2 else -1]:
            run_id = f"floor-{n}-{kind}"
            start = time.perf_counter()
            for _ in range(batch):
                if kind == "+ lookup":
                    conn.execute("BEGIN")
                    conn.execute(lookup, (secrets.token_hex(20),)).fetchone()
                    conn.execute("COMMIT")
                conn.execute("BEGIN")
                conn.execute("INSERT INTO floor (body) VALUES (?)", (body,))
                conn.execute("COMMIT")
            if kind == "+ entry":
                conn.execute("BEGIN")
                conn.executemany(
                    put, [(secrets.token_hex(20), run_id, i) for i in range(batch)]
                )
                conn.execute("COMMIT")
            times[kind].append((time.perf_counter() - start) / batch * 1e6)
    conn.close()
    return {kind: statistics.median(us) for kind, us in times.items()}


async def main() -> None:
    with SimulatedProvider() as provider, tempfile.TemporaryDirectory() as tmp:
        provider.set_latency(LATENCY_S)
        CLIENT.append(
            openai.AsyncOpenAI(
                base_url=provider.openai_base_url, api_key="sk-bench", max_retries=0
            )
        )
        rounds = [await _round(Path(tmp), n) for n in range(RUNS)]
        await CLIENT[0].close()
        miss_us, plain_us = await _miss_cost(Path(tmp))
        floor = _raw_floor(Path(tmp) / "loop.db")
    rerun_usd, rerun_s, full_usd, full_s = (
        statistics.median(c) for c in zip(*rounds, strict=True)
    )
    print(
        f"pipeline: {DOCS} documents, 2 calls each + 1 report; one prompt changed; "
        f"latency {LATENCY_S} s; medians of {RUNS} rounds"
    )
    print(
        table(
            [
                ["", "dollars", "seconds"],
                ["full run", f"${full_usd:.6f}", f"{full_s:.2f}"],
                ["rerun", f"${rerun_usd:.6f}", f"{rerun_s:.2f}"],
                [
                    "rerun / full",
                    f"{rerun_usd / full_usd:.2f}",
                    f"{rerun_s / full_s:.2f}",
                ],
            ]
        )
    )
    print(f"\nsteps on SQLite, {STEPS} per run, medians of {RUNS * 2} runs each")
    print(
        table(
            [
                ["step", "µs/step"],
                ["plain (baseline)", f"{plain_us:.0f}"],
                ["cache=True, a miss", f"{miss_us:.0f}"],
                ["miss overhead / plain", f"{(miss_us - plain_us) / plain_us:.1%}"],
            ]
        )
    )
    raw = floor["insert+commit"]
    print(
        f"\nSQLite's floor: plain sqlite3 on the same file, medians of {RUNS * 2} runs"
    )
    print(
        table(
            [
                ["per step", "µs/step", "over insert+commit"],
                ["insert+commit", f"{raw:.0f}", ""],
                *(
                    [kind, f"{floor[kind]:.0f}", f"{(floor[kind] - raw) / raw:+.1%}"]
                    for kind in ("+ lookup", "+ entry")
                ),
            ]
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
