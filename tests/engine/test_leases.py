from __future__ import annotations

import asyncio
import collections

from resumable import Engine, step, workflow
from resumable.stores.protocol import Store

calls_by_step: collections.Counter[int] = collections.Counter()


@step
async def contended(i: int) -> int:
    calls_by_step[i] += 1
    await asyncio.sleep(0.005)
    return i


@workflow(name="tests.leases.race")
async def race(n: int) -> int:
    return sum([await contended(i) for i in range(n)])


async def test_two_engines_racing_on_one_run_execute_each_step_once(
    store: Store,
) -> None:
    calls_by_step.clear()
    first, second = Engine(store, lease_ttl_s=2), Engine(store, lease_ttl_s=2)
    assert first.owner != second.owner
    results = await asyncio.gather(
        first.run(race, 8, run_id="contended"), second.run(race, 8, run_id="contended")
    )
    assert list(results) == [28, 28]
    assert calls_by_step == collections.Counter(range(8))  # every step exactly once
    run = await store.get_run("contended")
    assert run is not None
    assert run.fence == 1  # one lease, never taken over
