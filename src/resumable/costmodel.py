"""What durability costs and what it saves, per day, from a few inputs (pure).

`resumable cost-model` prints these figures; this module holds the arithmetic so
it can be tested without a store. The formulas, for a request of N steps costing
c_1..c_N dollars of LLM calls, where each step attempt fails (the process dies,
the provider errors past its retries) with probability p and q = 1 - p::

    resumed  (this library)   E_resume  = sum(c_i) / q
        every step is retried alone until it succeeds: 1/q attempts on average
    restarted (no journal)    E_restart = sum(c_i * q**(i-1)) / q**N
        one try pays step i only if steps 1..i-1 succeeded; 1/q**N tries
    avoided per request       E_restart - E_resume   (0 when N == 1 or p == 0)

    interruptions / request   N * p / q   (failed attempts, each one resume)
    writes / request          N + writes_per_run + interruptions * writes_per_resume
                              + lease renewals: N * step_seconds / (lease_ttl_s / 3)
    bytes / request           bytes_per_run + N * (bytes_per_step + payload_bytes)
    storage at steady state   bytes / day * retention_days   (gc deletes older runs)
    write ops / s             requests_per_day * writes / request / 86400 (average)
    added latency / step      the measured per-step overhead of the store kind
    store $ / day             GB at steady state * usd_per_gb_month / 30
                              + writes / day * usd_per_million_writes / 1e6
                              + store_usd_per_month / 30
    ROI                       (avoided $ / day - store $ / day) / store $ / day

The failure model assumes independent failures and that a failed attempt costs
its whole step (the tokens were billed before the process died); it does not
model failures correlated in time (an outage fails every step at once).

Break-even: avoided spend is linear in the step costs, so scaling every step's
cost by s scales it by s. The LLM spend per request below which the store costs
more than resuming saves is `C * store_usd_per_request / avoided_per_request`,
with C the request's LLM spend. The same holds for time: steps shorter than
`N * overhead_s / (restarted_steps - resumed_steps)` make a request slower on
average with the journal than without it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from resumable.pricing import PriceTable

__all__ = [
    "BYTES_PER_TOKEN",
    "SECONDS_PER_DAY",
    "STORE_KINDS",
    "BreakEven",
    "Estimate",
    "Inputs",
    "Overhead",
    "StepCost",
    "break_even",
    "estimate",
    "expected_attempts_restarted",
    "expected_attempts_resumed",
    "load_overheads",
    "step_cost",
]

SECONDS_PER_DAY = 86_400
DAYS_PER_MONTH = 30
STORE_KINDS = ("memory", "sqlite", "sqlite-normal", "postgres", "redis")
BYTES_PER_TOKEN = 4
"""Bytes of English text per token (OpenAI's rule of thumb), for a step's payload."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StepCost:
    """One step of a request: what its LLM call costs and what it stores."""

    cost_usd: float
    """Dollars of LLM calls one attempt of the step makes."""
    payload_bytes: int
    """Bytes of the step's encoded result, stored in its journal row."""
    label: str = ""
    """How the step was described (for the printout): a model and its tokens."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Overhead:
    """What one store kind was measured to cost per step, by `make bench`."""

    us_per_step: float
    """Microseconds a committed step adds to the step's own time."""
    bytes_per_step: float
    """Bytes a step's row takes besides its payload (keys, columns, indexes)."""
    bytes_per_run: float
    """Bytes of a run's own record, besides its steps."""
    writes_per_run: int
    """Store writes a run makes besides one per step (create, lease, finish)."""
    writes_per_resume: int
    """Store writes one more execution adds (lease, ledger entry)."""
    source: str
    """The benchmark that measured it, and when."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Inputs:
    """Everything the model needs besides the request rate."""

    steps: tuple[StepCost, ...]
    """The request's steps, in order (order matters to a restart)."""
    failure_rate: float
    """Probability that one step attempt fails and ends the process or run."""
    overhead: Overhead
    retention_days: float
    """How long finished runs are kept before `resumable gc` deletes them."""
    step_seconds: float = 2.0
    """Wall time of one step (the LLM call): for lease renewals and break-even."""
    lease_ttl_s: float = 5.0
    """The engine's lease TTL; a running run renews it every third of it."""
    usd_per_gb_month: float = 0.10
    """Storage price."""
    usd_per_million_writes: float = 0.0
    """Write price (0 for a disk you own; set it for a per-request database)."""
    store_usd_per_month: float = 0.0
    """Fixed price of the store (a managed instance), whatever the load."""
    cache_hit_rate: float = 0.0
    """Share of step calls served from the step cache (`@step(cache=...)`): a hit
    makes no LLM call, so it takes its share off the resumed spend."""

    def __post_init__(self) -> None:
        if not self.steps:
            raise ValueError("a request needs at least one step")
        if not 0 <= self.failure_rate < 1:
            raise ValueError(
                f"the failure rate per step must be in [0, 1), got {self.failure_rate}"
            )
        for name in (
            "retention_days",
            "step_seconds",
            "usd_per_gb_month",
            "usd_per_million_writes",
            "store_usd_per_month",
        ):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")
        if self.lease_ttl_s <= 0:
            raise ValueError(f"lease_ttl_s must be > 0, got {self.lease_ttl_s}")
        if not 0 <= self.cache_hit_rate <= 1:
            raise ValueError(
                f"the cache hit rate must be in [0, 1], got {self.cache_hit_rate}"
            )

    @property
    def llm_usd_per_request(self) -> float:
        """LLM spend of one request that never fails."""
        return sum(s.cost_usd for s in self.steps)


@dataclass(frozen=True, slots=True, kw_only=True)
class Estimate:
    """The model's figures at one request rate."""

    requests_per_day: int
    bytes_per_request: float
    storage_bytes_per_day: float
    storage_bytes_steady: float
    writes_per_request: float
    write_ops_per_s: float
    added_latency_per_step_ms: float
    added_latency_per_request_ms: float
    store_usd_per_day: float
    llm_usd_per_day_restarted: float
    """LLM spend a day when every failure restarts the request from step 1."""
    llm_usd_per_day_resumed: float
    """LLM spend a day when every failure resumes at the failed step."""

    @property
    def avoided_usd_per_day(self) -> float:
        """LLM spend resuming avoids, against restarting."""
        return self.llm_usd_per_day_restarted - self.llm_usd_per_day_resumed

    @property
    def net_usd_per_day(self) -> float:
        """Avoided LLM spend minus what the store costs."""
        return self.avoided_usd_per_day - self.store_usd_per_day

    @property
    def roi(self) -> float | None:
        """Net saving per dollar of store; None when the store costs nothing."""
        if self.store_usd_per_day == 0:
            return None
        return self.net_usd_per_day / self.store_usd_per_day


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakEven:
    """Where the overhead stops paying for itself (None: it always or never does)."""

    llm_usd_per_request: float | None
    """Below this LLM spend per request, the store costs more than resuming saves."""
    step_seconds: float | None
    """Steps shorter than this make a request slower on average with the journal."""


def expected_attempts_resumed(costs: Sequence[float], failure_rate: float) -> float:
    """Expected sum of `costs` paid when a failed step is retried alone."""
    return sum(costs) / (1 - failure_rate)


def expected_attempts_restarted(costs: Sequence[float], failure_rate: float) -> float:
    """Expected sum of `costs` paid when a failure restarts from the first step."""
    success = 1 - failure_rate
    one_try = sum(cost * success**i for i, cost in enumerate(costs))
    return one_try / success ** len(costs)


def _writes_per_request(inputs: Inputs) -> float:
    steps = len(inputs.steps)
    overhead = inputs.overhead
    interruptions = steps * inputs.failure_rate / (1 - inputs.failure_rate)
    renewals = steps * inputs.step_seconds / (inputs.lease_ttl_s / 3)
    return (
        steps
        + overhead.writes_per_run
        + interruptions * overhead.writes_per_resume
        + math.floor(renewals)
    )


def _bytes_per_request(inputs: Inputs) -> float:
    overhead = inputs.overhead
    return overhead.bytes_per_run + sum(
        overhead.bytes_per_step + s.payload_bytes for s in inputs.steps
    )


def estimate(inputs: Inputs, requests_per_day: int) -> Estimate:
    """The figures at `requests_per_day` (see the module docstring for formulas)."""
    if requests_per_day < 0:
        raise ValueError(f"requests per day must be >= 0, got {requests_per_day}")
    costs = [s.cost_usd for s in inputs.steps]
    per_request = _bytes_per_request(inputs)
    per_day = per_request * requests_per_day
    steady = per_day * inputs.retention_days
    writes = _writes_per_request(inputs)
    store_usd = (
        steady / 1e9 * inputs.usd_per_gb_month / DAYS_PER_MONTH
        + writes * requests_per_day * inputs.usd_per_million_writes / 1e6
        + inputs.store_usd_per_month / DAYS_PER_MONTH
    )
    step_ms = inputs.overhead.us_per_step / 1000
    return Estimate(
        requests_per_day=requests_per_day,
        bytes_per_request=per_request,
        storage_bytes_per_day=per_day,
        storage_bytes_steady=steady,
        writes_per_request=writes,
        write_ops_per_s=writes * requests_per_day / SECONDS_PER_DAY,
        added_latency_per_step_ms=step_ms,
        added_latency_per_request_ms=step_ms * len(inputs.steps),
        store_usd_per_day=store_usd,
        llm_usd_per_day_restarted=requests_per_day
        * expected_attempts_restarted(costs, inputs.failure_rate),
        llm_usd_per_day_resumed=requests_per_day
        * expected_attempts_resumed(costs, inputs.failure_rate)
        * (1 - inputs.cache_hit_rate),
    )


def break_even(inputs: Inputs, requests_per_day: int) -> BreakEven:
    """The LLM spend per request and the step time below which resuming does not pay."""
    at = estimate(inputs, requests_per_day)
    spend: float | None = None
    if at.avoided_usd_per_day > 0:
        spend = (
            inputs.llm_usd_per_request * at.store_usd_per_day / at.avoided_usd_per_day
        )
    elif at.store_usd_per_day == 0:
        spend = 0.0  # a free store pays for itself at any spend
    unit = [1.0] * len(inputs.steps)
    saved_steps = expected_attempts_restarted(
        unit, inputs.failure_rate
    ) - expected_attempts_resumed(unit, inputs.failure_rate)
    seconds: float | None = None
    if saved_steps > 0:
        seconds = len(inputs.steps) * inputs.overhead.us_per_step / 1e6 / saved_steps
    return BreakEven(llm_usd_per_request=spend, step_seconds=seconds)


def step_cost(
    prices: PriceTable,
    *,
    model: str,
    input_tokens: int,
    output_tokens: int,
    payload_bytes: int | None = None,
) -> StepCost:
    """A step priced from the price table; its payload defaults to its output text.

    Raises:
        ValueError: the table has no price for `model`, or a count is negative.
    """
    if input_tokens < 0 or output_tokens < 0:
        raise ValueError("token counts must be >= 0")
    price = prices.price(model)
    if price is None:
        known = ", ".join(sorted(prices.prices))
        raise ValueError(
            f"no price for model {model!r}; add it to the PriceTable, or use one of "
            f"{known}"
        )
    cost = (
        input_tokens * price.input_per_mtok + output_tokens * price.output_per_mtok
    ) / 1e6
    return StepCost(
        cost_usd=cost,
        payload_bytes=output_tokens * BYTES_PER_TOKEN
        if payload_bytes is None
        else payload_bytes,
        label=f"{model} {input_tokens}in/{output_tokens}out",
    )


def load_overheads(text: str | None = None) -> dict[str, Overhead]:
    """The measured overheads by store kind: `text` (JSON), or the shipped data file.

    The file is `resumable/data/overhead.json`, rewritten by `make bench`.
    """
    if text is None:
        text = (
            resources.files("resumable")
            .joinpath("data", "overhead.json")
            .read_text(encoding="utf-8")
        )
    raw: Mapping[str, Any] = json.loads(text)
    return {
        kind: Overhead(
            us_per_step=float(entry["us_per_step"]),
            bytes_per_step=float(entry["bytes_per_step"]),
            bytes_per_run=float(entry["bytes_per_run"]),
            writes_per_run=int(entry["writes_per_run"]),
            writes_per_resume=int(entry["writes_per_resume"]),
            source=str(entry["source"]),
        )
        for kind, entry in raw.items()
        if isinstance(entry, Mapping)
    }
