"""Interpreter work per step: bytecodes and Python frames, counted, not timed.

The shared machines swing 60% in a minute, which hides a 5% change in any timing.
This counts instead, with `sys.settrace`: how many bytecodes the interpreter runs
and how many Python frames it enters (coroutine resumptions included) per step
of a 200-step workflow on the memory store, once executing and once replaying.
The baseline, counted the same way in the same run, is the workflow's own loop
calling the undecorated step function. Counts are exact and repeatable, so a
change to the hot path shows up here as a number, whatever the machine is doing;
C code (the codec, sqlite3, zlib) is not counted, so time it as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import Counter, table

from resumable import Engine, step, workflow

STEPS = 200
PAYLOAD = "x" * 1000


class Stop(BaseException):
    """Ends the run after its steps, leaving it to be resumed (replayed)."""


async def produce_plain(i: int) -> str:
    return PAYLOAD + str(i)


produce = step(name="bench.work.produce")(produce_plain)


@workflow(name="bench.work")
async def many_steps(n: int, stop: bool) -> int:
    for i in range(n):
        await produce(i)
    if stop:
        raise Stop
    return n


async def plain_loop(n: int) -> int:
    for i in range(n):
        await produce_plain(i)
    return n


async def count(run: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """Bytecodes and frames per step of one call of `run`."""
    counter = Counter()
    sys.settrace(counter.on_call)
    try:
        with contextlib.suppress(Stop):
            await run()
    finally:
        sys.settrace(None)
    return counter.bytecodes / STEPS, counter.frames / STEPS


async def main() -> None:
    engine = Engine("memory://")
    await engine.run(many_steps, 3, False, run_id="warm-up")  # imports, caches
    baseline = await count(lambda: plain_loop(STEPS))
    executing = await count(lambda: engine.run(many_steps, STEPS, True, run_id="r"))
    replaying = await count(lambda: engine.run(many_steps, STEPS, True, run_id="r"))
    await engine.close()
    rows = [("per step", "bytecodes", "frames", "bytecodes over the plain loop")]
    rows.append(("plain loop", f"{baseline[0]:.0f}", f"{baseline[1]:.1f}", ""))
    for name, (bytecodes, frames) in (
        ("executing", executing),
        ("replaying", replaying),
    ):
        rows.append(
            (
                name,
                f"{bytecodes:.0f}",
                f"{frames:.1f}",
                f"+{bytecodes - baseline[0]:.0f} ({bytecodes / baseline[0]:.1f}x)",
            )
        )
    print(f"{STEPS} steps of ~1 KB on the memory store, counted with sys.settrace")
    print(table(rows))


if __name__ == "__main__":
    asyncio.run(main())
