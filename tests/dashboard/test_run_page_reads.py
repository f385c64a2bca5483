"""What one render of a run page reads: the journal once, values of its rows only."""

from __future__ import annotations

from pathlib import Path

from resumable import Engine, current_run, step, workflow
from resumable.stores.protocol import StepRecord
from resumable.stores.sqlite import SQLiteStore
from resumable.ui.run_page import render_live


class CountingStore(SQLiteStore):
    """A real SQLite store that counts the journals it is asked for."""

    journal_reads = 0

    async def load_journal(
        self, run_id: str, *, up_to_seq: int | None = None
    ) -> list[StepRecord]:
        self.journal_reads += 1
        return await super().load_journal(run_id, up_to_seq=up_to_seq)


@step
async def priced(i: int) -> str:
    current_run().record_usage(model="gpt-4o-mini", input_tokens=10 + i)
    return f"value {i}"


@workflow
async def long_priced(n: int) -> int:
    for i in range(n):
        await priced(i)
    return n


async def test_a_run_page_render_reads_the_journal_once_on_any_page(
    tmp_path: Path,
) -> None:
    store = CountingStore(f"sqlite:///{tmp_path}/reads.db")
    async with Engine(store) as engine:
        assert await engine.run(long_priced, 250, run_id="long") == 250
        for at, first, last in (
            (None, "151", "250"),
            ("oldest", "1", "100"),
            ("101", "101", "200"),
            ("999", "151", "250"),  # past the end: the last page, read again
        ):
            store.journal_reads = 0
            html = await render_live(engine, "long", at)
            assert store.journal_reads == (2 if at == "999" else 1)
            assert f"steps {first} to {last} of 250" in html
            assert html.count("<pre class=value>&quot;value ") == 100
        assert (await engine.ledger("long")).incurred.calls == 250
        assert "250 calls" in await render_live(engine, "long")


async def test_a_forks_page_prices_only_its_own_steps_as_its_ledger_does(
    tmp_path: Path,
) -> None:
    async with Engine(f"sqlite:///{tmp_path}/fork.db") as engine:
        await engine.run(long_priced, 5, run_id="original")
        fork = await engine.fork("original", at_step=3)
        assert await engine.resume(fork) == 5
        page = await engine.journal_page(fork, slice(0, 2))
        assert page.total == 5
        assert [s.seq for s in page.steps] == [1, 2]
        assert page.steps[0].inherited_from == "original"
        assert page.ledger == await engine.ledger(fork)
        assert page.ledger is not None
        assert page.ledger.incurred.calls == 2  # steps 4 and 5 ran in the fork
