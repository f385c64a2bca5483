"""SDK metering on vs off: a step with no LLM call, and a simulated LLM step.

Two workloads, each run as sequential steps of one run on the memory store (no
disk, so the engine's own work is as large a share as it can be):

- no llm: a step that returns a short string and calls nothing;
- llm: a step that asks the simulated provider (`resumable.simulator`, a real
  HTTP server on 127.0.0.1 in this process, no added latency) through the real
  `openai` SDK's async client and returns `.choices[0].message.content`.

Modes:

- off: `Engine(metering=False)` with the SDK's own methods restored
  (`metering.uninstall()`): as if metering did not exist. The LLM step records
  nothing, as a text-returning step did before the meter.
- recorded (llm only): off, and the step records its call's usage by hand with
  `current_run().record_usage(...)`, as a user without the meter would: the
  same usage stored in the step record as the meter stores (but for the
  response id, which `record_usage` does not take).
- on: the default; the SDK's client and stream classes wrapped, every call
  metered into the attempt.

So for the LLM step, on/off is what metering costs in all (catching the call,
reading its usage, storing it), on/recorded what the meter costs beyond
storing the same usage, and recorded/off what storing a call's usage costs.

RUNS rounds; each runs every (workload, mode) once, in one order and then in
the reverse one, so drift of the shared machine hits every mode alike and each
has the same neighbours; a sample is a short run (LLM_STEPS steps), so that a
round is over before the machine's load changes much. Each ratio is the median over the
rounds of that round's ratio against the baseline of the same round. Wall time
counts the simulator's threads (which share the GIL) and waiting for a CPU on
a busy machine; CPU time is this thread's (`time.thread_time`): the engine's
and the SDK client's work, what a step costs the user's process, without the
simulator, which stands in for the provider's machine.

Timings swing on a shared machine, so it also counts bytecodes per step
(sys.settrace, exact and repeatable: `_common.Counter`) in every mode: the
difference of a run of 1 + N steps and a run of 1 step, over N. Settrace sees
this thread only: the simulator's threads are not counted, only the client's
and the engine's work.

Checks each run's ledger: the "on" and "recorded" runs hold every call, with
the same tokens, and the "off" ones none.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import openai
from _common import Counter

from resumable import Engine, current_run, step, workflow
from resumable._engine import metering
from resumable.simulator import SimulatedProvider

STEPS = int(os.environ.get("STEPS", "200"))
LLM_STEPS = int(os.environ.get("LLM_STEPS", "20"))
RUNS = int(os.environ.get("RUNS", "60"))
COUNTED = 100  # steps per counted run (a tenth of it for LLM steps)

CLIENT: list[openai.AsyncOpenAI] = []


async def _ask(i: int) -> Any:
    return await CLIENT[0].chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": f"summarize item {i % 10}"}],
    )


@step
async def plain(i: int) -> str:
    return f"item {i}"


@step
async def ask(i: int) -> str:
    r = await _ask(i)
    return str(r.choices[0].message.content)


@step
async def ask_and_record(i: int) -> str:
    r = await _ask(i)
    details = r.usage.prompt_tokens_details
    cached = (details.cached_tokens or 0) if details is not None else 0
    current_run().record_usage(
        model=r.model,
        provider="openai",
        input_tokens=r.usage.prompt_tokens - cached,
        cached_input_tokens=cached,
        output_tokens=r.usage.completion_tokens,
    )
    return str(r.choices[0].message.content)


@workflow(name="bench.metering.plain")
async def plain_run(n: int) -> int:
    return sum([len(await plain(i)) for i in range(n)])


@workflow(name="bench.metering.llm")
async def llm_run(n: int) -> int:
    return sum([len(await ask(i)) for i in range(n)])


@workflow(name="bench.metering.llm_recorded")
async def llm_recorded_run(n: int) -> int:
    return sum([len(await ask_and_record(i)) for i in range(n)])


Case = tuple[str, str]
"""(workload, mode)."""
CASES: dict[Case, tuple[Callable[..., Any], int]] = {
    ("no llm", "off"): (plain_run, STEPS),
    ("no llm", "on"): (plain_run, STEPS),
    ("llm", "off"): (llm_run, LLM_STEPS),
    ("llm", "recorded"): (llm_recorded_run, LLM_STEPS),
    ("llm", "on"): (llm_run, LLM_STEPS),
}
RATIOS: list[tuple[str, str, str, str]] = [
    ("no llm", "on", "off", "metering's cost to a step without a call"),
    ("llm", "on", "off", "metering's whole cost: catch, read, store usage"),
    ("llm", "on", "recorded", "the meter beyond storing the same usage"),
    ("llm", "recorded", "off", "storing one call's usage (by hand)"),
]


def switch(mode: str) -> Engine:
    """A fresh engine in the mode; off and recorded restore the SDK's own methods."""
    on = mode == "on"
    if on:
        metering.install()
    else:
        metering.uninstall()
    return Engine("memory://", metering=on)


async def per_step(case: Case, run_id: str) -> tuple[float, float, tuple[int, int]]:
    """µs of wall and of CPU time per step, and the run's (calls, tokens)."""
    wf, n = CASES[case]
    async with switch(case[1]) as engine:
        wall, cpu = time.perf_counter(), time.thread_time()
        await engine.run(wf, n, run_id=run_id)
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        incurred = (await engine.ledger(run_id)).incurred
    return wall / n * 1e6, cpu / n * 1e6, (incurred.calls, incurred.total_tokens)


async def bytecodes_per_step(case: Case) -> float:
    """Bytecodes of `steps` more steps than one, per step (exact, repeatable)."""
    wf, _ = CASES[case]
    steps = COUNTED if case[0] == "no llm" else COUNTED // 10
    counts = []
    for n in (1, 1 + steps):
        async with switch(case[1]) as engine:
            counter = Counter()
            sys.settrace(counter.on_call)
            try:
                await engine.run(wf, n, run_id=f"count-{case}-{n}")
            finally:
                sys.settrace(None)
            counts.append(counter.bytecodes)
    return (counts[1] - counts[0]) / steps


def check_ledgers(ledgers: dict[Case, tuple[int, int]]) -> None:
    """The meter and the hand-recorded step store the same calls; off stores none."""
    llm_steps = CASES["llm", "on"][1]
    assert ledgers["llm", "off"] == (0, 0), ledgers
    assert ledgers["llm", "on"][0] == llm_steps, ledgers
    assert ledgers["llm", "on"] == ledgers["llm", "recorded"], ledgers


async def main() -> None:
    with SimulatedProvider() as provider:
        CLIENT.append(
            openai.AsyncOpenAI(
                base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
            )
        )
        ledgers = {}
        for case in CASES:  # warm up: imports, connections
            ledgers[case] = (await per_step(case, f"warm-{case}"))[2]
        check_ledgers(ledgers)
        wall: dict[Case, list[float]] = {case: [] for case in CASES}
        cpu: dict[Case, list[float]] = {case: [] for case in CASES}
        cases = list(CASES)
        for round_ in range(RUNS):
            for case in cases if round_ % 2 == 0 else cases[::-1]:
                us_wall, us_cpu, _ = await per_step(case, f"{case}-{round_}")
                wall[case].append(us_wall)
                cpu[case].append(us_cpu)
        counted = {case: await bytecodes_per_step(case) for case in CASES}
        await CLIENT[0].close()
    print(f"{RUNS} interleaved rounds; per step: medians of µs, exact bytecodes")
    print(f"{'workload':<9}{'mode':<10}{'wall µs':>10}{'CPU µs':>10}{'bytecodes':>11}")
    for case in CASES:
        print(
            f"{case[0]:<9}{case[1]:<10}{statistics.median(wall[case]):>10.1f}"
            f"{statistics.median(cpu[case]):>10.1f}{counted[case]:>11.0f}"
        )
    print("\nratios: medians of per-round ratios (wall, CPU); bytecodes exact")
    for workload, mode, base, meaning in RATIOS:
        a, b = (workload, mode), (workload, base)
        ratios = [
            statistics.median(x / y for x, y in zip(s[a], s[b], strict=True))
            for s in (wall, cpu)
        ]
        extra = counted[a] - counted[b]
        print(
            f"{workload:<7}{mode + '/' + base:<14}wall {ratios[0]:.3f}  CPU {ratios[1]:.3f}"
            f"  bytecodes {counted[a] / counted[b]:.4f} ({extra:+.0f})  {meaning}"
        )


if __name__ == "__main__":
    asyncio.run(main())
