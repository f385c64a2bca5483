"""Step overhead with tracing and metrics on vs off, on SQLite (synchronous FULL).

Runs STEPS sequential ~1 KB steps per run, RUNS rounds, each round running every
engine once in turn so all see the same machine state:

- off: an Engine without observers (the default: no observability work);
- off again: a second plain engine on its own file, whose ratio to `off` is the
  noise of the comparison itself (two identical engines);
- simple: `Tracing()` on an OpenTelemetry SDK provider with a SimpleSpanProcessor
  exporting to nowhere, plus `Metrics()`;
- batch: the same with a BatchSpanProcessor, what production setups use;
- no sdk: `Tracing()` on the API's no-op provider, plus `Metrics()`: every hook
  of ours runs (span context attached, attributes built, metrics counted) but
  the SDK records nothing, so this is resumable's own share of the cost.

Prints µs per step (medians) and the median of the per-round ratios to `off`.
Then the floor: what the SDK alone costs for one span per step, measured
without any engine, as a fraction of the plain step: bare (start with the
step's attributes, make current, end) and as a step's span must be (also a
child of the run's span, with the commit's attributes set before its end).

Timings on a shared machine swing more than these differences, so it ends by
counting: bytecodes per step (sys.settrace, exact and repeatable) on the memory
store for off, no sdk and simple, and for the SDK's span as a step alone, so
the SDK's share of the added work and resumable's own are numbers, not noise.
Checks that the plain engine holds no observer and imported neither
OpenTelemetry nor prometheus-client.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _common import Counter

from resumable import Engine, step, workflow

STEPS = int(os.environ.get("STEPS", "500"))
RUNS = int(os.environ.get("RUNS", "7"))
PAYLOAD = "x" * 1000
SPANS = 20_000  # spans per floor measurement
COUNTED = 200  # steps per counted run


@step
async def produce(i: int) -> str:
    return PAYLOAD + str(i)


@workflow(name="bench.observed")
async def sequence(n: int) -> int:
    return sum([len(await produce(i)) for i in range(n)])


async def us_per_step(engine: Engine, run_id: str) -> float:
    start = time.perf_counter()
    await engine.run(sequence, STEPS, run_id=run_id)
    return (time.perf_counter() - start) / STEPS * 1e6


def provider_with(processor: str) -> Any:
    """An SDK TracerProvider whose spans go nowhere, through `processor`."""
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SimpleSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class Nowhere(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    if processor == "no sdk":
        from opentelemetry.trace import NoOpTracerProvider

        return NoOpTracerProvider()
    provider = TracerProvider()
    kind = BatchSpanProcessor if processor == "batch" else SimpleSpanProcessor
    provider.add_span_processor(kind(Nowhere()))
    return provider


def observed_engine(url: str, provider: Any) -> Engine:
    from resumable.observability import Metrics, Tracing

    return Engine(url, observers=[Tracing(provider), Metrics()])


def make_spans(provider: Any, n: int, *, as_a_step: bool) -> None:
    """`n` spans as the SDK alone makes them for steps, no engine.

    Bare: a root span with the step's start attributes, made current, ended. As a
    step: what issue 25 asks of a step's span, no more: a child of the run's span,
    and the commit's two attributes set (in one call) before it ends.
    """
    from opentelemetry import context, trace

    tracer = provider.get_tracer("floor")
    attributes = {
        "resumable.seq": 1,
        "resumable.step": "produce",
        "resumable.attempt": 1,
        "resumable.idempotency_key": "run:1",
    }
    written = {
        "resumable.checkpoint.bytes": 1020,
        "resumable.checkpoint.duration_ms": 0.25,
    }
    run_span = tracer.start_span("resumable.run bench")
    outer = context.attach(trace.set_span_in_context(run_span)) if as_a_step else None
    for _ in range(n):
        span = tracer.start_span("resumable.step produce", attributes=attributes)
        token = context.attach(trace.set_span_in_context(span))
        if as_a_step:
            span.set_attributes(written)
        context.detach(token)
        span.end()
    if outer is not None:
        context.detach(outer)
    run_span.end()


def sdk_span_us(provider: Any, *, as_a_step: bool) -> float:
    """µs per span of `make_spans` (median of 5 rounds)."""
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        make_spans(provider, SPANS, as_a_step=as_a_step)
        rounds.append((time.perf_counter() - start) / SPANS * 1e6)
    return statistics.median(rounds)


async def bytecodes_per_step(run: Callable[[int], Awaitable[object]]) -> float:
    """Bytecodes one more step costs: counted runs of 2N and N steps, differenced."""
    counts = []
    for n in (COUNTED, 2 * COUNTED):
        counter = Counter()
        sys.settrace(counter.on_call)
        try:
            await run(n)
        finally:
            sys.settrace(None)
        counts.append(counter.bytecodes)
    return (counts[1] - counts[0]) / COUNTED


async def counted() -> None:
    """Bytecodes per step on the memory store: exact, whatever the machine does."""
    per_step: dict[str, float] = {}
    for name in ("off", "no sdk", "simple"):
        engine = (
            Engine("memory://")
            if name == "off"
            else observed_engine("memory://", provider_with(name))
        )
        await engine.run(sequence, 3, run_id="warm-up")

        async def run(n: int, engine: Engine = engine) -> object:
            return await engine.run(sequence, n, run_id=f"counted-{n}")

        per_step[name] = await bytecodes_per_step(run)
        await engine.close()
        print(
            f"counted      {name:<10} {per_step[name]:8.0f} bytecodes/step   "
            f"added {per_step[name] - per_step['off']:6.0f}"
        )
    provider = provider_with("simple")

    async def spans(n: int) -> None:
        make_spans(provider, n, as_a_step=True)

    floor = await bytecodes_per_step(spans)
    provider.shutdown()
    added = per_step["simple"] - per_step["off"]
    print(
        f"counted      floor: a step's span, SDK alone: {floor:.0f} bytecodes = "
        f"{floor / added:.0%} of what simple adds; resumable's own: {added - floor:.0f}"
    )


async def compare(kind: str, url_of: Callable[[str], str]) -> float:
    """Print each engine's median and median ratio to `off`; return off's median."""
    providers = {name: provider_with(name) for name in ("simple", "batch", "no sdk")}
    engines = {
        "off": Engine(url_of("off")),
        "off again": Engine(url_of("again")),
        **{
            name: observed_engine(url_of(name), provider)
            for name, provider in providers.items()
        },
    }
    assert engines["off"]._runtime.observer is None
    for engine in engines.values():
        await us_per_step(engine, "warm-up")
    times: dict[str, list[float]] = {name: [] for name in engines}
    for run in range(RUNS):
        for name, engine in engines.items():
            times[name].append(await us_per_step(engine, f"run-{run}"))
    for engine in engines.values():
        await engine.close()
    for name in ("simple", "batch"):
        providers[name].shutdown()
    off = times["off"]
    for name, measured in times.items():
        ratios = [b / a for a, b in zip(off, measured, strict=True)]
        print(
            f"{kind:<12} {name:<10} {statistics.median(measured):8.1f} us/step   "
            f"added {statistics.median(measured) - statistics.median(off):7.1f} us   "
            f"median ratio {statistics.median(ratios):.3f}"
        )
    return statistics.median(off)


async def main() -> None:
    loaded = [m for m in sys.modules if m.startswith(("opentelemetry", "prometheus"))]
    assert not loaded, f"imported without observers: {loaded}"
    print(f"{STEPS} sequential steps per run, {RUNS} rounds (engines interleaved)")
    print("simple/batch: Tracing (SDK span processor, exporter to nowhere) + Metrics")
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_off = await compare(
            "sqlite full",
            lambda name: (
                f"sqlite:///{Path(tmp) / name.replace(' ', '-')}.db?durability=full"
            ),
        )
    # the memory store, where nothing hides the observers' CPU cost
    memory_off = await compare("memory", lambda name: "memory://")
    for processor in ("simple", "batch"):
        provider = provider_with(processor)
        for as_a_step in (False, True):
            span_us = sdk_span_us(provider, as_a_step=as_a_step)
            print(
                f"floor ({processor}, {'as a step' if as_a_step else 'bare'}): "
                f"one SDK span per step, no engine: {span_us:.1f} us = ratio "
                f"{(memory_off + span_us) / memory_off:.2f} on memory, "
                f"{(sqlite_off + span_us) / sqlite_off:.3f} on sqlite full"
            )
        provider.shutdown()
    await counted()


if __name__ == "__main__":
    asyncio.run(main())
