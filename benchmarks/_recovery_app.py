"""The workflow benchmarks/recovery_latency.py runs on two worker processes."""

from __future__ import annotations

import asyncio
import os
import time

from resumable import step, workflow


@step
async def tick(i: int) -> int:
    fd = os.open(os.environ["RECOVERY_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{os.getpid()} {i} {time.time():.4f}\n".encode())
    finally:
        os.close(fd)
    await asyncio.sleep(0.1)
    return i


@workflow(name="bench.recovery")
async def long_job(steps: int) -> int:
    return sum([await tick(i) for i in range(steps)])
