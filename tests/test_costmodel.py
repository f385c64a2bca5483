from __future__ import annotations

import collections
import json
import random
from pathlib import Path
from typing import Any

import pytest

from resumable import Engine, current_run, step, workflow
from resumable.costmodel import (
    BYTES_PER_TOKEN,
    SECONDS_PER_DAY,
    Inputs,
    Overhead,
    StepCost,
    break_even,
    estimate,
    expected_attempts_restarted,
    expected_attempts_resumed,
    load_overheads,
    step_cost,
)
from resumable.costobserved import RunSample, observe, summarize
from resumable.errors import ResumableError
from resumable.pricing import PriceTable
from resumable.stores.memory import MemoryStore

OVERHEAD = Overhead(
    us_per_step=500.0,
    bytes_per_step=300.0,
    bytes_per_run=200.0,
    writes_per_run=3,
    writes_per_resume=3,
    source="test",
)


def inputs(**changes: Any) -> Inputs:
    fields: dict[str, Any] = {
        "steps": (StepCost(cost_usd=0.01, payload_bytes=1000),) * 10,
        "failure_rate": 0.02,
        "overhead": OVERHEAD,
        "retention_days": 30.0,
        "step_seconds": 1.0,
        "lease_ttl_s": 6.0,
        "usd_per_gb_month": 0.10,
        "usd_per_million_writes": 0.0,
        "store_usd_per_month": 0.0,
    }
    fields.update(changes)
    return Inputs(**fields)


def test_two_steps_at_even_odds_cost_six_restarting_and_four_resuming() -> None:
    # by hand: a try pays step 1, and step 2 half the time (1.5); 1/0.25 = 4 tries
    assert expected_attempts_restarted([1.0, 1.0], 0.5) == pytest.approx(6.0)
    assert expected_attempts_resumed([1.0, 1.0], 0.5) == pytest.approx(4.0)


def test_the_formulas_agree_with_a_simulation_of_failing_steps() -> None:
    rng = random.Random(7)  # noqa: S311 - a seeded simulation, not a secret
    costs, p, trials = [1.0, 2.0, 3.0, 4.0, 5.0], 0.1, 40_000
    restarted = resumed = 0.0
    for _ in range(trials):
        i = 0
        while i < len(costs):  # restart: a failure sends us back to step 1
            restarted += costs[i]
            i = 0 if rng.random() < p else i + 1
        for cost in costs:  # resume: a failure retries that step alone
            resumed += cost
            while rng.random() < p:
                resumed += cost
    assert restarted / trials == pytest.approx(
        expected_attempts_restarted(costs, p), rel=0.02
    )
    assert resumed / trials == pytest.approx(
        expected_attempts_resumed(costs, p), rel=0.02
    )


def test_a_single_step_or_no_failures_saves_nothing() -> None:
    one = estimate(inputs(steps=(StepCost(cost_usd=1.0, payload_bytes=10),)), 1000)
    assert one.avoided_usd_per_day == pytest.approx(0.0, abs=1e-9)
    never = estimate(inputs(failure_rate=0.0), 1000)
    assert never.avoided_usd_per_day == pytest.approx(0.0, abs=1e-9)
    assert break_even(
        inputs(steps=(StepCost(cost_usd=1.0, payload_bytes=10),)), 1000
    ) == break_even(inputs(failure_rate=0.0), 1000)
    assert break_even(inputs(failure_rate=0.0), 1000).step_seconds is None


def test_storage_writes_and_latency_follow_the_documented_formulas() -> None:
    at = estimate(inputs(), 10_000)
    per_request = 200 + 10 * (300 + 1000)
    assert at.bytes_per_request == per_request
    assert at.storage_bytes_per_day == per_request * 10_000
    assert at.storage_bytes_steady == per_request * 10_000 * 30
    interruptions = 10 * 0.02 / 0.98
    renewals = 10 * 1.0 // 2.0  # every third of a 6 s lease, over 10 s of steps
    writes = 10 + 3 + interruptions * 3 + renewals
    assert at.writes_per_request == pytest.approx(writes)
    assert at.write_ops_per_s == pytest.approx(writes * 10_000 / SECONDS_PER_DAY)
    assert at.added_latency_per_step_ms == 0.5
    assert at.added_latency_per_request_ms == 5.0
    storage_usd = per_request * 10_000 * 30 / 1e9 * 0.10 / 30
    assert at.store_usd_per_day == pytest.approx(storage_usd)
    assert at.roi == pytest.approx((at.avoided_usd_per_day - storage_usd) / storage_usd)


def test_write_and_fixed_prices_add_to_the_store_cost() -> None:
    base = estimate(inputs(), 1000).store_usd_per_day
    priced = estimate(
        inputs(usd_per_million_writes=1.0, store_usd_per_month=30.0), 1000
    )
    writes_usd = priced.writes_per_request * 1000 / 1e6
    assert priced.store_usd_per_day == pytest.approx(base + writes_usd + 1.0)


def test_at_the_break_even_spend_the_net_saving_is_zero() -> None:
    model = inputs(store_usd_per_month=300.0)
    even = break_even(model, 1000)
    assert even.llm_usd_per_request is not None
    scale = even.llm_usd_per_request / model.llm_usd_per_request

    def net_at(factor: float) -> float:
        steps = tuple(
            StepCost(cost_usd=s.cost_usd * factor, payload_bytes=s.payload_bytes)
            for s in model.steps
        )
        return estimate(
            inputs(store_usd_per_month=300.0, steps=steps), 1000
        ).net_usd_per_day

    assert net_at(scale) == pytest.approx(0.0, abs=1e-9)
    assert net_at(scale / 2) < 0 < net_at(scale * 2)
    assert even.step_seconds is not None
    # at the break-even step time, the time restarting re-runs equals the overhead
    unit = [1.0] * 10
    saved = expected_attempts_restarted(unit, 0.02) - expected_attempts_resumed(
        unit, 0.02
    )
    assert even.step_seconds * saved == pytest.approx(10 * 500e-6)


def test_a_step_is_priced_from_the_price_table() -> None:
    priced = step_cost(
        PriceTable(), model="gpt-5-mini", input_tokens=2000, output_tokens=500
    )
    assert priced.cost_usd == pytest.approx((2000 * 0.25 + 500 * 2.0) / 1e6)
    assert priced.payload_bytes == 500 * BYTES_PER_TOKEN
    with pytest.raises(ValueError, match="no price for model 'nope'"):
        step_cost(PriceTable(), model="nope", input_tokens=1, output_tokens=1)


def test_bad_inputs_are_refused_with_the_field_named() -> None:
    with pytest.raises(ValueError, match="failure rate"):
        inputs(failure_rate=1.0)
    with pytest.raises(ValueError, match="retention_days"):
        inputs(retention_days=-1.0)
    with pytest.raises(ValueError, match="at least one step"):
        inputs(steps=())


def test_the_shipped_overheads_cover_every_store_kind() -> None:
    shipped = load_overheads()
    assert {"sqlite", "sqlite-normal", "postgres", "redis"} <= shipped.keys()
    for kind, figures in shipped.items():
        assert figures.us_per_step > 0, kind
        assert figures.bytes_per_step > 0, kind
        assert figures.bytes_per_run > 0, kind
        assert "benchmarks/" in figures.source, kind


class _Counting:
    def __init__(self, inner: MemoryStore) -> None:
        self._inner = inner
        self.calls: collections.Counter[str] = collections.Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name.startswith(("load", "get", "list", "close", "open", "url")):
            return attr
        if not callable(attr):
            return attr

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return await attr(*args, **kwargs)

        return counted


class Crash(BaseException):
    pass


CRASH_AT = [-1]


@step
async def priced(i: int) -> str:
    if i == CRASH_AT[0]:
        raise Crash
    current_run().record_usage(model="gpt-5-mini", input_tokens=1000, output_tokens=100)
    return "x" * 50


@workflow(name="tests.costmodel.flow")
async def flow(n: int) -> int:
    for i in range(n):
        await priced(i)
    return n


async def test_the_shipped_write_counts_match_a_counted_run() -> None:
    counting = _Counting(MemoryStore())
    engine = Engine(counting)  # a delegating proxy
    await engine.run(flow, 4, run_id="counted")
    shipped = load_overheads()["sqlite"]
    assert sum(counting.calls.values()) == 4 + shipped.writes_per_run


async def test_observe_measures_steps_failures_and_cost_from_real_runs(
    tmp_path: Path,
) -> None:
    engine = Engine(f"sqlite:///{tmp_path / 'seen.db'}")
    try:
        await engine.run(flow, 4, run_id="clean")
        CRASH_AT[0] = 2
        with pytest.raises(Crash):
            await engine.run(flow, 4, run_id="crashed")
        CRASH_AT[0] = -1
        await engine.run(flow, 4, run_id="crashed")  # resumes at step 3
        seen = await observe(engine, workflow="tests.costmodel.flow")
    finally:
        CRASH_AT[0] = -1
        await engine.close()
    assert seen.runs == 2
    assert seen.steps_per_run == 4
    assert seen.failure_rate == pytest.approx(1 / 9)  # one interruption, 9 attempts
    per_call = (1000 * 0.25 + 100 * 2.0) / 1e6
    assert seen.cost_usd_per_step == pytest.approx(8 * per_call / 9)
    assert seen.input_tokens_per_step == pytest.approx(8000 / 9)
    assert seen.payload_bytes_per_step > 50


def test_summarize_refuses_an_empty_store() -> None:
    with pytest.raises(ResumableError, match="no finished run"):
        summarize([])
    sample = RunSample(
        steps=3,
        interruptions=1,
        cost_usd=0.4,
        input_tokens=40,
        output_tokens=8,
        payload_bytes=30,
        step_ms=300,
    )
    seen = summarize([sample])
    assert seen.failure_rate == 0.25
    assert seen.cost_usd_per_step == pytest.approx(0.1)
    assert seen.payload_bytes_per_step == 10
    assert seen.step_seconds == pytest.approx(0.1)


def test_the_shipped_data_file_is_valid_json_with_units() -> None:
    text = (
        Path(__file__).parent.parent / "src" / "resumable" / "data" / "overhead.json"
    ).read_text()
    assert json.loads(text)["sqlite"]["us_per_step"] > 0


def test_a_cache_hit_rate_takes_its_share_off_the_resumed_llm_spend() -> None:
    plain = estimate(inputs(), 1000)
    cached = estimate(inputs(cache_hit_rate=0.75), 1000)
    assert cached.llm_usd_per_day_resumed == pytest.approx(
        plain.llm_usd_per_day_resumed * 0.25
    )
    assert cached.llm_usd_per_day_restarted == plain.llm_usd_per_day_restarted
    assert cached.avoided_usd_per_day > plain.avoided_usd_per_day
    with pytest.raises(ValueError, match="cache hit rate"):
        inputs(cache_hit_rate=1.5)
