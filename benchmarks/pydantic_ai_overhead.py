"""Pydantic AI: what ResumableAgent adds per model call, against the plain agent.

One agent (one tool), asked a question that makes two model requests and one
tool call, run three ways in the same process against the simulated provider
(`resumable.simulator`, a real HTTP server on 127.0.0.1, through the real
`openai` SDK):

- plain: `agent.run(question)`, no durability;
- resumable: `ResumableAgent(agent).run(question)` inside a `@workflow` run on a
  SQLite store (a file, durability=full as the default): three steps committed;
- res-memory: the same on the memory store: the engine's and the integration's
  work without the disk (resumable minus res-memory is what the commits' fsyncs
  cost on this machine's disk);
- dbos: the agent with Pydantic AI's `DBOSDurability` capability inside a
  `@DBOS.workflow` on a SQLite system database, if `dbos` is installed.

ROUNDS rounds; each runs every mode RUNS_PER_ROUND times, in one order and then
in the reverse, so drift of the shared machine hits every mode alike. The
figure per mode is the median over rounds of its mean time per model call; the
overhead is that minus the plain agent's, and the ratio is against the plain
agent measured in the same rounds. The overhead per model call includes the
tool step's commit (one tool call per two model calls here).

Two simulated latencies: 0 ms (the overhead alone, as large a share as it can
be) and 100 ms per call (a fast real model).

    python benchmarks/pydantic_ai_overhead.py [--rounds 5] [--runs 10]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import openai
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from resumable import Engine, workflow
from resumable.integrations.pydantic_ai import ResumableAgent
from resumable.simulator import SimulatedProvider

QUESTION = "What is the weather?"
INSTRUCTIONS = "Call get_weather, then answer."
MODEL_CALLS = 2  # per run: the tool call, then the answer


def get_weather(city: str) -> str:
    """The weather in a city."""
    return "sunny"


def build_agent(client: openai.AsyncOpenAI, **options: Any) -> Agent[None, str]:
    model = OpenAIChatModel(
        "gpt-4o-mini", provider=OpenAIProvider(openai_client=client)
    )
    return Agent(
        model, name="bench", instructions=INSTRUCTIONS, tools=[get_weather], **options
    )


async def modes(
    client: openai.AsyncOpenAI, tmp: Path
) -> dict[str, Callable[[], Awaitable[Any]]]:
    """Each mode's one run of the agent."""
    plain = build_agent(client)
    durable = ResumableAgent(build_agent(client))

    @workflow(name="bench.pydantic_ai")
    async def ask(question: str) -> str:
        return (await durable.run(question)).output

    engine = Engine(f"sqlite:///{tmp / 'resumable.db'}")
    in_memory = Engine("memory://")

    async def plain_run() -> Any:
        return (await plain.run(QUESTION)).output

    async def resumable_run() -> Any:
        return await engine.run(ask, QUESTION, run_id=uuid.uuid4().hex)

    async def memory_run() -> Any:
        return await in_memory.run(ask, QUESTION, run_id=uuid.uuid4().hex)

    found: dict[str, Callable[[], Awaitable[Any]]] = {
        "plain": plain_run,
        "resumable": resumable_run,
        "res-memory": memory_run,
    }
    dbos_run = dbos_mode(client, tmp)
    if dbos_run is not None:
        found["dbos"] = dbos_run
    return found


def dbos_mode(
    client: openai.AsyncOpenAI, tmp: Path
) -> Callable[[], Awaitable[Any]] | None:
    """DBOS's integration on SQLite, or None (and why) when it cannot run here."""
    try:  # imported by name: dbos is not a dependency, nor typed for mypy here
        dbos: Any = importlib.import_module("dbos")
        durable: Any = importlib.import_module("pydantic_ai.durable_exec.dbos")
    except ImportError as exc:
        print(f"dbos: not measured ({exc}); pip install dbos to compare")
        return None
    DBOS = dbos.DBOS  # noqa: N806 - its name
    agent = build_agent(client, capabilities=[durable.DBOSDurability()])

    async def asked(question: str) -> str:
        return (await agent.run(question)).output

    ask = DBOS.workflow(name="bench_dbos_ask")(asked)

    DBOS(
        config={
            "name": "bench",
            "system_database_url": f"sqlite:///{tmp / 'dbos.sqlite'}",
        }
    )
    DBOS.launch()

    async def run() -> Any:
        return await ask(QUESTION)

    return run


async def measure(latency_s: float, *, rounds: int, runs: int) -> dict[str, float]:
    """Median over rounds of each mode's mean seconds per model call."""
    per_call: dict[str, list[float]] = {}
    with (
        SimulatedProvider(latency_s=latency_s) as provider,
        tempfile.TemporaryDirectory() as tmp,
    ):
        client = openai.AsyncOpenAI(
            base_url=provider.openai_base_url, api_key="sk-test"
        )
        try:
            runners = await modes(client, Path(tmp))
            for run in runners.values():  # warm up: imports, connections, schemas
                await run()
            order = list(runners)
            for round_ in range(rounds):
                for name in order if round_ % 2 == 0 else reversed(order):
                    start = time.perf_counter()
                    for _ in range(runs):
                        await runners[name]()
                    elapsed = time.perf_counter() - start
                    per_call.setdefault(name, []).append(elapsed / runs / MODEL_CALLS)
        finally:
            await client.close()
            if "dbos" in per_call:
                importlib.import_module("dbos").DBOS.destroy()
    return {name: statistics.median(samples) for name, samples in per_call.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    for latency_s in (0.0, 0.1):
        figures = asyncio.run(measure(latency_s, rounds=args.rounds, runs=args.runs))
        plain = figures["plain"]
        print(
            f"\nsimulated latency {latency_s * 1000:.0f} ms per model call "
            f"(medians of {args.rounds} rounds x {args.runs} runs)"
        )
        print(
            f"  {'mode':<10} {'ms/model call':>14} {'overhead ms':>12} {'ratio':>7} {'of call':>8}"
        )
        for name, seconds in figures.items():
            overhead = seconds - plain
            share = f"{overhead / latency_s:.1%}" if latency_s else "-"
            print(
                f"  {name:<10} {seconds * 1000:>14.2f} {overhead * 1000:>12.2f} "
                f"{seconds / plain:>7.3f} {share:>8}"
            )


if __name__ == "__main__":
    main()
