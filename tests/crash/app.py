"""Workflows a crash test runs in a child process: `python app.py DB LOG MODE RUN_ID`.

Every step appends `start <i>` and `end <i>` to LOG (one write per line, so a
SIGKILL cannot tear a line). With HANG_FROM=k in the environment, steps i >= k
hang until the process is killed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import Any

from resumable import Engine, step, workflow

LOG = sys.argv[2] if len(sys.argv) > 2 else os.devnull
HANG_FROM = int(os.environ.get("HANG_FROM", "-1"))


def note(line: str) -> None:
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


@step
async def work(i: int) -> str:
    note(f"start {i}")
    if 0 <= HANG_FROM <= i:
        await asyncio.sleep(3600)
    await asyncio.sleep(0.002 * (10 - i % 10))  # later calls finish first under gather
    note(f"end {i}")
    return f"result-{i}" * 50


@workflow(name="crash.sequential")
async def sequential(n: int) -> list[str]:
    return [await work(i) for i in range(n)]


@workflow(name="crash.gathered")
async def gathered(n: int) -> list[str]:
    return list(await asyncio.gather(*(work(i) for i in range(n))))


@step
def sync_work(i: int) -> str:
    note(f"start {i}")
    if 0 <= HANG_FROM <= i:
        import time

        time.sleep(3600)
    note(f"end {i}")
    return f"result-{i}"


@workflow(name="crash.sync")
def sync_sequential(n: int) -> list[str]:
    return [sync_work(i) for i in range(n)]


WORKFLOWS: dict[str, Callable[[int], Any]] = {
    "sequential": sequential,
    "gathered": gathered,
    "sync": sync_sequential,
}


def main() -> None:
    db, _log, mode, run_id = sys.argv[1:5]
    engine = Engine(f"sqlite:///{db}")
    result = engine.run_sync(WORKFLOWS[mode], 10, run_id=run_id)
    note(f"done {len(result)}")


if __name__ == "__main__":
    main()
