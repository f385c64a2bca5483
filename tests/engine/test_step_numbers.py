"""History numbers steps in call order and lists map items under their call by key."""

from __future__ import annotations

import pytest

from resumable import Engine, map_steps, step, workflow
from resumable._engine.history import in_call_order
from resumable._engine.map_items import journal_seq, keyed_seq
from resumable.serde import Serde
from resumable.stores.protocol import StepRecord, Store

ITEMS = [["mail-0", "mail-1"]]


class Crash(BaseException):
    pass


@step(name="tests.numbers.mail")
async def mail(to: str) -> str:
    if to == "crash":
        raise Crash
    return f"mailed {to}"


@step(name="tests.numbers.count")
async def count(sent: list[str]) -> int:
    return len(sent)


@workflow(name="tests.numbers.campaign")
async def campaign() -> int:
    sent = await map_steps(mail, ITEMS[0], progress=False)
    return await count(sent)


async def test_the_journal_starts_at_one_with_items_under_their_map_call(
    store: Store,
) -> None:
    ITEMS[0] = ["mail-0", "mail-1"]
    engine = Engine(store)
    assert await engine.run(campaign, run_id="n-1") == 2
    steps = await engine.history("n-1")
    assert [(s.seq, s.item_key, s.name) for s in steps] == [
        (1, None, "map:tests.numbers.mail"),
        (1, "mail-0", "tests.numbers.mail"),
        (1, "mail-1", "tests.numbers.mail"),
        (2, None, "tests.numbers.count"),
    ]
    assert steps[0].output() == ["mail-0", "mail-1"]
    exported = [(r.seq, r.item_key) async for r in engine.export(["n-1"])]
    assert exported == [(s.seq, s.item_key) for s in steps]


async def test_a_batch_that_grew_on_resume_lists_every_item_under_its_call(
    store: Store,
) -> None:
    ITEMS[0] = ["a", "crash"]
    engine = Engine(store)
    with pytest.raises(Crash):
        await engine.run(campaign, run_id="n-2")
    ITEMS[0] = ["a", "b", "c"]  # the fixed code's batch is larger
    assert await engine.resume("n-2") == 3
    steps = await engine.history("n-2")
    assert [s.item_key for s in steps if s.seq == 1] == [None, "a", "b", "c"]


def _record(seq: int, name: str, output: bytes | None = None) -> StepRecord:
    return StepRecord(
        run_id="r",
        seq=seq,
        name=name,
        fingerprint="-",
        status="ok",
        output=output,
        attempts=1,
        started_at_ms=0,
        finished_at_ms=0,
    )


def test_an_item_no_map_call_lists_comes_last_without_a_key() -> None:
    serde = Serde()
    legacy = keyed_seq(2, "k")  # recorded before map calls listed their keys
    listed = keyed_seq(3, "mail-0")
    journal = {
        1: _record(1, "fetch"),
        legacy: _record(legacy, "mail"),
        listed: _record(listed, "mail"),
        3: _record(3, "map:mail", serde.dumps(["mail-0"], place="p")),
        4: _record(4, "count"),
        -1: _record(-1, "ledger"),
    }
    ordered = [(n, key, r.name) for n, key, r in in_call_order(journal, serde)]
    assert ordered == [
        (1, None, "fetch"),
        (3, None, "map:mail"),
        (3, "mail-0", "mail"),
        (4, None, "count"),
        (legacy, None, "mail"),
    ]
    assert journal_seq(3, "mail-0") == listed
    assert journal_seq(4, None) == 4
