"""A traced workflow run in a child process: `python traced_app.py DB RUN_ID`.

The child sets up the OpenTelemetry SDK as an application would (a global
TracerProvider) and runs `traced.sequential` with Tracing on; steps i >= HANG_FROM
hang until the test kills the process. Each step appends `start <i>` to the file
TRACED_LOG names (nowhere when unset, as in the test's own process).
"""

from __future__ import annotations

import asyncio
import os
import sys

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from resumable import Engine, step, workflow
from resumable.observability import Tracing

HANG_FROM = int(os.environ.get("HANG_FROM", "-1"))
STEPS = 5


def note(line: str) -> None:
    fd = os.open(
        os.environ.get("TRACED_LOG", os.devnull), os.O_WRONLY | os.O_APPEND | os.O_CREAT
    )
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


@step
async def traced_work(i: int) -> int:
    note(f"start {i}")
    if 0 <= HANG_FROM <= i:
        await asyncio.sleep(3600)
    return i * i


@workflow(name="traced.sequential")
async def traced_sequential(n: int) -> list[int]:
    return [await traced_work(i) for i in range(n)]


async def main(db: str, run_id: str) -> None:
    async with Engine(f"sqlite:///{db}", observers=[Tracing()]) as engine:
        await engine.run(traced_sequential, STEPS, run_id=run_id)


if __name__ == "__main__":
    trace.set_tracer_provider(TracerProvider())
    asyncio.run(main(sys.argv[1], sys.argv[2]))
