"""Step overhead with tracing and metrics on vs off, on SQLite (synchronous FULL).

Runs STEPS sequential ~1 KB steps per run, RUNS times each way, interleaved so
both see the same machine state: an Engine without observers (the default: no
observability work), and one with `Tracing()` on an OpenTelemetry SDK provider
whose span processor exports to nowhere plus `Metrics()`. Prints µs per step
(medians) and their ratio, and checks that the plain engine holds no observer and
has imported neither OpenTelemetry nor prometheus-client.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from resumable import Engine, step, workflow

STEPS = int(os.environ.get("STEPS", "500"))
RUNS = int(os.environ.get("RUNS", "7"))
PAYLOAD = "x" * 1000


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


def observed_engine(url: str) -> Engine:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        SimpleSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    from resumable.observability import Metrics, Tracing

    class Nowhere(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Nowhere()))
    return Engine(url, observers=[Tracing(provider), Metrics()])


async def compare(kind: str, url_of: Callable[[str], str]) -> None:
    """Print the medians off and on, and the median ratio, for one store kind."""
    plain = Engine(url_of("plain"))
    assert plain._runtime.observer is None
    observed = observed_engine(url_of("observed"))
    await us_per_step(plain, "warm-up")
    await us_per_step(observed, "warm-up")
    off, on = [], []
    for run in range(RUNS):
        off.append(await us_per_step(plain, f"run-{run}"))
        on.append(await us_per_step(observed, f"run-{run}"))
    await plain.close()
    await observed.close()
    ratios = [b / a for a, b in zip(off, on, strict=True)]
    print(
        f"{kind:<12} off {statistics.median(off):8.1f} us/step   "
        f"on {statistics.median(on):8.1f} us/step   "
        f"added {statistics.median(on) - statistics.median(off):6.1f} us   "
        f"median ratio {statistics.median(ratios):.3f}"
    )


async def main() -> None:
    loaded = [m for m in sys.modules if m.startswith(("opentelemetry", "prometheus"))]
    assert not loaded, f"imported without observers: {loaded}"
    print(f"{STEPS} sequential steps per run, {RUNS} runs each way (interleaved)")
    print("off: no observers; on: Tracing (SDK, exporter to nowhere) + Metrics")
    with tempfile.TemporaryDirectory() as tmp:
        await compare(
            "sqlite full",
            lambda name: f"sqlite:///{Path(tmp) / name}.db?durability=full",
        )
    # the same on the memory store, where nothing hides the observers' CPU cost
    await compare("memory", lambda name: "memory://")


if __name__ == "__main__":
    asyncio.run(main())
