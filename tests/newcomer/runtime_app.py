"""A user's program for the runtime tests: `python runtime_app.py URL LOG MODE`.

MODE `async` runs the workflow with `asyncio.run(engine.run(...))`, `sync` with
`engine.run_sync(...)`, `enqueue` only records it for `resumable worker --app
runtime_app`. Every step appends `start <i>` and `end <i>` to LOG (the path in
$RUNTIME_LOG when imported by a worker). With HANG=1 in the environment, step 2
hangs until the process is interrupted. The lease lasts 300 s, so only a lease
given up on the way out lets another process resume the run at once.

MODE `drawn` and `drawn-def` run a workflow (`async def`, plain `def`) that draws
`resumable.now()`, `uuid4()` and `random()`, notes `drawn <values>` from its own
body (so on every execution), and hangs in a step after that with HANG=1.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading

import resumable
from resumable import Engine, step, workflow

RUN_ID = "runtime-run"
STEPS = 5
LEASE_TTL_S = 300.0


def note(line: str) -> None:
    fd = os.open(os.environ["RUNTIME_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


@step
async def work(i: int) -> int:
    note(f"start {i}")
    if i == 2 and os.environ.get("HANG") == "1":
        await asyncio.Event().wait()
    note(f"end {i}")
    return i


@workflow(name="runtime.long")
async def long_job(n: int) -> list[int]:
    return [await work(i) for i in range(n)]


def draw() -> str:
    return f"{resumable.now().isoformat()} {resumable.uuid4()} {resumable.random()!r}"


@step
async def hang_here() -> None:
    note("hanging")
    if os.environ.get("HANG") == "1":
        await asyncio.Event().wait()


@step
def hang_here_def() -> None:
    note("hanging")
    if os.environ.get("HANG") == "1":
        threading.Event().wait()


@workflow(name="runtime.drawn")
async def drawn() -> str:
    values = draw()
    note(f"drawn {values}")
    await hang_here()
    return values


@workflow(name="runtime.drawn-def")
def drawn_def() -> str:
    values = draw()
    note(f"drawn {values}")
    hang_here_def()
    return values


def main() -> None:
    url, log, mode = sys.argv[1:4]
    os.environ["RUNTIME_LOG"] = log
    engine = Engine(url, lease_ttl_s=LEASE_TTL_S)
    if mode in ("drawn", "drawn-def"):
        chosen = drawn if mode == "drawn" else drawn_def
        note(f"done {engine.run_sync(chosen, run_id=RUN_ID)}")
        return
    if mode == "sync":
        result = engine.run_sync(long_job, STEPS, run_id=RUN_ID)
    elif mode == "enqueue":
        asyncio.run(engine.enqueue(long_job, STEPS, run_id=RUN_ID))
        return
    else:
        result = asyncio.run(engine.run(long_job, STEPS, run_id=RUN_ID))
    note(f"done {result}")


if __name__ == "__main__":
    main()
