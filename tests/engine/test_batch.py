from __future__ import annotations

import io
from collections.abc import Iterator

import openai
import pytest

from resumable import Engine, RateLimit, WorkflowFailed, map_steps, step, workflow
from resumable.pricing import Price, PriceTable
from resumable.simulator import SimulatedProvider
from resumable.stores.protocol import Store
from resumable.testing import FakeClock

PRICES = PriceTable({"sim-model": Price(input_per_mtok=1.0, output_per_mtok=4.0)})


@pytest.fixture
def provider() -> Iterator[SimulatedProvider]:
    with SimulatedProvider() as provider:
        yield provider


async def test_items_are_identified_by_key_not_position(store: Store) -> None:
    calls: list[str] = []
    batch = [["a", "b", "c"]]

    @step
    async def shout(word: str) -> str:
        calls.append(word)
        return word.upper()

    @workflow(name="tests.batch.keys")
    async def wf() -> list[str]:
        return await map_steps(shout, batch[0], concurrency=2, progress=False)

    engine = Engine(store)
    assert await engine.run(wf, run_id="keys") == ["A", "B", "C"]
    batch[0] = ["d", "c", "a", "b"]  # reordered and grown: only "d" is new
    assert await engine.resume("keys") == ["A", "B", "C"]  # a finished run replays
    fork = await engine.fork("keys", at_step=0)
    await engine.resume(fork)
    assert sorted(calls) == [
        "a",
        "a",
        "b",
        "b",
        "c",
        "c",
        "d",
    ]  # the fork starts afresh

    calls.clear()
    batch[0] = ["a", "b", "c"]

    class Crash(BaseException):
        pass

    @step
    async def flaky(word: str) -> str:
        calls.append(word)
        if word == "c" and len(calls) < 4:
            raise Crash
        return word * 2

    @workflow(name="tests.batch.resume")
    async def resumable_batch() -> list[str]:
        return await map_steps(flaky, batch[0], concurrency=1, progress=False)

    with pytest.raises(Crash):
        await engine.run(resumable_batch, run_id="partial")
    batch[0] = ["c", "x", "b", "a"]
    assert await engine.run(resumable_batch, run_id="partial") == [
        "cc",
        "xx",
        "bb",
        "aa",
    ]
    assert calls == [
        "a",
        "b",
        "c",
        "c",
        "x",
    ]  # a and b replayed by key after the reorder


async def test_a_def_workflow_is_told_map_steps_needs_async_def(store: Store) -> None:
    @step
    async def shout(word: str) -> str:
        return word.upper()

    @workflow(name="tests.batch.def")
    def wf(words: list[str]) -> object:
        return map_steps(shout, words, progress=False)

    with pytest.raises(WorkflowFailed, match="make the workflow `async def`"):
        await Engine(store).run(wf, ["a", "b"], run_id="def-batch")


async def test_rate_limit_spaces_out_requests(store: Store) -> None:
    clock = FakeClock()

    @step
    async def call(i: int) -> int:
        return i

    @workflow(name="tests.batch.rate")
    async def wf() -> list[int]:
        return await map_steps(
            call,
            list(range(5)),
            rate_limit=RateLimit(requests_per_minute=2),
            progress=False,
        )

    start = clock.now_ms()
    assert await Engine(store, clock=clock).run(wf, run_id="rate") == [0, 1, 2, 3, 4]
    assert clock.now_ms() - start >= 120_000  # 5 requests at 2 a minute: two full waits


async def test_a_failed_item_fails_the_batch_after_the_others_finish(
    store: Store,
) -> None:
    done: list[int] = []

    @step
    async def maybe(i: int) -> int:
        if i == 2:
            raise ValueError("bad item")
        done.append(i)
        return i

    @workflow(name="tests.batch.fail")
    async def wf() -> list[int]:
        return await map_steps(maybe, list(range(6)), concurrency=3, progress=False)

    with pytest.raises(Exception, match="bad item"):
        await Engine(store).run(wf, run_id="fail")
    assert sorted(done) == [0, 1, 3, 4, 5]


async def test_progress_line_and_argument_checks(store: Store) -> None:
    sink = io.StringIO()

    @step
    async def echo(i: int) -> int:
        return i

    @workflow(name="tests.batch.progress")
    async def wf() -> list[int]:
        return await map_steps(echo, [1, 2, 3], progress=sink)

    await Engine(store).run(wf, run_id="progress")
    assert "3/3 done (0 replayed, 0 failed)" in sink.getvalue()

    @workflow(name="tests.batch.dupes")
    async def dupes() -> list[int]:
        return await map_steps(echo, [1, 1], progress=False)

    with pytest.raises(Exception, match="unique"):
        await Engine(store).run(dupes, run_id="dupes")
    with pytest.raises(Exception, match="awaited in a @workflow"):
        await map_steps(echo, [1])


async def test_a_batch_of_text_returning_llm_steps_shows_and_limits_its_tokens(
    provider: SimulatedProvider,
) -> None:
    clock = FakeClock()
    sink = io.StringIO()
    client = openai.AsyncOpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    )

    @step
    async def answer(question: str) -> str:
        r = await client.chat.completions.create(
            model="sim-model", messages=[{"role": "user", "content": question}]
        )
        return str(r.choices[0].message.content)  # the usage is not returned

    @workflow(name="tests.batch.llm")
    async def quiz(questions: list[str]) -> list[str]:
        return await map_steps(
            answer,
            questions,
            concurrency=1,
            rate_limit=RateLimit(tokens_per_minute=1),
            progress=sink,
        )

    questions = ["tea or coffee", "rain or sun", "cats or dogs"]
    async with Engine("memory://", clock=clock, prices=PRICES) as engine:
        await engine.run(quiz, questions, run_id="llm-batch")
        ledger = await engine.ledger("llm-batch")
    answered = [e.usage for e in provider.requests() if e.usage is not None]
    tokens = sum(u.input_tokens + u.output_tokens for u in answered)
    assert len(answered) == 3
    assert ledger.incurred.total_tokens == tokens
    # the progress line counts the calls the items made, as the ledger does
    assert sink.getvalue().endswith(
        f"3/3 done (0 replayed, 0 failed) 3 calls, {tokens:,} tok, "
        f"${ledger.incurred.cost_usd:.4f}\n"
    )
    # each item's tokens fill the minute's allowance: the next one waits it out
    assert clock.sleeps == [pytest.approx(60.0, abs=1.0)] * 2
    await client.close()
