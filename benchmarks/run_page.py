"""The dashboard's run page of a live 100,000-step run on SQLite: one live refresh.

A live run's page is fetched again every 2 s (`ui.js`) with `X-Fragment: 1`, which
renders `run_page.render_live` only. The run is built through the Store protocol
(one `commit_step` per step, 1,000 at a time so SQLite groups them), each step with
a result and the usage of one LLM call, and left running. Printed: the median of
RUNS renders of the newest page and of the oldest, in seconds, and how many times
one render read the journal (`Store.load_journal`) and its size in HTML. With
DB=path the store is kept in that file and built only if it is missing.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _common import table

from resumable import Engine
from resumable._engine.ledger import encode_entries
from resumable.stores.protocol import RunRecord, StepRecord, Store
from resumable.ui.run_page import render_live
from resumable.usage import Usage

RUNS = int(os.environ.get("RUNS", "3"))
N = int(os.environ.get("STEPS", "100000"))
T0 = 1_780_000_000_000


async def fill(engine: Engine, run_id: str) -> None:
    """A running run of N steps, committed through the Store protocol."""
    store = engine.store
    await store.create_run(
        RunRecord(
            run_id=run_id,
            workflow="long",
            status="queued",
            input=engine.serde.dumps(((N,), {}), place="input"),
            created_at_ms=T0,
            updated_at_ms=T0,
        )
    )
    lease = await store.acquire_lease(run_id, owner="bench", now_ms=T0, ttl_ms=10**12)
    assert lease is not None
    usage = engine.serde.dumps(
        encode_entries(
            [
                (
                    lease.fence,
                    Usage(model="gpt-4o-mini", provider="openai", input_tokens=9),
                )
            ]
        ),
        place="usage",
    )

    def record(seq: int) -> StepRecord:
        return StepRecord(
            run_id=run_id,
            seq=seq,
            name="numbered",
            fingerprint="f" * 16,
            status="ok",
            output=engine.serde.dumps({"n": seq, "text": "x" * 40}, place="step"),
            attempts=1,
            started_at_ms=T0 + seq,
            finished_at_ms=T0 + seq + 1,
            usage=usage,
        )

    for start in range(1, N + 1, 1000):
        await asyncio.gather(
            *(
                store.commit_step(record(seq), fence=lease.fence)
                for seq in range(start, min(N, start + 999) + 1)
            )
        )


class Counting:
    """A store that counts `load_journal` calls and passes everything on."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.loads = 0

    async def load_journal(self, run_id: str, **kwargs: Any) -> Any:
        self.loads += 1
        return await self.store.load_journal(run_id, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


async def measure(url: str) -> list[list[str]]:
    rows = []
    async with Engine(url) as engine:
        if await engine.store.get_run("long") is None:
            began = time.perf_counter()
            await fill(engine, "long")
            print(f"built {N:,} steps in {time.perf_counter() - began:.1f} s")
        assert isinstance(engine.store, Store)  # every built-in store is a full one
        counting = Counting(engine.store)
        engine.store = counting  # counts and passes on
        for at in (None, "oldest"):
            times, html = [], ""
            for _ in range(RUNS):
                counting.loads = 0
                began = time.perf_counter()
                html = await render_live(engine, "long", at)
                times.append(time.perf_counter() - began)
            rows.append(
                [
                    at or "newest",
                    f"{statistics.median(times):.2f}",
                    str(counting.loads),
                    f"{len(html) / 1000:.0f} KB",
                ]
            )
    return rows


def main() -> None:
    kept = os.environ.get("DB")  # a file kept between measurements (built once)
    with tempfile.TemporaryDirectory() as tmp:
        rows = asyncio.run(measure(f"sqlite:///{kept or tmp + '/page.db'}"))
    print(f"SQLite, a running run of {N:,} steps: render_live (median of {RUNS})")
    print(table([["page", "s", "journal reads", "HTML"], *rows]))


if __name__ == "__main__":
    main()
