"""A slow run that test_zombie.py freezes with SIGSTOP: `python lease_app.py DB`.

Side effects go to the file named by $ZOMBIE_LOG (read at each write, never from
argv: the test process imports this module too).
"""

from __future__ import annotations

import asyncio
import os
import sys

from resumable import Engine, step, workflow


def note(line: str) -> None:
    fd = os.open(os.environ["ZOMBIE_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


@step
async def slow(i: int) -> int:
    note(f"start {i} {os.getpid()}")
    await asyncio.sleep(0.3)
    note(f"end {i} {os.getpid()}")
    return i


@workflow(name="crash.zombie")
async def zombie_flow() -> int:
    return sum([await slow(i) for i in range(6)])


if __name__ == "__main__":
    engine = Engine(f"sqlite:///{sys.argv[1]}", lease_ttl_s=1.0)
    try:
        engine.run_sync(zombie_flow, run_id="zombie")
    except Exception as exc:  # noqa: BLE001 - the test reads how the zombie stopped
        note(f"stopped {type(exc).__name__} {os.getpid()}")
        raise SystemExit(3) from None
    note("finished")
