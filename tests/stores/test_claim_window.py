"""Every store reads the same candidate window (`claims.candidate_window`) per claim."""

from __future__ import annotations

from resumable.stores import claims
from resumable.stores.protocol import QueuePolicy, Store
from resumable.testing import T0, run_record

FULL = {"full": QueuePolicy(concurrency=0)}


async def claim_one(store: Store) -> list[str]:
    leases = await store.claim_runs(
        owner="w", now_ms=T0, ttl_ms=60_000, limit=1, workflows=["wf"], queues=FULL
    )
    return [lease.run_id for lease in leases]


async def queue_refused_runs(store: Store, count: int) -> None:
    for i in range(count):
        await store.create_run(
            run_record(f"full{i:03}", queue="full", created_at_ms=T0 + i)
        )


async def test_a_claim_looks_past_refused_runs_to_the_end_of_its_window(
    store: Store,
) -> None:
    window = claims.candidate_window(1)
    await queue_refused_runs(store, window - 1)
    await store.create_run(run_record("free", created_at_ms=T0 + window))
    assert await claim_one(store) == ["free"]


async def test_a_claim_reads_no_further_than_its_window(store: Store) -> None:
    window = claims.candidate_window(1)
    await queue_refused_runs(store, window)
    await store.create_run(run_record("free", created_at_ms=T0 + window))
    assert await claim_one(store) == []
