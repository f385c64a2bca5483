"""Fork takes the step numbers history() and `resumable show` print, and no more."""

from __future__ import annotations

import re

import pytest

from resumable import Engine, RunConflict, current_run, map_steps, step, workflow
from resumable.stores.protocol import Store
from resumable.ui.lineage_page import render_diff


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


SUMMARIZED: list[str] = []


@step(name="tests.forkpoints.summarize")
async def summarize(mail: str) -> str:
    SUMMARIZED.append(mail)
    current_run().record_usage(model="gpt-5-mini", input_tokens=1000, output_tokens=50)
    return mail.upper()


@step(name="tests.forkpoints.digest")
async def digest(summaries: list[str]) -> str:
    SUMMARIZED.append("digest")
    return ",".join(summaries)


@workflow(name="tests.forkpoints.inbox")
async def inbox(mails: list[str]) -> str:
    summaries = await map_steps(summarize, mails, progress=False)
    return await digest(summaries)


@pytest.mark.parametrize("at_step", [1, 2])
async def test_a_fork_after_a_map_call_executes_no_item_and_its_ledger_says_reused(
    store: Store, at_step: int
) -> None:
    SUMMARIZED.clear()
    engine = Engine(store)
    mails = ["m1", "m2", "m3", "m4", "m5", "m6"]
    assert await engine.run(inbox, mails, run_id="inbox-1") == "M1,M2,M3,M4,M5,M6"
    source = await engine.ledger("inbox-1")
    assert source.incurred.calls == 6
    SUMMARIZED.clear()
    fork = await engine.fork("inbox-1", at_step=at_step, run_id=f"inbox-1-{at_step}")
    assert await engine.resume(fork) == "M1,M2,M3,M4,M5,M6"
    # no item ran again; the digest only when the fork point is before it
    expected = [] if at_step == 2 else ["digest"]
    assert expected == SUMMARIZED
    forked = await engine.ledger(fork)
    assert forked.incurred.calls == 0
    assert forked.reused.calls == 6
    assert forked.reused.total_tokens == source.incurred.total_tokens
    assert forked.reused.cost_usd == pytest.approx(source.incurred.cost_usd)
    assert forked.reused.cost_usd > 0


async def test_the_diff_of_a_fork_with_its_source_shows_each_shared_item_as_shared(
    store: Store,
) -> None:
    engine = Engine(store)
    await engine.run(inbox, ["m1", "m2", "m3"], run_id="inbox-2")
    fork = await engine.fork("inbox-2", at_step=1, run_id="inbox-2-fork")
    page = await render_diff(engine, "inbox-2", fork)  # before the fork runs
    verdicts = re.findall(r'class="verdict v-[^"]+">([^<]+)<', page)
    assert verdicts == ["shared", "shared", "shared", "shared", "only in A"]
    for key in ("m1", "m2", "m3"):
        assert f"1 [{key}]" in page
    await engine.resume(fork)
    page = await render_diff(engine, "inbox-2", fork)
    verdicts = re.findall(r'class="verdict v-[^"]+">([^<]+)<', page)
    assert verdicts == ["shared", "shared", "shared", "shared", "same"]
    assert "0 of 5 steps differ" in page
