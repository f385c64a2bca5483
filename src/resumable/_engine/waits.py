"""`wait_for` and `sleep`: journaled points where a run may suspend for a long time.

Each takes a seq like a step. The first time a run reaches one, its deadline is
committed (a step record with status "waiting"), so a restart does not move it.
If the input is not there yet, or the deadline has not come, the workflow is
unwound with `Suspend` (a BaseException, so `except Exception` cannot swallow
it); the run is recorded as waiting or sleeping and holds no lease, thread or
connection. `Engine.send` or the deadline makes it runnable again, and the next
execution replays up to this point and carries on.
"""

from __future__ import annotations

import math
from collections.abc import Coroutine
from typing import Any

from resumable._engine.bridge import wait_on
from resumable._engine.commits import commit
from resumable._engine.context import RunContext, active_run, def_workflow_run
from resumable._engine.ids import check_id
from resumable.errors import NonDeterminismError, NotInRun, UsageError, WaitTimeout
from resumable.stores.places import input_place, step_place
from resumable.stores.protocol import RunStatus, StepRecord, StepStatus

# a sleep shorter than this is slept in-process rather than suspending the run
INLINE_SLEEP_S = 1.0
WAIT_PREFIX = "wait_for:"
"""A wait_for's journal name is this prefix and its key."""


def unawaited(
    run_id: str, key: str, *, awaited: list[str], status: RunStatus, early: str
) -> UsageError | None:
    """Why a front end asks before sending `key` (None: the run waits for it).

    `Engine.send` takes a key sent early (`wait_for` returns it at once); the CLI
    and the dashboard refuse one unless asked (`early` says how), as a typo would
    otherwise wait unread. A run that has ended is left to `send`, which says so.
    """
    if key in awaited or status in ("succeeded", "failed", "cancelled"):
        return None
    hint = f"{early} sends {key!r} before the run asks for it"
    if not awaited:
        return UsageError(f"run {run_id!r} is {status}, not waiting for input; {hint}")
    return UsageError(
        f"run {run_id!r} is not waiting for {key!r}; it waits for "
        f"{', '.join(repr(k) for k in awaited)} (or {hint})"
    )


class Suspend(BaseException):
    """Unwinds a workflow that must wait; the engine records the run as suspended."""

    status: RunStatus
    wake_at_ms: int | None
    key: str | None
    """The input a wait_for waits for (None: a sleep)."""

    def __init__(
        self, status: RunStatus, wake_at_ms: int | None, key: str | None = None
    ) -> None:
        super().__init__(status, wake_at_ms, key)
        self.status = status
        self.wake_at_ms = wake_at_ms
        self.key = key


def wait_for(key: str, *, timeout: float | None = None) -> Any:
    """Wait for the input sent to this run under `key` (`Engine.send`), and return it.

    While nothing has been sent the run is recorded as waiting and the process
    may exit; it resumes exactly here when the input arrives. Several waits may
    be pending at once (e.g. under `asyncio.gather`). An `async def` workflow
    awaits it; a `def` workflow calls it and gets the input.

    Args:
        key: The input's name; the first value sent under it is the one received.
        timeout: Seconds from the first time the run reached this wait; then
            WaitTimeout is raised here, which the workflow may catch.

    Raises:
        WaitTimeout: the timeout passed with no input.
    """
    return _awaited_here(_wait_for(check_id("input key", key), timeout))


def sleep(seconds: float) -> Any:
    """Sleep durably: the run wakes `seconds` after it first got here, across restarts.

    A long sleep suspends the run (no process needs to stay up); a worker, or
    `Engine.run` on the same id, wakes it on time. An `async def` workflow awaits
    it; a `def` workflow calls it.
    """
    return _awaited_here(_sleep(seconds))


def _awaited_here(coro: Coroutine[Any, Any, Any]) -> Any:
    """`coro` for async code to await; on a def workflow's thread, its outcome.

    The thread has no loop of its own to await with: the wait runs on the run's
    loop, as a step does, and a suspension unwinds the thread's workflow alike.
    """
    ctx = def_workflow_run()
    if ctx is None:
        return coro  # awaited (or, outside a run, refused) by the caller
    return wait_on(ctx.loop, coro)


async def _wait_for(key: str, timeout: float | None) -> Any:  # noqa: ASYNC109 - a durable deadline, which asyncio.timeout cannot express
    point = _Point.take("wait_for", f"{WAIT_PREFIX}{key}")
    ctx, recorded = point.ctx, point.recorded
    if recorded is not None and recorded.status in ("ok", "failed"):
        ctx.replayed_seqs.append(point.seq)
        value = point.load()
        if recorded.status == "ok":
            return value
        raise WaitTimeout(
            run_id=ctx.run_id,
            seq=point.seq,
            key=key,
            timeout_s=float(value["timeout_s"]),
        )
    now_ms = ctx.runtime.clock.now_ms()
    deadline_ms = await point.deadline(timeout, now_ms)
    inputs = await ctx.runtime.store.get_inputs(ctx.run_id)
    if key in inputs:
        value = ctx.runtime.serde.loads(inputs[key], place=input_place(ctx.run_id, key))
        await point.finish("ok", value, now_ms)
        return value
    if deadline_ms is not None and now_ms >= deadline_ms:
        started_ms = recorded.started_at_ms if recorded is not None else now_ms
        timeout_s = (deadline_ms - started_ms) / 1000
        await point.finish("failed", {"timeout_s": timeout_s, "key": key}, now_ms)
        raise WaitTimeout(
            run_id=ctx.run_id, seq=point.seq, key=key, timeout_s=timeout_s
        )
    ctx.suspensions.append(Suspend("waiting", deadline_ms, key))
    raise ctx.suspensions[-1]


async def _sleep(seconds: float) -> None:
    point = _Point.take("sleep", "sleep")
    ctx = point.ctx
    if point.recorded is not None and point.recorded.status == "ok":
        ctx.replayed_seqs.append(point.seq)
        return
    now_ms = ctx.runtime.clock.now_ms()
    wake_at_ms = await point.deadline(max(seconds, 0.0), now_ms)
    remaining_s = 0.0 if wake_at_ms is None else (wake_at_ms - now_ms) / 1000
    if remaining_s > INLINE_SLEEP_S:
        ctx.suspensions.append(Suspend("sleeping", wake_at_ms))
        raise ctx.suspensions[-1]
    if remaining_s > 0:
        await ctx.runtime.clock.sleep(remaining_s)
    await point.finish("ok", None, ctx.runtime.clock.now_ms())


class _Point:
    """One wait_for or sleep call: its seq, and what the journal holds there."""

    def __init__(self, ctx: RunContext, seq: int, name: str) -> None:
        self.ctx, self.seq, self.name = ctx, seq, name
        self.recorded = ctx.journal.get(seq)
        if self.recorded is not None and self.recorded.name != name:
            raise NonDeterminismError(
                run_id=ctx.run_id,
                seq=seq,
                recorded=self.recorded.name,
                called=name,
                reason="another step",
            )

    @classmethod
    def take(cls, what: str, name: str) -> _Point:
        ctx = active_run()
        if ctx is None:
            raise NotInRun(
                call=f"{what}()",
                where="in a @workflow body run by an Engine (not in a step, and not "
                "outside a run)",
            )
        seq = ctx.take_seq()
        if ctx.check is not None:  # Engine.check: replays a finished wait, or stops
            ctx.check.wait_point(seq, name)
        return cls(ctx, seq, name)

    def load(self) -> Any:
        record = self.recorded
        if record is None:
            return None
        place = step_place(record.run_id, record.seq, record.name)
        return self.ctx.runtime.serde.loads(record.output or b"", place=place)

    async def deadline(self, seconds: float | None, now_ms: int) -> int | None:
        """The recorded deadline, committing it the first time the run gets here."""
        if self.recorded is not None:
            deadline = self.load()
            return None if deadline is None else int(deadline)
        if seconds is None or math.isinf(seconds):
            deadline_ms = None
        else:
            deadline_ms = now_ms + int(seconds * 1000)
        await self.finish("waiting", deadline_ms, now_ms)
        return deadline_ms

    async def finish(self, status: StepStatus, value: Any, now_ms: int) -> None:
        ctx = self.ctx
        started_at_ms = (
            self.recorded.started_at_ms if self.recorded is not None else now_ms
        )
        record = StepRecord(
            run_id=ctx.run_id,
            seq=self.seq,
            name=self.name,
            fingerprint="-",
            status=status,
            output=ctx.runtime.serde.dumps(
                value, place=step_place(ctx.run_id, self.seq, self.name)
            ),
            attempts=1,
            started_at_ms=started_at_ms,
            finished_at_ms=now_ms,
        )
        await commit(ctx, record)
        self.recorded = record
