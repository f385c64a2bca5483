"""The generic view and the export: what reading without the app's types costs.

1. One stored OpenAI ChatCompletion (~1 KB of answer): `Serde.view` (plain data,
   nothing built) against `Serde.loads` (the pydantic models rebuilt), per value.
2. A run of 500 such steps on SQLite: `Engine.export` written as JSON Lines,
   against reading the same journal with real types (`history()` + `output()`),
   per step.

Medians of 7 runs each, both measured in the same process.

Run: .venv/bin/python benchmarks/view_export.py
"""

from __future__ import annotations

import asyncio
import io
import random
import tempfile
import time
from pathlib import Path

from _common import median_us_per_op, prose, table
from openai.types.chat import ChatCompletion

from resumable import Engine, step, workflow
from resumable.cli.export import write_jsonl
from resumable.serde import Serde, TypeRegistry

RUNS = 7
VALUES = 2000
STEPS = 500


def completion(rng: random.Random, n: int) -> ChatCompletion:
    return ChatCompletion.model_validate(
        {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 1_795_000_000 + n,
            "model": "gpt-5-mini",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": prose(rng, 1000)},
                }
            ],
            "usage": {
                "prompt_tokens": 300,
                "completion_tokens": 250,
                "total_tokens": 550,
            },
        }
    )


@step(name="bench.view_export.answer")
async def answer(n: int) -> ChatCompletion:
    return completion(random.Random(n), n)


@workflow(name="bench.view_export.flow")
async def flow(n: int) -> int:
    for i in range(n):
        await answer(i)
    return n


async def per_value() -> tuple[float, float]:
    registry = TypeRegistry()
    serde = Serde(registry)
    data = serde.dumps(completion(random.Random(1), 1), place="bench")
    # the reading side registers the types, as `resumable show --app` would
    reader = Serde(registry)

    async def loads(_: int) -> None:
        for _ in range(VALUES):
            reader.loads(data, place="bench")

    async def view(_: int) -> None:
        for _ in range(VALUES):
            reader.view(data, place="bench")

    return (
        await median_us_per_op(loads, ops=VALUES, runs=RUNS),
        await median_us_per_op(view, ops=VALUES, runs=RUNS),
    )


async def per_step(directory: Path) -> tuple[float, float]:
    async with Engine(f"sqlite:///{directory / 'bench.db'}") as engine:
        await engine.run(flow, STEPS, run_id="bench")

        async def typed(_: int) -> None:
            for record in await engine.history("bench"):
                record.output()

        async def export(_: int) -> float:
            out = io.BytesIO()
            start = time.perf_counter()
            assert await write_jsonl(engine.export(["bench"]), out) == STEPS
            return time.perf_counter() - start

        return (
            await median_us_per_op(typed, ops=STEPS, runs=RUNS),
            await median_us_per_op(export, ops=STEPS, runs=RUNS),
        )


async def main() -> None:
    loads_us, view_us = await per_value()
    with tempfile.TemporaryDirectory() as directory:
        typed_us, export_us = await per_step(Path(directory))
    print(
        table(
            [
                ["what", "baseline (us)", "new (us)", "new / baseline"],
                [
                    "one ChatCompletion: loads vs view",
                    f"{loads_us:.1f}",
                    f"{view_us:.1f}",
                    f"{view_us / loads_us:.2f}x",
                ],
                [
                    f"a {STEPS}-step run: history+output vs export to JSONL, per step",
                    f"{typed_us:.1f}",
                    f"{export_us:.1f}",
                    f"{export_us / typed_us:.2f}x",
                ],
            ]
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
