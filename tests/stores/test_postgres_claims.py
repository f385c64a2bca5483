"""PostgresStore's claims under concurrency: no run twice, limits global, no starving.

Apart from test_postgres.py (which restarts the server) so they can run on a shared one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import psycopg
import pytest
from psycopg import sql

from conftest import service_url
from resumable.stores.postgres import PostgresStore
from resumable.stores.protocol import QueuePolicy, RunQuery
from resumable.testing import T0, run_record

pytestmark = pytest.mark.postgres

Factory = Callable[..., PostgresStore]
Connect = Callable[[], Awaitable[psycopg.AsyncConnection[tuple[object, ...]]]]


@pytest.fixture
def new_store(new_postgres_store: Factory) -> Factory:
    return new_postgres_store


@pytest.fixture
def new_postgres_connection() -> Connect:
    """Opens a plain autocommit connection to the test server (the test closes it)."""
    url = service_url("postgres")

    async def connect() -> psycopg.AsyncConnection[tuple[object, ...]]:
        return await psycopg.AsyncConnection.connect(url, autocommit=True)

    return connect


async def claim_ids(
    store: PostgresStore,
    owner: str,
    *,
    limit: int,
    queues: dict[str, QueuePolicy] | None = None,
) -> list[str]:
    leases = await store.claim_runs(
        owner=owner,
        now_ms=T0,
        ttl_ms=60_000,
        limit=limit,
        workflows=["wf"],
        queues=queues or {},
    )
    return [lease.run_id for lease in leases]


async def test_concurrent_claimers_never_claim_the_same_run(new_store: Factory) -> None:
    first = await new_store().open()
    workers = [first, *[await new_store(first.schema).open() for _ in range(2)]]
    for i in range(60):
        await first.create_run(run_record(f"r{i:02}", created_at_ms=T0 + i))

    async def drain(store: PostgresStore, owner: str) -> list[str]:
        claimed: list[str] = []
        while leases := await claim_ids(store, owner, limit=4):
            claimed.extend(leases)
        return claimed

    claims = await asyncio.gather(*(drain(w, f"w{i}") for i, w in enumerate(workers)))
    every = [run_id for claimed in claims for run_id in claimed]
    assert sorted(every) == [f"r{i:02}" for i in range(60)]
    assert all(claims), "each claimer should have got some runs"


async def test_queue_limits_hold_across_concurrent_claimers(new_store: Factory) -> None:
    first = await new_store().open()
    workers = [first, *[await new_store(first.schema).open() for _ in range(2)]]
    for i in range(30):
        await first.create_run(
            run_record(f"c{i:02}", queue="gpu", created_at_ms=T0 + i)
        )
        await first.create_run(
            run_record(f"r{i:02}", queue="llm", created_at_ms=T0 + i)
        )
    policies = {
        "gpu": QueuePolicy(concurrency=4),
        "llm": QueuePolicy(rate=5, period_ms=60_000),
    }
    for _ in range(3):  # claimers race several times; the limits are global
        await asyncio.gather(
            *(
                claim_ids(w, f"w{i}", limit=20, queues=policies)
                for i, w in enumerate(workers)
            )
        )
    running = await first.list_runs(RunQuery(status=["running"], limit=1000))
    assert len([r for r in running if r.queue == "gpu"]) == 4
    assert len([r for r in running if r.queue == "llm"]) == 5


async def test_a_claim_takes_the_next_runs_past_those_another_transaction_holds(
    new_store: Factory, new_postgres_connection: Connect
) -> None:
    store = await new_store().open()
    for i in range(6):
        await store.create_run(run_record(f"r{i}", created_at_ms=T0 + i))
    async with await new_postgres_connection() as other, other.transaction():
        # another claimer, mid-transaction, holds the three oldest runs
        await other.execute(
            sql.SQL(
                "SELECT run_id FROM {}.resumable_runs WHERE run_id = ANY(%s) FOR UPDATE"
            ).format(sql.Identifier(store.schema)),
            (["r0", "r1", "r2"],),
        )
        assert await claim_ids(store, "w", limit=2) == ["r3", "r4"]
        assert await claim_ids(store, "w", limit=5) == ["r5"]
        assert await claim_ids(store, "w", limit=5) == []  # without waiting for them
    assert await claim_ids(store, "w", limit=5) == ["r0", "r1", "r2"]


async def test_many_claimers_of_one_run_each_share_a_small_backlog(
    new_store: Factory,
) -> None:
    first = await new_store().open()
    workers = [first, *[await new_store(first.schema).open() for _ in range(7)]]
    for i in range(16):
        await first.create_run(run_record(f"r{i:02}", created_at_ms=T0 + i))
    # fewer runs than one claim's window: each claimer still takes its own
    got = await asyncio.gather(
        *(claim_ids(w, f"w{i}", limit=1) for i, w in enumerate(workers))
    )
    taken = [run_id for ids in got for run_id in ids]
    assert len(taken) == len(set(taken)) == len(workers)
    assert sorted(taken) == [f"r{i:02}" for i in range(len(workers))]


async def test_a_claim_past_a_full_queue_counts_the_starts_it_takes(
    new_store: Factory,
) -> None:
    store = await new_store().open()
    await store.create_run(run_record("f0", queue="full", created_at_ms=T0))
    for i in range(3):
        await store.create_run(
            run_record(f"r{i}", queue="llm", created_at_ms=T0 + 1 + i)
        )
    policies = {
        "full": QueuePolicy(concurrency=0),
        "llm": QueuePolicy(rate=2, period_ms=60_000),
    }
    # f0 and r0 come first; f0 is refused, so the claim reads on and takes r1 too
    assert await claim_ids(store, "w", limit=2, queues=policies) == ["r0", "r1"]
    assert await claim_ids(store, "w", limit=2, queues=policies) == []  # rate spent
    assert await claim_ids(store, "w", limit=2, queues={}) == ["f0", "r2"]
