"""`Engine.rerun` against the simulated provider: change one prompt, pay for it only.

The pipeline is the demo's (`resumable demo`): its 50 documents, each summarized,
the entities of each summary extracted, and a report written from them all, 101
calls through the real `openai` SDK. Its steps are cached here, and the prompt
that changes is the entity extraction's: the summaries' calls are unchanged, so
the rerun is served them from the first run and asks the provider for the 50
changed extractions and the report their answers feed, nothing else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from resumable import Engine, map_steps, step, workflow
from resumable.cli._demo_flow import DOCUMENTS, documents
from resumable.pricing import Price, PriceTable
from resumable.simulator import RequestLogEntry, SimulatedProvider
from resumable.stores.protocol import Store

PRICES = PriceTable({"sim-model": Price(input_per_mtok=1.0, output_per_mtok=4.0)})
DOCS = documents()
CALLS = 2 * DOCUMENTS + 1
CLIENT: list[openai.AsyncOpenAI] = []
CURRENT: dict[str, Any] = {}  # the extraction step the pipeline calls: today's code


async def complete(prompt: str) -> str:
    response = await CLIENT[0].chat.completions.create(
        model="sim-model",
        temperature=0,
        max_tokens=120,
        messages=[{"role": "user", "content": prompt}],
    )
    return response.choices[0].message.content or ""


@step(name="tests.rerun.summarize", cache=True)
async def summarize(doc: dict[str, str]) -> str:
    return await complete(f"Summarize {doc['id']} in three sentences: {doc['text']}")


@step(name="tests.rerun.extract_entities", cache=True)
async def extract_entities_v1(summary: dict[str, str]) -> str:
    return await complete(
        f"List the entities in the summary of {summary['id']}: {summary['text']}"
    )


@step(name="tests.rerun.extract_entities", cache=True)
async def extract_entities_v2(summary: dict[str, str]) -> str:  # the changed prompt
    return await complete(
        f"List the people and companies in the summary of {summary['id']}: "
        f"{summary['text']}"
    )


@step(name="tests.rerun.write_report", cache=True)
async def write_report(summaries: list[dict[str, str]], entities: list[str]) -> str:
    digest = " ".join(s["text"][:80] for s in summaries)
    return await complete(
        f"Write an executive report from: {digest} Entities: {' '.join(entities)[:2000]}"
    )


@workflow(name="tests.rerun.analyze")
async def analyze(docs: list[dict[str, str]]) -> str:
    summaries = await map_steps(
        summarize, docs, key=lambda d: d["id"], concurrency=8, progress=False
    )
    items = [{"id": d["id"], "text": s} for d, s in zip(docs, summaries, strict=True)]
    entities = await map_steps(
        CURRENT["extract_entities"],
        items,
        key=lambda s: s["id"],
        concurrency=8,
        progress=False,
    )
    return await write_report(items, entities)


@pytest.fixture
def provider() -> Iterator[SimulatedProvider]:
    with SimulatedProvider() as provider:
        CURRENT["extract_entities"] = extract_entities_v1
        yield provider


def _asked(entries: list[RequestLogEntry]) -> Counter[str]:
    return Counter(entry.last_user_text for entry in entries)


def _cost(entries: list[RequestLogEntry]) -> float:
    """What the provider's reported usage of `entries` costs at PRICES."""
    price = PRICES.price("sim-model")
    assert price is not None
    return sum(
        (
            e.usage.input_tokens * price.input_per_mtok
            + e.usage.output_tokens * price.output_per_mtok
        )
        / 1e6
        for e in entries
        if e.usage is not None
    )


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
    await engine.run(analyze, DOCS, run_id="job-1")
    first = provider.requests()
    assert len(first) == CALLS
    unchanged = [e for e in first if e.last_user_text.startswith("Summarize ")]
    assert len(unchanged) == DOCUMENTS
    summary_cost = sum(
        [
            s.cost_usd or 0.0
            async for s in engine.export(["job-1"])
            if s.step == "tests.rerun.summarize"
        ]
    )
    assert summary_cost == pytest.approx(_cost(unchanged))
    assert summary_cost > 0

    CURRENT["extract_entities"] = extract_entities_v2
    provider.reset_log()
    rerun = await engine.rerun("job-1", run_id="job-2")
    changed = provider.requests()

    # a full run of today's code, nothing cached, asks for every call
    assert await engine.clear_cache() > 0
    provider.reset_log()
    full = await engine.run(analyze, DOCS, run_id="job-3")
    every = provider.requests()
    assert len(every) == CALLS
    assert full == await engine.resume(rerun)

    # the rerun asked for exactly the calls the change made different: the full
    # run's, less the summaries (the same prompts as the first run's)
    assert _asked(changed) == _asked(every) - _asked(unchanged)
    kinds = Counter(entry.last_user_text.split(":")[0] for entry in changed)
    assert kinds == {
        **{
            f"List the people and companies in the summary of {d['id']}": 1
            for d in DOCS
        },
        "Write an executive report from": 1,
    }
    ledger = await engine.ledger(rerun)
    assert ledger.cached_steps == DOCUMENTS  # every summary
    assert ledger.cached.cost_usd == pytest.approx(summary_cost)
    assert ledger.reused.cost_usd == pytest.approx(summary_cost)
    assert ledger.incurred.calls == DOCUMENTS + 1
    assert ledger.incurred.cost_usd == pytest.approx(_cost(changed))
