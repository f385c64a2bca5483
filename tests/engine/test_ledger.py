from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletion

from resumable import (
    BudgetExceeded,
    Engine,
    Retry,
    current_run,
    step,
    workflow,
)
from resumable._engine import ledger
from resumable.pricing import Price, PriceTable
from resumable.simulator import Fault, FaultPlan, SimulatedProvider
from resumable.stores.protocol import StepRecord, Store
from resumable.testing import FakeClock

PRICES = PriceTable({"sim-model": Price(input_per_mtok=1.0, output_per_mtok=4.0)})


class Crash(BaseException):
    pass


@pytest.fixture
def provider() -> Iterator[SimulatedProvider]:
    with SimulatedProvider() as provider:
        yield provider


def client_for(provider: SimulatedProvider) -> openai.AsyncOpenAI:
    # the SDK's own retries are off: resumable's Retry is the one policy
    return openai.AsyncOpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    )


async def test_usage_is_recorded_and_replay_counts_as_reused(
    store: Store, provider: SimulatedProvider
) -> None:
    crash_at = [3]
    client = client_for(provider)

    @step(retry=Retry(attempts=3, initial_delay=0.01, on=(openai.RateLimitError,)))
    async def ask(question: str) -> ChatCompletion:
        if question.endswith(str(crash_at[0])):
            raise Crash  # the process dies before this call
        return await client.chat.completions.create(
            model="sim-model", messages=[{"role": "user", "content": question}]
        )

    @workflow(name="tests.ledger.quiz")
    async def quiz(n: int) -> list[str]:
        return [
            (await ask(f"question {i}")).choices[0].message.content or ""
            for i in range(n)
        ]

    engine = Engine(store, prices=PRICES)
    with pytest.raises(Crash):
        await engine.run(quiz, 5, run_id="quiz")
    crash_at[0] = -1
    answers = await engine.run(quiz, 5, run_id="quiz")
    assert len(answers) == 5
    await client.close()

    ledger = await engine.ledger("quiz")
    logged = provider.requests()
    assert len(logged) == 5  # every question was asked of the provider exactly once
    billed_in = sum(e.usage.input_tokens for e in logged if e.usage)
    billed_out = sum(e.usage.output_tokens for e in logged if e.usage)
    assert (ledger.incurred.input_tokens, ledger.incurred.output_tokens) == (
        billed_in,
        billed_out,
    )
    first, last = ledger.executions
    assert (first.incurred.calls, first.reused.calls) == (3, 0)
    assert (last.incurred.calls, last.reused.calls, last.replayed_steps) == (2, 3, 3)
    # the resumed execution paid for 2 calls and reused 3: together, a crash-free run
    assert (
        last.incurred.total_tokens + last.reused.total_tokens == billed_in + billed_out
    )
    assert ledger.incurred.cost_usd == pytest.approx(
        billed_in / 1e6 * 1.0 + billed_out / 1e6 * 4.0
    )
    assert ledger.unpriced_models == ()

    again = await Engine(store, prices=PRICES).ledger(
        "quiz"
    )  # another process, same numbers
    assert again == ledger


async def test_rate_limits_honour_the_servers_hint_and_failed_calls_stay_out(
    store: Store, provider: SimulatedProvider
) -> None:
    provider.set_faults(
        FaultPlan(schedule={1: Fault(kind="rate_limit", retry_after_s=7)})
    )
    clock = FakeClock()
    client = client_for(provider)

    @step(retry=Retry(attempts=3, initial_delay=0.5, on=(openai.RateLimitError,)))
    async def ask() -> ChatCompletion:
        return await client.chat.completions.create(
            model="sim-model", messages=[{"role": "user", "content": "hello"}]
        )

    @workflow(name="tests.ledger.hint")
    async def wf() -> str:
        return (await ask()).choices[0].message.content or ""

    engine = Engine(store, clock=clock, prices=PRICES)
    assert await engine.run(wf, run_id="hint")
    await client.close()
    assert clock.sleeps == [7]
    assert [e.status for e in provider.requests()] == [429, 200]
    assert (await engine.ledger("hint")).incurred.calls == 1  # a 429 is not billed


async def test_explicit_usage_unknown_models_and_odd_results(store: Store) -> None:
    @step
    async def custom() -> dict[str, Any]:
        current_run().record_usage(
            model="my-local-llm", input_tokens=10, output_tokens=5
        )
        current_run().record_usage(
            model="sim-model", input_tokens=1000, output_tokens=0, cost_usd=0.5
        )
        return {"object": "chat.completion", "usage": "not a usage object"}

    @workflow(name="tests.ledger.custom")
    async def wf() -> None:
        await custom()

    engine = Engine(store, prices=PRICES)
    await engine.run(wf, run_id="custom")
    ledger = await engine.ledger("custom")
    assert ledger.incurred.calls == 2
    assert ledger.incurred.total_tokens == 1015
    assert (
        ledger.incurred.cost_usd == 0.5
    )  # the stated cost wins; the unknown model is not guessed
    assert ledger.incurred.unpriced_calls == 1
    assert ledger.unpriced_models == ("my-local-llm",)


async def test_budget_stops_before_a_step_and_replays_are_free(store: Store) -> None:
    calls: list[int] = []

    @step
    async def spend(i: int) -> int:
        calls.append(i)
        current_run().record_usage(
            model="sim-model", input_tokens=0, output_tokens=0, cost_usd=0.4
        )
        return i

    @workflow(name="tests.ledger.budget", budget_usd=1.0)
    async def capped(n: int) -> int:
        return sum([await spend(i) for i in range(n)])

    engine = Engine(store, prices=PRICES)
    with pytest.raises(BudgetExceeded) as caught:
        await engine.run(capped, 5, run_id="cap")
    assert calls == [0, 1, 2]  # $1.20 spent once the third step ended; no fourth began
    assert caught.value.run_id == "cap"
    assert "$1.2000" in str(caught.value)
    with pytest.raises(
        BudgetExceeded
    ):  # replaying the paid steps costs nothing, still over
        await engine.run(capped, 5, run_id="cap")
    assert calls == [0, 1, 2]


def test_an_entry_names_the_seqs_it_replayed_and_an_older_one_only_counts() -> None:
    def entry(fence: int, decoded: dict[str, Any]) -> tuple[StepRecord, Any]:
        record = StepRecord(
            run_id="r",
            seq=-fence,
            name="resumable.ledger",
            fingerprint="-",
            status="ok",
            output=None,
            attempts=1,
            started_at_ms=0,
            finished_at_ms=0,
        )
        return record, decoded

    built = ledger.build(
        "r",
        [
            entry(2, {"replayed_steps": 2, "usage": []}),  # written before seqs were
            entry(
                3, {"replayed_steps": 2, "usage": [], "replayed_seqs": [[1, 1], [3, 3]]}
            ),
        ],
        PriceTable(),
    )
    older, newer = built.executions
    assert (older.replayed_seqs, older.replayed(1)) == (None, None)
    assert newer.replayed_seqs == ((1, 1), (3, 3))
    assert [newer.replayed(seq) for seq in (1, 2, 3, 4)] == [True, False, True, False]
