"""A workflow scheduled every second, run by worker processes in test_schedule_fleet.py."""

from __future__ import annotations

import asyncio
import os

from resumable import current_run, step, workflow


def note(line: str) -> None:
    fd = os.open(os.environ["SCHEDULE_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


@step
async def tick_step(run_id: str) -> str:
    note(f"start {run_id} {os.getpid()}")
    await asyncio.sleep(0.2)  # long enough to be killed inside it
    note(f"end {run_id} {os.getpid()}")
    return run_id


@workflow(name="sched.every_second", schedule="* * * * * *", catch_up=100)
async def every_second() -> str:
    return await tick_step(current_run().run_id)
