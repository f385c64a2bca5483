"""Fork takes the step numbers history() and `resumable show` print, and no more."""

from __future__ import annotations

import pytest

from resumable import Engine, RunConflict, map_steps, step, workflow
from resumable.stores.protocol import Store


@step(name="tests.forkpoints.mail")
async def mail(to: str) -> str:
    return f"mailed {to}"


@step(name="tests.forkpoints.count")
async def count(sent: list[str]) -> int:
    return len(sent)


@workflow(name="tests.forkpoints.campaign")
async def campaign() -> int:
    sent = await map_steps(mail, ["a", "b", "c"], progress=False)
    return await count(sent)


async def test_a_fork_past_the_last_step_is_refused_naming_the_range(
    store: Store,
) -> None:
    engine = Engine(store)
    assert await engine.run(campaign, run_id="fp-1") == 3
    history = await engine.history("fp-1")
    assert len(history) == 5  # the map call, its three items, the count
    for past in (3, len(history), 100):
        with pytest.raises(RunConflict, match=r"has 2 steps .* between 0 and 2; got"):
            await engine.fork("fp-1", at_step=past)
    with pytest.raises(RunConflict, match="got -1"):
        await engine.fork("fp-1", at_step=-1)
    fork = await engine.fork("fp-1", at_step=history[-1].seq, run_id="fp-1-fork")
    assert await engine.resume(fork) == 3


MAILED: list[str] = []


@step(name="tests.forkpoints.counted_mail")
async def counted_mail(to: str) -> str:
    MAILED.append(to)
    return f"mailed {to}"


@workflow(name="tests.forkpoints.counted_campaign")
async def counted_campaign(extra: list[str]) -> int:
    sent = await map_steps(counted_mail, ["a", "b", *extra], progress=False)
    return await count(sent)


async def test_a_fork_at_or_after_a_map_call_shares_its_items(store: Store) -> None:
    MAILED.clear()
    engine = Engine(store)
    assert await engine.run(counted_campaign, [], run_id="fi-1") == 2
    assert MAILED == ["a", "b"]
    at_map = await engine.fork("fi-1", at_step=1, args=(["c"],))
    assert await engine.resume(at_map) == 3
    assert MAILED == ["a", "b", "c"]  # the shared items replayed; only "c" ran
    shared = await engine.history(at_map)
    assert [(s.item_key, s.inherited_from) for s in shared if s.item_key] == [
        ("a", "fi-1"),
        ("b", "fi-1"),
        ("c", None),
    ]
    before_map = await engine.fork("fi-1", at_step=0)
    assert await engine.resume(before_map) == 2
    assert MAILED == ["a", "b", "c", "a", "b"]  # nothing shared: every item ran
