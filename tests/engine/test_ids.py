"""One id limit, valid on every store and refused up front."""

from __future__ import annotations

import asyncio

import pytest

from resumable import Engine, step, wait_for, workflow
from resumable._engine.ids import MAX_ID_BYTES, stored_size
from resumable.stores.protocol import Store

# ids exactly at the limit: plain ASCII, and the worst case for the SQL stores'
# escaping (a lone surrogate is kept as 6 bytes)
AT_LIMIT = {
    "ascii": "r" * MAX_ID_BYTES,
    "escaped": "\udc80" * (MAX_ID_BYTES // 6) + "x" * (MAX_ID_BYTES % 6),
}


def test_the_ids_at_the_limit_are_exactly_at_it() -> None:
    assert all(stored_size(value) == MAX_ID_BYTES for value in AT_LIMIT.values())


@pytest.mark.parametrize("kind", sorted(AT_LIMIT))
async def test_ids_at_the_limit_work_on_every_store(store: Store, kind: str) -> None:
    long_id = AT_LIMIT[kind]

    @step(name=long_id)
    async def echo(x: int) -> int:
        return x

    @workflow
    async def flow() -> object:
        await echo(1)
        return await wait_for(long_id)

    engine = Engine(store, store_retry_s=0.2)
    task = asyncio.ensure_future(engine.run(flow, run_id=long_id))
    for _ in range(2000):
        await asyncio.sleep(0.005)
        if (await engine.runs()) and (await engine.get(long_id)).status == "waiting":
            break
    await engine.send(long_id, long_id, "answer")
    assert await asyncio.wait_for(task, 10) == "answer"
    assert (await engine.history(long_id))[0].name == long_id
    await engine.save_state(long_id, {"a": 1}, namespace=long_id)
    assert await engine.load_state(long_id, namespace=long_id) == {"a": 1}


async def test_longer_ids_are_refused_before_anything_is_written(store: Store) -> None:
    engine = Engine(store, store_retry_s=0.2)
    too_long = "x" * (MAX_ID_BYTES + 1)

    @workflow
    async def flow() -> int:
        return 1

    with pytest.raises(ValueError, match=f"at most {MAX_ID_BYTES} bytes"):
        await engine.run(flow, run_id=too_long)
    with pytest.raises(ValueError, match="run_id"):
        await engine.run(flow, run_id="\udc80" * (MAX_ID_BYTES // 6 + 1))
    with pytest.raises(ValueError, match="thread_id"):
        await engine.save_state(too_long, {"a": 1})
    with pytest.raises(ValueError, match="queue name"):
        await engine.enqueue(flow, queue=too_long)
    assert await engine.runs() == []
    assert await engine.state_history(too_long) == []
    await engine.run(flow, run_id="ok")
    with pytest.raises(ValueError, match="input key"):
        await engine.send("ok", too_long, 1)


def test_step_and_workflow_names_are_checked_when_decorated() -> None:
    too_long = "s" * (MAX_ID_BYTES + 1)
    with pytest.raises(ValueError, match="step name"):

        @step(name=too_long)
        async def a() -> None: ...

    with pytest.raises(ValueError, match="workflow name"):

        @workflow(name=too_long)
        async def b() -> None: ...


async def test_a_child_of_a_run_with_an_id_at_the_limit_gets_an_id_within_it() -> None:
    @workflow
    async def child(x: int) -> int:
        return x + 1

    @workflow
    async def parent() -> int:
        return await child(1)

    engine = Engine("memory://")
    assert await engine.run(parent, run_id=AT_LIMIT["ascii"]) == 2
    (kid,) = await engine.runs(parent=AT_LIMIT["ascii"])
    assert stored_size(kid.run_id) <= MAX_ID_BYTES
    assert kid.run_id.endswith("/1")
