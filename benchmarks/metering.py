"""SDK metering on vs off: a step with no LLM call, and a simulated LLM step.

Two workloads, each run as sequential steps of one run on the memory store (no
disk, so the engine's own work is as large a share as it can be):

- no llm: a step that returns a short string and calls nothing;
- llm: a step that asks the simulated provider (`resumable.simulator`, a real
  HTTP server on 127.0.0.1, no added latency) through the real `openai` SDK's
  async client and returns `.choices[0].message.content`, the text only.

Each in two modes: off (`Engine(metering=False)` with the SDK's own methods
restored, `metering.uninstall()`: as if metering did not exist) and on (the
default: the SDK's client and stream classes wrapped, every call metered into
the attempt). RUNS rounds, each running every (workload, mode) once, the order
of the modes alternating from round to round; prints µs per step (medians) and
the median of the per-round on/off ratios.

Timings on a shared machine swing by more than these differences, so it also
counts bytecodes per step (sys.settrace, exact and repeatable) for both
workloads: what metering adds to a step that makes no call is the check at the
attempt's start; to an LLM step, reading the response's usage.
Checks that the "on" LLM run's ledger holds every call and the "off" one none.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import openai
from _common import Counter

from resumable import Engine, step, workflow
from resumable._engine import metering
from resumable.simulator import SimulatedProvider

STEPS = int(os.environ.get("STEPS", "300"))
LLM_STEPS = int(os.environ.get("LLM_STEPS", "100"))
RUNS = int(os.environ.get("RUNS", "7"))
COUNTED = 100  # steps per counted run

CLIENT: list[openai.AsyncOpenAI] = []


@step
async def plain(i: int) -> str:
    return f"item {i}"


@step
async def ask(i: int) -> str:
    r = await CLIENT[0].chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": f"summarize item {i % 10}"}],
    )
    return str(r.choices[0].message.content)


@workflow(name="bench.metering.plain")
async def plain_run(n: int) -> int:
    return sum([len(await plain(i)) for i in range(n)])


@workflow(name="bench.metering.llm")
async def llm_run(n: int) -> int:
    return sum([len(await ask(i)) for i in range(n)])


def switch(on: bool) -> Engine:
    """A fresh engine in the mode; off also restores the SDK's own methods."""
    if on:
        metering.install()
    else:
        metering.uninstall()
    return Engine("memory://", metering=on)


async def us_per_step(on: bool, wf: object, n: int, run_id: str) -> float:
    async with switch(on) as engine:
        start = time.perf_counter()
        await engine.run(wf, n, run_id=run_id)  # type: ignore[call-overload]
        elapsed = time.perf_counter() - start
        calls = (await engine.ledger(run_id)).incurred.calls
    if wf is llm_run:
        assert calls == (n if on else 0), (on, calls)
    return elapsed / n * 1e6


async def bytecodes_per_step(on: bool, wf: object, steps: int) -> float:
    """Bytecodes of `steps` more steps than one, per step (exact, repeatable)."""
    counts = []
    for n in (1, 1 + steps):
        async with switch(on) as engine:
            counter = Counter()
            sys.settrace(counter.on_call)
            try:
                await engine.run(wf, n, run_id=f"count-{on}-{n}")  # type: ignore[call-overload]
            finally:
                sys.settrace(None)
            counts.append(counter.bytecodes)
    return (counts[1] - counts[0]) / steps


async def main() -> None:
    with SimulatedProvider() as provider:
        CLIENT.append(
            openai.AsyncOpenAI(
                base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
            )
        )
        workloads = {"no llm": (plain_run, STEPS), "llm": (llm_run, LLM_STEPS)}
        samples: dict[tuple[str, bool], list[float]] = {
            (name, on): [] for name in workloads for on in (False, True)
        }
        for name, (wf, n) in workloads.items():  # warm up: imports, connections
            for on in (False, True):
                await us_per_step(on, wf, n, f"warm-{name}-{on}")
        for round_ in range(RUNS):
            for name, (wf, n) in workloads.items():
                order = (False, True) if round_ % 2 == 0 else (True, False)
                for on in order:
                    samples[name, on].append(
                        await us_per_step(on, wf, n, f"{name}-{on}-{round_}")
                    )
        counted = {
            name: [await bytecodes_per_step(on, wf, steps) for on in (False, True)]
            for name, wf, steps in (
                ("no llm", plain_run, COUNTED),
                ("llm", llm_run, COUNTED // 10),
            )
        }
        await CLIENT[0].close()
    print(f"{RUNS} interleaved rounds; µs per step, medians")
    print(f"{'workload':<10}{'off':>10}{'on':>10}{'on/off':>10}")
    for name in workloads:
        offs, ons = samples[name, False], samples[name, True]
        ratio = statistics.median(b / a for a, b in zip(offs, ons, strict=True))
        print(
            f"{name:<10}{statistics.median(offs):>10.1f}"
            f"{statistics.median(ons):>10.1f}{ratio:>10.3f}"
        )
    print("\nbytecodes per step (exact)")
    for name, (off_count, on_count) in counted.items():
        print(
            f"{name:<10}off {off_count:.0f}, on {on_count:.0f} "
            f"(+{on_count - off_count:.0f}, {on_count / off_count - 1:+.2%})"
        )


if __name__ == "__main__":
    asyncio.run(main())
