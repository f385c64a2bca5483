"""How many durable steps per second one process commits to PostgreSQL.

100 concurrent runs x 50 steps through one `resumable.Engine`; concurrent commits
share transactions (group commit). Prints steps/s (target: at least 5,000) and the
client CPU time per step (time.process_time), median of 3 rounds.

    RESUMABLE_TEST_POSTGRES_URL=postgresql://... python benchmarks/pg_throughput.py
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid

from resumable import Engine, step, workflow
from resumable.stores.postgres import PostgresStore

URL = os.environ.get(
    "RESUMABLE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
RUNS = 100
STEPS = 50
ROUNDS = 3


@step
async def work(i: int) -> str:
    await asyncio.sleep(0)  # a real step awaits something
    return f"result {i} " * 8


@workflow
async def agent(n: int) -> int:
    for i in range(n):
        await work(i)
    return n


async def one_round(
    engine: Engine, store: PostgresStore, tag: str
) -> tuple[float, float, int]:
    """(steps/s, client CPU us/step, commit transactions) for one round."""
    transactions: list[int] = []
    store.add_commit_listener(transactions.append)
    wall, cpu = time.perf_counter(), time.process_time()
    results = await asyncio.gather(
        *(engine.run(agent, STEPS, run_id=f"{tag}-{i}") for i in range(RUNS))
    )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert results == [STEPS] * RUNS
    total = RUNS * STEPS
    return total / wall, cpu / total * 1e6, len(transactions)


async def main() -> None:
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    store = PostgresStore(f"{URL}{'&' if '?' in URL else '?'}schema={schema}")
    engine = Engine(store)
    try:
        await engine.run(agent, 1, run_id="warm-up")
        rounds = [await one_round(engine, store, f"r{i}") for i in range(ROUNDS)]
        rate = statistics.median(r[0] for r in rounds)
        cpu = statistics.median(r[1] for r in rounds)
        print(f"{RUNS} runs x {STEPS} steps, {ROUNDS} rounds")
        for i, (r, c, t) in enumerate(rounds):
            print(
                f"  round {i}: {r:8.0f} steps/s  {c:6.1f} CPU us/step  "
                f"{t} commit transactions ({RUNS * STEPS / t:.1f} steps each)"
            )
        print(f"throughput: {rate:8.0f} steps/s (target >= 5,000)")
        print(f"client CPU: {cpu:8.1f} us/step")
    finally:
        await store.drop()
        await engine.close()


if __name__ == "__main__":
    asyncio.run(main())
