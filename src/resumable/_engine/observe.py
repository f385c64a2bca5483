"""The observer seam: the few points where the engine tells what it is doing.

The engine calls these methods, and nothing else, for traces, metrics and the
like; it imports neither OpenTelemetry nor prometheus-client. An Engine without
observers holds `None` and each call site costs one attribute test. Observers
live in `resumable.observability`; a third party may write its own by overriding
the methods it needs (the others do nothing).

Hooks run on the run's event loop, inside the execution's task, so what an
observer puts in a contextvar (the current span) is seen by the step it wraps.
They must not raise and must not block.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from resumable._engine.context import Observer

if TYPE_CHECKING:
    from resumable._engine.context import RunContext, Runtime
    from resumable._engine.retention import GcReport
    from resumable.stores.capabilities import ReportsCommitBatches
    from resumable.stores.protocol import RunRecord, StepRecord
    from resumable.usage import Usage


class Fanout(Observer):
    """Several observers as one, called in order."""

    def __init__(self, observers: Sequence[Observer]) -> None:
        self.observers = tuple(observers)

    async def run_created(self, runtime: Runtime, run: RunRecord) -> None:
        for observer in self.observers:
            await observer.run_created(runtime, run)

    async def execution_started(self, ctx: RunContext, run: RunRecord) -> None:
        for observer in self.observers:
            await observer.execution_started(ctx, run)

    def execution_ended(
        self, ctx: RunContext, outcome: str, error: BaseException | None
    ) -> None:
        for observer in reversed(self.observers):
            observer.execution_ended(ctx, outcome, error)

    def replay_finished(self, ctx: RunContext) -> None:
        for observer in self.observers:
            observer.replay_finished(ctx)

    def cache_looked_up(
        self, ctx: RunContext, step: str, *, hit: bool, saved: list[Usage]
    ) -> None:
        for observer in self.observers:
            observer.cache_looked_up(ctx, step, hit=hit, saved=saved)

    def step_started(
        self, ctx: RunContext, seq: int, name: str, attempt: int, *, child: bool
    ) -> Any:
        return [
            o.step_started(ctx, seq, name, attempt, child=child) for o in self.observers
        ]

    def step_ended(
        self,
        ctx: RunContext,
        scope: Any,
        *,
        error: BaseException | None,
        retry_delay_s: float | None,
        calls: Sequence[Usage],
    ) -> None:
        # in reverse, so context an observer attached is detached in the same order
        for i in range(len(self.observers) - 1, -1, -1):
            self.observers[i].step_ended(
                ctx, scope[i], error=error, retry_delay_s=retry_delay_s, calls=calls
            )

    def step_replayed(self, ctx: RunContext, record: StepRecord) -> None:
        for observer in self.observers:
            observer.step_replayed(ctx, record)

    def usage_replayed(self, ctx: RunContext, calls: Sequence[Usage]) -> None:
        for observer in self.observers:
            observer.usage_replayed(ctx, calls)

    def checkpoint_written(
        self,
        ctx: RunContext,
        record: StepRecord,
        *,
        duration_s: float,
        error: BaseException | None,
    ) -> None:
        for observer in self.observers:
            observer.checkpoint_written(ctx, record, duration_s=duration_s, error=error)

    def store_error(self, ctx: RunContext, error: BaseException) -> None:
        for observer in self.observers:
            observer.store_error(ctx, error)

    def feed_appended(
        self, ctx: RunContext, kind: str, *, entries: int, size: int
    ) -> None:
        for observer in self.observers:
            observer.feed_appended(ctx, kind, entries=entries, size=size)

    def commit_batch_written(self, store: str, size: int) -> None:
        for observer in self.observers:
            observer.commit_batch_written(store, size)

    def lease_renewed(self, ctx: RunContext, *, late_s: float) -> None:
        for observer in self.observers:
            observer.lease_renewed(ctx, late_s=late_s)

    def lease_lost(self, ctx: RunContext) -> None:
        for observer in self.observers:
            observer.lease_lost(ctx)

    def lease_taken_over(self, run_id: str) -> None:
        for observer in self.observers:
            observer.lease_taken_over(run_id)

    def run_claimed(self, run: RunRecord, *, queue_wait_s: float | None) -> None:
        for observer in self.observers:
            observer.run_claimed(run, queue_wait_s=queue_wait_s)

    def gc_collected(self, report: GcReport) -> None:
        for observer in self.observers:
            observer.gc_collected(report)

    def agent_started(self, ctx: RunContext, agent: str) -> Any:
        return [o.agent_started(ctx, agent) for o in self.observers]

    def agent_ended(
        self, ctx: RunContext, scope: Any, *, error: BaseException | None
    ) -> None:
        for observer, inner in reversed(list(zip(self.observers, scope, strict=True))):
            observer.agent_ended(ctx, inner, error=error)

    def tick_started(self, schedule: str, tick_ms: int, *, late: bool) -> Any:
        return [o.tick_started(schedule, tick_ms, late=late) for o in self.observers]

    def tick_ended(
        self, scope: Any, *, run_id: str, created: bool, error: BaseException | None
    ) -> None:
        for observer, inner in reversed(list(zip(self.observers, scope, strict=True))):
            observer.tick_ended(inner, run_id=run_id, created=created, error=error)

    def ticks_counted(
        self, schedule: str, *, fired: int, caught_up: int, skipped: int
    ) -> None:
        for observer in self.observers:
            observer.ticks_counted(
                schedule, fired=fired, caught_up=caught_up, skipped=skipped
            )


def combine(observers: Sequence[Observer]) -> Observer | None:
    """What the engine holds: None (no cost), the one observer, or a Fanout."""
    if not observers:
        return None
    return observers[0] if len(observers) == 1 else Fanout(observers)


def store_kind(runtime: Runtime) -> str:
    """The store's kind for labels: its URL scheme (sqlite, postgresql, ...)."""
    return runtime.store.url.split(":", 1)[0] or "unknown"


def report_commit_batches(runtime: Runtime, store: ReportsCommitBatches | None) -> None:
    """Have a store that groups step commits tell the observer each group's size.

    `store` is the engine's `Capabilities.commit_batches`: None if it does not.
    """
    observer = runtime.observer
    if observer is not None and store is not None:
        kind = store_kind(runtime)
        store.add_commit_listener(
            lambda size: observer.commit_batch_written(kind, size)
        )


def outcome_of(error: BaseException | None, default: str) -> str:
    """The `execution_ended` outcome for an execution that stopped with `error`."""
    from resumable.errors import CheckpointWriteError, LeaseLost, RunCancelled

    if error is None:
        return default
    if isinstance(error, LeaseLost):
        return "lease_lost"
    if isinstance(error, CheckpointWriteError):
        return "write_failed"
    if isinstance(error, RunCancelled):
        return "cancelled"
    return "interrupted"
