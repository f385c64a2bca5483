"""`Engine.rerun` against the simulated provider: change one prompt, pay for it only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from resumable import Engine, map_steps, step, workflow
from resumable.pricing import Price, PriceTable
from resumable.simulator import SimulatedProvider
from resumable.stores.protocol import Store

PRICES = PriceTable({"sim-model": Price(input_per_mtok=1.0, output_per_mtok=4.0)})
DOCS = [
    f"Report {n}: the Lisbon warehouse shipped {n * 7} orders late." for n in range(4)
]
CLIENT: list[openai.AsyncOpenAI] = []
CURRENT: dict[str, Any] = {}  # the summary step the pipeline calls: today's code


async def complete(prompt: str) -> str:
    response = await CLIENT[0].chat.completions.create(
        model="sim-model", temperature=0, messages=[{"role": "user", "content": prompt}]
    )
    return response.choices[0].message.content or ""


@step(name="tests.rerun.summarize", cache=True)
async def summarize_v1(doc: str) -> str:
    return await complete(f"Summarize in one line: {doc}")


@step(name="tests.rerun.summarize", cache=True)
async def summarize_v2(doc: str) -> str:  # the one prompt that changed
    return await complete(f"Summarize in five words, for an executive: {doc}")


@step(name="tests.rerun.entities", cache=True)
async def entities(doc: str) -> str:
    return await complete(f"List the places named in: {doc}")


@step(name="tests.rerun.report", cache=True)
async def report(summaries: list[str], places: list[str]) -> str:
    return await complete("Write a report from: " + " / ".join(summaries + places))


@workflow(name="tests.rerun.pipeline")
async def pipeline(docs: list[str]) -> str:
    summaries = await map_steps(CURRENT["summarize"], docs, progress=False)
    places = await map_steps(entities, docs, progress=False)
    return await report(summaries, places)


@pytest.fixture
def provider() -> Iterator[SimulatedProvider]:
    with SimulatedProvider() as provider:
        CURRENT["summarize"] = summarize_v1
        yield provider


async def test_a_rerun_with_one_prompt_changed_calls_only_what_changed(
    store: Store, provider: SimulatedProvider
) -> None:
    client = openai.AsyncOpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    )
    CLIENT[:] = [client]
    try:
        await _change_one_prompt_and_rerun(store, provider)
    finally:
        await client.close()


async def _change_one_prompt_and_rerun(
    store: Store, provider: SimulatedProvider
) -> None:
    engine = Engine(store, prices=PRICES)
    await engine.run(pipeline, DOCS, run_id="job-1")
    assert len(provider.requests()) == 2 * len(DOCS) + 1
    entity_cost = sum(
        [
            s.cost_usd or 0.0
            async for s in engine.export(["job-1"])
            if s.step == "tests.rerun.entities"
        ]
    )
    assert entity_cost > 0

    CURRENT["summarize"] = summarize_v2
    provider.reset_log()
    rerun = await engine.rerun("job-1", run_id="job-2")
    asked = [entry.last_user_text for entry in provider.requests()]
    # the changed summaries, and the report whose arguments they changed: no more
    assert sorted(a.split(":")[0] for a in asked) == [
        *["Summarize in five words, for an executive"] * len(DOCS),
        "Write a report from",
    ]
    ledger = await engine.ledger(rerun)
    assert ledger.cached_steps == len(DOCS)  # every entities call
    assert ledger.cached.cost_usd == pytest.approx(entity_cost)
    assert ledger.reused.cost_usd == pytest.approx(entity_cost)
    assert ledger.incurred.calls == len(DOCS) + 1

    # a full run of today's code, nothing cached, gives the same result
    assert await engine.clear_cache() > 0
    provider.reset_log()
    full = await engine.run(pipeline, DOCS, run_id="job-3")
    assert len(provider.requests()) == 2 * len(DOCS) + 1
    assert full == await engine.resume(rerun)
