"""Scheduled runs: which ticks are due, and a worker's firing of them.

Every tick of a schedule starts one run whose id is derived from the schedule and
the tick (`sched:<name>:<UTC time>`), queued for the workers like any enqueued
run. However many workers see a tick due, the store's `create_run` records that
id once: that is the whole exactly-once mechanism, on every store. The store's
schedule state (`KeepsSchedules`) only says how far the ticks went
(`last_tick_ms`) and whether the schedule is paused.

After downtime `due` decides, as a pure function, what to start: the latest due
tick (the one whose interval holds now) always, and at most `catch_up` of the
missed ticks before it, the newest ones; the others are skipped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from resumable._engine.context import Observer
from resumable._engine.cron import Cron
from resumable._engine.ids import check_id
from resumable._engine.specs import WorkflowSpec
from resumable.errors import ScheduleInvalid
from resumable.stores.capabilities import KeepsSchedules
from resumable.stores.protocol import ScheduleRecord

SKIPS_COUNTED = 10_000
"""Missed ticks past this many (in one decision) are skipped without being counted
one by one: a year of a per-second schedule is not walked to count it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """A workflow started at every tick of a cron expression.

    Made by `Engine.schedule` or `@workflow(schedule=...)`.
    """

    name: str
    """Names the schedule in the store, the CLI and its runs' ids."""
    workflow: WorkflowSpec
    cron: Cron
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    catch_up: int = 0
    """After downtime, start at most this many missed ticks (0: skip them all;
    the latest due tick is started either way)."""
    queue: str = "default"
    """The queue its runs are enqueued on (`Worker(queues=)` limits apply)."""

    def run_id(self, tick_ms: int) -> str:
        """The id of the run this schedule starts at `tick_ms`."""
        return run_id_for(self.name, tick_ms)

    def record(self, now_ms: int) -> ScheduleRecord:
        """The definition as the store keeps it (a new schedule's state)."""
        return ScheduleRecord(
            name=self.name,
            workflow=self.workflow.name,
            cron=self.cron.expression,
            tz=self.cron.tz,
            catch_up=self.catch_up,
            created_at_ms=now_ms,
            updated_at_ms=now_ms,
        )


def declare(
    workflow: WorkflowSpec,
    cron: str,
    *,
    tz: str = "UTC",
    name: str | None = None,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    catch_up: int = 0,
    queue: str = "default",
) -> Schedule:
    """A checked schedule of `workflow`.

    Raises:
        ScheduleInvalid: the cron expression, the time zone or `catch_up` is bad;
            the message names the schedule and the workflow.
        ImportError: croniter is missing (names `resumable[schedule]`).
    """
    name = check_id("schedule name", name or workflow.name)
    check_id("queue name", queue)
    if type(catch_up) is not int or catch_up < 0:
        raise ScheduleInvalid(
            schedule=name,
            workflow=workflow.name,
            detail=f"catch_up must be an int >= 0, not {catch_up!r}",
        )
    try:
        parsed = Cron(cron, tz)
    except ValueError as exc:
        raise ScheduleInvalid(
            schedule=name, workflow=workflow.name, detail=str(exc)
        ) from exc
    return Schedule(
        name=name,
        workflow=workflow,
        cron=parsed,
        args=tuple(args),
        kwargs=dict(kwargs or {}),
        catch_up=catch_up,
        queue=queue,
    )


class DeclaredSchedules:
    """The schedules of `@workflow(schedule=...)`, by name (the last one wins).

    Process-wide, as the workflow registry is: decorators run at import, and
    every worker that imports a scheduled workflow starts its ticks.
    """

    def __init__(self) -> None:
        self._by_name: dict[str, Schedule] = {}

    def add(self, schedule: Schedule) -> None:
        """Declare a schedule (replacing one of the same name)."""
        self._by_name[schedule.name] = schedule

    def of(self, workflows: list[str] | None) -> list[Schedule]:
        """The schedules of these workflow names (every one if None)."""
        return [
            s
            for _, s in sorted(self._by_name.items())
            if workflows is None or s.workflow.name in workflows
        ]


DECLARED = DeclaredSchedules()


def run_id_for(name: str, tick_ms: int) -> str:
    """`sched:<name>:<tick as UTC ISO 8601>`, e.g. `sched:digest:2026-11-28T04:15:00Z`."""
    moment = datetime.fromtimestamp(tick_ms / 1000, tz=UTC)
    stamp = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if tick_ms % 1000:
        stamp += f".{tick_ms % 1000:03d}"
    return f"sched:{name}:{stamp}Z"


@dataclass(frozen=True, slots=True, kw_only=True)
class Due:
    """What to do about a schedule's ticks now (`due`)."""

    latest: int | None
    """The newest due tick, started whatever the policy; None: nothing is due."""
    caught_up: tuple[int, ...] = ()
    """Missed ticks started late, oldest first (at most `catch_up`)."""
    skipped: int = 0
    """Missed ticks not started (counted up to `SKIPS_COUNTED`)."""

    @property
    def ticks(self) -> tuple[int, ...]:
        """Every tick to start, oldest first."""
        return self.caught_up if self.latest is None else (*self.caught_up, self.latest)


def due(cron: Cron, *, after_ms: int, now_ms: int, catch_up: int) -> Due:
    """The ticks in `(after_ms, now_ms]` to start, and how many to skip.

    The newest is started; of the older ones (missed: their interval passed with
    no worker to start them) the newest `catch_up` are started late and the rest
    skipped.
    """
    ticks, more = cron.latest(
        now_ms, after_ms=after_ms, limit=catch_up + 1 + SKIPS_COUNTED
    )
    if not ticks:
        return Due(latest=None)
    missed = ticks[1:]
    return Due(
        latest=ticks[0],
        caught_up=tuple(reversed(missed[:catch_up])),
        skipped=max(0, len(missed) - catch_up) + (1 if more else 0),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleView:
    """A schedule as `Engine.schedules()` and the CLI show it."""

    record: ScheduleRecord
    next_ticks_ms: tuple[int, ...]
    """Its next fire times (empty while paused, or if its cron cannot be read)."""

    @property
    def name(self) -> str:
        """The schedule's name."""
        return self.record.name


def view(record: ScheduleRecord, *, now_ms: int, count: int = 3) -> ScheduleView:
    """The record with its next `count` fire times."""
    if record.paused:
        return ScheduleView(record=record, next_ticks_ms=())
    try:
        upcoming = Cron(record.cron, record.tz).upcoming(now_ms, count)
    except ValueError:  # stored by another version's code; shown, not fired
        upcoming = []
    return ScheduleView(record=record, next_ticks_ms=tuple(upcoming))


class Scheduler:
    """Starts the due ticks of some schedules: what a worker does between claims.

    Args:
        schedules: The schedules this worker fires (their code is in this process).
        store: Where their state is kept.
        now_ms: The engine's clock.
        enqueue: Records a schedule's run for a tick; whether this call created it
            (False: another worker had).
        observer: Told of each tick and skip (metrics, traces), or None.
    """

    def __init__(
        self,
        schedules: Sequence[Schedule],
        *,
        store: KeepsSchedules,
        now_ms: Callable[[], int],
        enqueue: Callable[[Schedule, int], Awaitable[bool]],
        observer: Observer | None,
    ) -> None:
        self.schedules = {s.name: s for s in schedules}
        self._store, self._now_ms, self._enqueue = store, now_ms, enqueue
        self._observer = observer
        self._saved = False
        self.next_check_ms = 0
        """When a tick may next be due: `fire_due` does nothing before it."""

    async def fire_due(self) -> int:
        """Start every schedule's due ticks; how many runs this call created."""
        now_ms = self._now_ms()
        if now_ms < self.next_check_ms:
            return 0
        if not self._saved:  # the definitions, as this worker's code has them
            for schedule in self.schedules.values():
                await self._store.save_schedule(schedule.record(now_ms))
            self._saved = True
        stored = {r.name: r for r in await self._store.list_schedules()}
        created = 0
        for name, schedule in self.schedules.items():
            record = stored.get(name)
            if record is None:  # deleted under us: save it again next time
                self._saved = False
                continue
            if not record.paused:
                created += await self._fire(schedule, record, now_ms)
        self.next_check_ms = min(
            (s.cron.next_after(now_ms) for s in self.schedules.values()),
            default=now_ms + 60_000,
        )
        return created

    async def _fire(
        self, schedule: Schedule, record: ScheduleRecord, now_ms: int
    ) -> int:
        after = (
            record.created_at_ms if record.last_tick_ms is None else record.last_tick_ms
        )
        decision = due(
            schedule.cron, after_ms=after, now_ms=now_ms, catch_up=schedule.catch_up
        )
        observer = self._observer
        created = 0
        # each run is recorded before the mark: a crash between them leaves the
        # mark behind, and the next worker's create_run finds the runs recorded
        for tick in decision.ticks:
            scope = None
            if observer is not None:
                scope = observer.tick_started(
                    schedule.name, tick, late=tick != decision.latest
                )
            error: BaseException | None = None
            made = False
            try:
                made = await self._enqueue(schedule, tick)
            except BaseException as exc:
                error = exc
                raise
            finally:
                if observer is not None:
                    observer.tick_ended(
                        scope, run_id=schedule.run_id(tick), created=made, error=error
                    )
            created += made
        if decision.latest is not None:
            moved = await self._store.mark_schedule_ticked(
                schedule.name, tick_ms=decision.latest, now_ms=now_ms
            )
            # the worker whose mark moved the schedule on counts its ticks: once
            if moved and observer is not None:
                observer.ticks_counted(
                    schedule.name,
                    fired=1,
                    caught_up=len(decision.caught_up),
                    skipped=decision.skipped,
                )
        return created
