"""The workflow a worker fleet runs in tests/crash/test_fleet.py."""

from __future__ import annotations

import asyncio
import os

from resumable import step, workflow

STEPS = 20


def note(line: str) -> None:
    fd = os.open(os.environ["FLEET_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


@step
async def fleet_step(run: int, i: int) -> int:
    note(f"start {run} {i} {os.getpid()}")
    await asyncio.sleep(0.001 + (run * 7 + i) % 4 / 1000)
    note(f"end {run} {i} {os.getpid()}")
    return run * 100 + i


@workflow(name="fleet.job")
async def fleet_job(run: int) -> int:
    return sum([await fleet_step(run, i) for i in range(STEPS)])
