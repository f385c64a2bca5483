"""`now()`, `uuid4()` and `random()`: values a workflow may branch on, recorded.

A workflow's code runs again from the top on every resume, so it must not read
the clock or draw random numbers itself: a resumed run would see other values
than the execution that crashed. These helpers take the next seq like a tiny
step, and the first execution records the value it drew there; every later one
replays it (as Temporal's `workflow.now()`):

```python
@workflow
async def campaign(user: str) -> str:
    started = resumable.now()           # the same datetime on every replay
    token = resumable.uuid4()           # the same UUID: an idempotency key
    if resumable.random() < 0.1: ...    # the same branch
```

They are plain calls in both `async def` and `def` workflows. A plain `def`
workflow's thread writes the record before it goes on. An `async def` workflow
cannot wait there, so the write starts at once and is awaited before anything
that could act on the value runs: the next step, child run or `map_steps`, and
the run's end (`commits.recorded_first`). A crash before then loses the value,
but nothing outside the run had seen it. Outside a workflow body (in a step, or
with no run at all) they are the plain functions.
"""

from __future__ import annotations

import asyncio
import random as _random
import uuid as _uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

from resumable._engine.bridge import wait_on
from resumable._engine.commits import commit
from resumable._engine.context import RunContext, active_run, def_workflow_run
from resumable._engine.steps import decide_call, replayed
from resumable.stores.places import step_place
from resumable.stores.protocol import StepRecord

T = TypeVar("T")


def now() -> datetime:
    """The current time in UTC (aware); in a workflow, recorded and replayed.

    In a run it is the engine's clock (`Engine(clock=...)`), to the millisecond.
    """
    return _recorded(
        "resumable.now",
        lambda ctx: datetime.fromtimestamp(ctx.runtime.clock.now_ms() / 1000, UTC),
        lambda: datetime.now(UTC),
    )


def uuid4() -> _uuid.UUID:
    """A random UUID (`uuid.uuid4()`); in a workflow, recorded and replayed."""
    return _recorded("resumable.uuid4", lambda _: _uuid.uuid4(), _uuid.uuid4)


def random() -> float:
    """A float in [0, 1) (`random.random()`); in a workflow, recorded and replayed."""
    draw = _random.random
    return _recorded("resumable.random", lambda _: draw(), draw)


def _recorded(name: str, make: Callable[[RunContext], T], plain: Callable[[], T]) -> T:
    ctx = active_run()
    if ctx is None:
        return plain()
    seq = ctx.take_seq()  # in call order, like a step: gather() replays the same
    if def_workflow_run() is not None:  # its thread can wait for the write
        return wait_on(ctx.loop, _draw_and_commit(ctx, seq, name, make))
    record, value = _draw(ctx, seq, name, make)
    if record is not None:
        ctx.recording.append(asyncio.ensure_future(commit(ctx, record)))
    return value


async def _draw_and_commit(
    ctx: RunContext, seq: int, name: str, make: Callable[[RunContext], T]
) -> T:
    record, value = _draw(ctx, seq, name, make)
    if record is not None:
        await commit(ctx, record)
    return value


def _draw(
    ctx: RunContext, seq: int, name: str, make: Callable[[RunContext], T]
) -> tuple[StepRecord | None, T]:
    """The value recorded at `seq` (and None), or a new one and its record."""
    fingerprint, decision = decide_call(ctx, seq, name, (), {}, attempts=1)
    if isinstance(decision, StepRecord):
        value: T = replayed(ctx, decision)
        return None, value
    value = make(ctx)
    now_ms = ctx.runtime.clock.now_ms()
    place = step_place(ctx.run_id, seq, name)
    record = StepRecord(
        run_id=ctx.run_id,
        seq=seq,
        name=name,
        fingerprint=fingerprint,
        status="ok",
        output=ctx.runtime.serde.dumps(value, place=place),
        attempts=1,
        started_at_ms=now_ms,
        finished_at_ms=now_ms,
    )
    return record, value
