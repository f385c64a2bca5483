"""`map_steps`: one journaled step per item of a batch, identified by the item's key.

The map call takes one seq in the workflow like any step, and records there the
keys of its items (`map:<step>`), so the journal can list each item under its map
call by the user's key. Each item's step is journaled at a seq derived from that
seq and the item's key (in a range far above ordinary seqs), not from its
position, so a resumed batch skips the items that finished even if the list was
reordered or grew.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TextIO, TypeVar

from resumable._engine.commits import commit, recorded_first
from resumable._engine.context import RunContext, active_run, def_workflow_run
from resumable._engine.ledger import Spend, spend_of, spend_text
from resumable._engine.map_items import item_seqs, keyed_seq, map_record_name
from resumable._engine.specs import StepSpec
from resumable._engine.steps import execute_step
from resumable.errors import NonDeterminismError, NotInRun, StepFailed
from resumable.stores.places import step_place
from resumable.stores.protocol import StepRecord
from resumable.usage import Usage

T = TypeVar("T")
R = TypeVar("R")

_WINDOW_S = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimit:
    """Limits on the calls a batch starts, over any sliding minute."""

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    """Counted from the usage of the calls the items make (metered at the SDK,
    whatever a step returns), as each attempt is recorded: a call's tokens are
    known only once it returns."""


def map_steps(
    step_fn: Callable[[T], Any],
    items: Sequence[T],
    *,
    key: Callable[[T], str] | None = None,
    concurrency: int = 8,
    rate_limit: RateLimit | None = None,
    progress: TextIO | bool | None = None,
) -> Coroutine[Any, Any, list[Any]]:
    """Run `step_fn` on every item as its own journaled step; results in item order.

    Await it in an `async def` workflow.

    Args:
        step_fn: An async `@step` taking one item.
        items: The batch.
        key: The item's identity (default: the item itself, which must then be a
            str or int). Keys must be unique within the batch.
        concurrency: Items in flight at once.
        rate_limit: Requests and tokens per minute across the batch.
        progress: Where to draw a progress line (default: stderr when it is a
            terminal; nothing in logs). False turns it off.

    Raises:
        StepFailed: an item's step failed (raised once every other item is done).
        TypeError: called from a `def` workflow, which cannot run async steps.
    """
    if def_workflow_run() is not None:
        # a coroutine returned here would never run, and fail later as a list
        raise TypeError(
            "map_steps() runs async steps, which a plain `def` workflow cannot await; "
            "make the workflow `async def`, or call the step in a loop"
        )
    return _map_steps(
        step_fn,
        items,
        key=key,
        concurrency=concurrency,
        rate_limit=rate_limit,
        progress=progress,
    )


async def _map_steps(
    step_fn: Callable[[T], Any],
    items: Sequence[T],
    *,
    key: Callable[[T], str] | None,
    concurrency: int,
    rate_limit: RateLimit | None,
    progress: TextIO | bool | None,
) -> list[Any]:
    ctx = active_run()
    spec = getattr(step_fn, "__resumable_step__", None)
    if ctx is None or not isinstance(spec, StepSpec) or not spec.is_async:
        raise NotInRun(
            call="map_steps()",
            where="with an async @step, awaited in a @workflow run by an Engine",
        )
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    keys = [_key_of(item, key) for item in items]
    duplicates = (
        sorted({k for k in keys if keys.count(k) > 1})
        if len(set(keys)) < len(keys)
        else []
    )
    if duplicates:
        raise ValueError(f"map_steps keys must be unique; repeated: {duplicates[:5]}")
    map_seq = ctx.take_seq()
    await recorded_first(ctx)  # a value now()/uuid4() drew may be among the items
    await _record_keys(ctx, map_seq, spec, keys)
    batch = _Batch(
        ctx,
        spec,
        total=len(items),
        concurrency=concurrency,
        rate_limit=rate_limit,
        sink=_sink(progress),
    )
    outcomes = await asyncio.gather(
        *(
            batch.one(keyed_seq(map_seq, k), item)
            for k, item in zip(keys, items, strict=True)
        ),
        return_exceptions=True,
    )
    batch.report(final=True)
    for result in outcomes:
        if isinstance(result, BaseException):
            raise result
    return list(outcomes)


async def _record_keys(
    ctx: RunContext, map_seq: int, spec: StepSpec, keys: list[str]
) -> None:
    """Record the map call at its seq with its items' keys (again when they changed).

    Items are found by key, not through this record: it is what lets a reader
    list each item under its map call by the user's key.
    """
    if ctx.failure is not None:
        raise ctx.failure
    name = map_record_name(spec.name)
    recorded = ctx.journal.get(map_seq)
    if recorded is not None and recorded.name != name:
        raise NonDeterminismError(
            run_id=ctx.run_id,
            seq=map_seq,
            recorded=recorded.name,
            called=name,
            reason="another step",
        )
    serde = ctx.runtime.serde
    if recorded is not None and list(
        (item_seqs(recorded, serde) or {}).values()
    ) == list(keys):
        return
    if ctx.check is not None:  # Engine.check writes nothing
        return
    now_ms = ctx.runtime.clock.now_ms()
    record = StepRecord(
        run_id=ctx.run_id,
        seq=map_seq,
        name=name,
        fingerprint="-",
        status="ok",
        output=serde.dumps(keys, place=step_place(ctx.run_id, map_seq, name)),
        attempts=1,
        started_at_ms=now_ms if recorded is None else recorded.started_at_ms,
        finished_at_ms=now_ms,
    )
    await commit(ctx, record)


def _key_of(item: Any, key: Callable[[Any], str] | None) -> str:
    if key is not None:
        return str(key(item))
    if isinstance(item, str | int) and not isinstance(item, bool):
        return str(item)
    raise TypeError(f"map_steps needs key= for items of type {type(item).__name__}")


def _sink(progress: TextIO | bool | None) -> TextIO | None:
    if progress is False:
        return None
    if progress is None or progress is True:
        return sys.stderr if progress is True or sys.stderr.isatty() else None
    return progress


class _Batch:
    def __init__(
        self,
        ctx: RunContext,
        spec: StepSpec,
        *,
        total: int,
        concurrency: int,
        rate_limit: RateLimit | None,
        sink: TextIO | None,
    ) -> None:
        self.ctx, self.spec, self.total, self.sink = ctx, spec, total, sink
        self.slots = asyncio.Semaphore(concurrency)
        self.limit = rate_limit or RateLimit()
        self.starts: deque[float] = deque()
        self.tokens: deque[tuple[float, int]] = deque()
        self.done = self.replayed = self.failed = 0
        self.spent = Spend()
        self._drawn_at = 0.0

    async def one(self, seq: int, item: Any) -> Any:
        recorded = self.ctx.journal.get(seq)
        if recorded is not None and recorded.status == "ok":
            result = await execute_step(self.ctx, seq, self.spec, (item,), {})
            self.replayed += 1
            return self._count(result)
        async with self.slots:
            if (
                self.ctx.check is None
            ):  # Engine.check executes nothing: no limit to keep
                await self._admit()
            # the item's attempts report the calls their records hold (`steps._spend`)
            self.ctx.spend_sinks[seq] = self._spent
            try:
                result = await execute_step(self.ctx, seq, self.spec, (item,), {})
            except StepFailed:
                self.failed += 1
                self.report()
                raise
            finally:
                self.ctx.spend_sinks.pop(seq, None)
            return self._count(result)

    def _spent(self, calls: list[Usage]) -> None:
        """Count the calls an item's attempt made, as its record holds them."""
        now = self.ctx.runtime.clock.now_ms() / 1000
        self.tokens.append((now, sum(c.total_tokens for c in calls)))
        self.spent = self.spent + spend_of(calls, self.ctx.runtime.prices)

    def _count(self, result: Any) -> Any:
        self.done += 1
        self.report()
        return result

    async def _admit(self) -> None:
        """Wait until starting one more call keeps the batch within its rate limit."""
        clock, limit = self.ctx.runtime.clock, self.limit
        while True:
            now = clock.now_ms() / 1000
            while self.starts and self.starts[0] <= now - _WINDOW_S:
                self.starts.popleft()
            while self.tokens and self.tokens[0][0] <= now - _WINDOW_S:
                self.tokens.popleft()
            waits = [0.0]
            if (
                limit.requests_per_minute is not None
                and len(self.starts) >= limit.requests_per_minute
            ):
                waits.append(self.starts[0] + _WINDOW_S - now)
            used = sum(tokens for _, tokens in self.tokens)
            if limit.tokens_per_minute is not None and used >= limit.tokens_per_minute:
                waits.append(self.tokens[0][0] + _WINDOW_S - now)
            wait = max(waits)
            if wait <= 0:
                self.starts.append(now)
                return
            await clock.sleep(wait)

    def report(self, *, final: bool = False) -> None:
        """Redraw the progress line (at most ten times a second)."""
        if self.sink is None:
            return
        now = time.monotonic()
        if not final and now - self._drawn_at < 0.1:
            return
        self._drawn_at = now
        spent = f" {spend_text(self.spent)}" if self.spent.calls else ""
        self.sink.write(
            f"\r{self.spec.name}: {self.done}/{self.total} done "
            f"({self.replayed} replayed, {self.failed} failed){spent}"
            + ("\n" if final else "")
        )
        self.sink.flush()
