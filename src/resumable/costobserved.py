"""The cost model's inputs measured on real runs, through the public Engine API.

`observe(engine)` reads finished runs (`engine.runs`), their journals
(`engine.history`) and their ledgers (`engine.ledger`) and reduces them with the
pure `summarize`:

- steps per run: journal steps the run executed itself (not shared by a fork,
  not child runs' own steps);
- interruptions: executions of the run beyond its first (`len(ledger.executions)
  - 1`), plus one for a run that ended `failed` (it will be run again);
- failure rate per step attempt: interruptions / (steps + interruptions), since
  each interruption re-ran about one step;
- cost and tokens per step attempt: the ledger's incurred totals over the same
  attempts; payload: the mean stored bytes of a step's result; step seconds: the
  mean recorded step duration.

An execution that resumed after `wait_for` or `sleep` counts as an interruption
too (the ledger cannot tell them apart); give `--failure-rate` when your runs wait.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from resumable._engine.engine import Engine
from resumable.errors import UsageError

__all__ = ["Observed", "RunSample", "observe", "summarize"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSample:
    """One finished run, as the cost model sees it."""

    steps: int
    interruptions: int
    cost_usd: float
    input_tokens: int
    output_tokens: int
    payload_bytes: int
    step_ms: int
    unpriced_calls: int = 0
    """Calls to models with no price: their dollars are not in `cost_usd`."""
    unpriced_models: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Observed:
    """Means over the runs read: the cost model's inputs."""

    runs: int
    steps_per_run: float
    failure_rate: float
    cost_usd_per_step: float
    input_tokens_per_step: float
    output_tokens_per_step: float
    payload_bytes_per_step: float
    step_seconds: float
    unpriced_calls: int = 0
    """Calls to models with no price, over every run read (then the cost is short)."""
    unpriced_models: tuple[str, ...] = ()


def summarize(samples: Sequence[RunSample]) -> Observed:
    """Reduce run samples to the model's inputs (see the module docstring)."""
    steps = sum(s.steps for s in samples)
    if not samples or steps == 0:
        raise UsageError(
            "no finished run with steps to learn from: run some workflows first, or "
            "pick another --workflow"
        )
    interruptions = sum(s.interruptions for s in samples)
    attempts = steps + interruptions
    return Observed(
        runs=len(samples),
        steps_per_run=steps / len(samples),
        failure_rate=interruptions / attempts,
        cost_usd_per_step=sum(s.cost_usd for s in samples) / attempts,
        input_tokens_per_step=sum(s.input_tokens for s in samples) / attempts,
        output_tokens_per_step=sum(s.output_tokens for s in samples) / attempts,
        payload_bytes_per_step=sum(s.payload_bytes for s in samples) / steps,
        step_seconds=sum(s.step_ms for s in samples) / steps / 1000,
        unpriced_calls=sum(s.unpriced_calls for s in samples),
        unpriced_models=tuple(sorted({m for s in samples for m in s.unpriced_models})),
    )


async def observe(
    engine: Engine, *, workflow: str | None = None, limit: int = 1000
) -> Observed:
    """Measure the model's inputs on the newest `limit` finished runs of `engine`."""
    samples = []
    for run in await engine.runs(
        status=["succeeded", "failed"], workflow=workflow, limit=limit
    ):
        own = [
            s
            for s in await engine.history(run.run_id)
            if s.inherited_from is None and not s.name.startswith("child:")
        ]
        ledger = await engine.ledger(run.run_id)
        incurred = ledger.incurred
        samples.append(
            RunSample(
                steps=len(own),
                interruptions=max(len(ledger.executions) - 1, 0)
                + (1 if run.status == "failed" else 0),
                cost_usd=incurred.cost_usd,
                input_tokens=incurred.input_tokens
                + incurred.cached_input_tokens
                + incurred.cache_write_tokens,
                output_tokens=incurred.output_tokens,
                payload_bytes=sum(s.output_bytes for s in own),
                step_ms=sum(s.duration_ms for s in own),
                unpriced_calls=incurred.unpriced_calls,
                unpriced_models=ledger.unpriced_models,
            )
        )
    return summarize(samples)
