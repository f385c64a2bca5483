"""How fast workers claim runs from PostgreSQL: runs leased per second.

A backlog of queued runs is drained by concurrent claimers (each its own
`PostgresStore` on one schema, as separate worker processes would be), calling
`claim_runs` until nothing is left. Three cases: four claimers of 10 runs each
without queue policies; the same with every run in a queue under a concurrency
policy (queue locks and load reads); one claimer taking one run at a time.
Prints runs/s per case and its cost, us of claiming per run, the medians of
ROUNDS rounds (env RUNS, default 5); `compare_main.py` compares the costs.

    RESUMABLE_TEST_POSTGRES_URL=postgresql://... python benchmarks/pg_claims.py
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import statistics
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import table

from resumable.stores.postgres import PostgresStore
from resumable.stores.protocol import QueuePolicy, RunRecord

URL = os.environ.get(
    "RESUMABLE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
ROUNDS = int(os.environ.get("RUNS", "5"))
T0 = 1_700_000_000_000


@dataclasses.dataclass(frozen=True)
class Case:
    label: str
    runs: int
    claimers: int
    limit: int
    queue: str | None = None
    policies: Mapping[str, QueuePolicy] = dataclasses.field(default_factory=dict)


CASES = [
    Case("4 claimers x 10, no queue", runs=1600, claimers=4, limit=10),
    Case(
        "4 claimers x 10, queue with a concurrency limit",
        runs=1600,
        claimers=4,
        limit=10,
        queue="q",
        policies={"q": QueuePolicy(concurrency=1_000_000)},
    ),
    Case("1 claimer x 1, no queue", runs=300, claimers=1, limit=1),
]


def url(schema: str) -> str:
    return f"{URL}{'&' if '?' in URL else '?'}schema={schema}"


async def fill(store: PostgresStore, case: Case) -> None:
    base = RunRecord(
        run_id="",
        workflow="bench.claims",
        status="queued",
        input=b"{}",
        created_at_ms=T0,
        updated_at_ms=T0,
        queue=case.queue,
    )
    for start in range(0, case.runs, 100):
        await asyncio.gather(
            *(
                store.create_run(
                    dataclasses.replace(base, run_id=f"r{i:06}", created_at_ms=T0 + i)
                )
                for i in range(start, min(start + 100, case.runs))
            )
        )


async def drain(store: PostgresStore, case: Case, owner: str) -> int:
    claimed = 0
    while True:
        leases = await store.claim_runs(
            owner=owner,
            now_ms=T0 + 10 * case.runs,
            ttl_ms=3_600_000,
            limit=case.limit,
            workflows=["bench.claims"],
            queues=case.policies,
        )
        if not leases:
            return claimed
        claimed += len(leases)


async def one_round(case: Case) -> float:
    """Runs claimed per second by `case.claimers` concurrent claimers."""
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    stores = [PostgresStore(url(schema)) for _ in range(case.claimers)]
    try:
        for store in stores:
            await store.open()
        await fill(stores[0], case)
        start = time.perf_counter()
        counts = await asyncio.gather(
            *(drain(store, case, f"w{i}") for i, store in enumerate(stores))
        )
        elapsed = time.perf_counter() - start
        assert sum(counts) == case.runs, counts
        return case.runs / elapsed
    finally:
        await stores[0].drop()
        for store in stores:
            await store.close()


async def main() -> None:
    rows = [("case", "runs/s", "us/run")]
    for case in CASES:
        rates = [await one_round(case) for _ in range(ROUNDS)]
        costs = [1e6 / rate for rate in rates]
        rows.append(
            (
                case.label,
                f"{statistics.median(rates):.0f}",
                f"{statistics.median(costs):.0f}",
            )
        )
    print(f"claims on PostgreSQL, median of {ROUNDS} rounds")
    print(table(rows))


if __name__ == "__main__":
    asyncio.run(main())
