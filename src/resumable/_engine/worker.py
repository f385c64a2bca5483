"""Workers: claim runnable runs from the store and drive them to their end.

Runnable means queued (by `Engine.enqueue`, or woken by `send`), running with an
expired lease (its process died), or sleeping/waiting past its deadline. Claims
are leases, so two workers never execute one run; queue limits are enforced by
the store across every worker that shares it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from resumable._engine.clock import Clock
from resumable._engine.schedules import Scheduler
from resumable._engine.specs import WORKFLOWS
from resumable.errors import ResumableError
from resumable.stores.capabilities import Capabilities
from resumable.stores.protocol import Lease, QueuePolicy, RunStore

log = logging.getLogger("resumable.worker")


class Engine(Protocol):
    """What a worker needs of its `resumable.Engine` (which is one)."""

    store: RunStore
    owner: str
    clock: Clock
    capabilities: Capabilities
    """What the store offers beyond RunStore (the worker waits on its wake-up)."""

    @property
    def lease_ttl_s(self) -> float:
        """How long a lease lasts without a heartbeat."""
        ...

    async def _resume_claimed(self, run_id: str, *, taken_over: bool = False) -> Any:
        """Drive a run this worker claimed to its end (the Engine's, for its workers)."""
        ...

    def _scheduler(self, workflows: list[str] | None) -> Scheduler | None:
        """What starts the due ticks of the schedules of these workflows, if any."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Queue:
    """Limits on a queue's runs, enforced across every worker sharing the store."""

    concurrency: int | None = None
    """At most this many of the queue's runs execute at once."""
    rate: int | None = None
    """At most this many of the queue's runs start per `per` seconds."""
    per: float = 60.0
    """The rate's period in seconds."""

    def policy(self) -> QueuePolicy:
        """The store's form of this queue's limits."""
        return QueuePolicy(
            concurrency=self.concurrency, rate=self.rate, period_ms=int(self.per * 1000)
        )


class Worker:
    """Claims and executes runnable runs until stopped.

    Args:
        engine: The engine (and so the store) to work for.
        concurrency: How many runs this worker executes at once.
        queues: Limits per queue name, shared by every worker of the fleet.
        workflows: Names of the workflows to run (default: every registered one).
        poll_s: How often to look for work when no notification arrives.
        versions: Claim only runs that started on one of these workflow versions
            (`@workflow(version=)`), so old and new workers drain a store side by
            side during a rolling deploy. Default: any run, versioned or not.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        concurrency: int = 8,
        queues: Mapping[str, Queue] | None = None,
        workflows: list[str] | None = None,
        poll_s: float = 0.5,
        versions: list[str] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.engine, self.concurrency, self.poll_s = engine, concurrency, poll_s
        self.queues = {name: queue.policy() for name, queue in (queues or {}).items()}
        self._workflows = workflows
        self.versions = None if versions is None else tuple(versions)
        self._active: set[asyncio.Task[Any]] = set()
        self._finished = asyncio.Event()
        self.completed = 0
        self._scheduler = engine._scheduler(workflows)

    async def run(
        self,
        *,
        stop: asyncio.Event | None = None,
        until: Callable[[Worker], bool] | None = None,
    ) -> None:
        """Work until `stop` is set (or `until(worker)` is true); then drain.

        Runs still executing when it stops are cancelled; their leases are released
        so another worker resumes them at once.
        """
        stop = stop or asyncio.Event()
        try:
            while not stop.is_set() and not (until is not None and until(self)):
                if self._scheduler is not None:
                    await self._fire_ticks(self._scheduler)
                claimed = await self._claim()
                if not claimed:
                    await self._idle(stop)
        finally:
            for task in self._active:
                task.cancel()
            for task in list(self._active):
                with contextlib.suppress(BaseException):
                    await task

    async def _fire_ticks(self, scheduler: Scheduler) -> None:
        """Record the runs of the due ticks; they are claimed like any queued run."""
        try:
            await scheduler.fire_due()
        except ResumableError as exc:  # the store is away: try again after a poll
            log.warning("schedules not checked: %s", exc)
            scheduler.next_check_ms = self.engine.clock.now_ms() + int(
                self.poll_s * 1000
            )

    async def _claim(self) -> int:
        free = self.concurrency - len(self._active)
        if free <= 0:
            return 0
        engine = self.engine
        names = (
            self._workflows if self._workflows is not None else WORKFLOWS.claimable()
        )
        leases = await engine.store.claim_runs(
            owner=engine.owner,
            now_ms=engine.clock.now_ms(),
            ttl_ms=int(engine.lease_ttl_s * 1000),
            limit=free,
            workflows=names,
            queues=self.queues,
            versions=self.versions,
        )
        for lease in leases:
            task = asyncio.ensure_future(self._execute(lease))
            self._active.add(task)
            task.add_done_callback(self._done)
        return len(leases)

    async def _execute(self, lease: Lease) -> None:
        run_id = lease.run_id
        # a line as a run is claimed, at INFO (the CLI's default for `resumable
        # worker`), as each execution's end is (runs._finish): what the worker does
        taken = "" if lease.taken_from is None else f" from {lease.taken_from}"
        log.info("run %r claimed%s", run_id, taken, extra={"run_id": run_id})
        try:
            await self.engine._resume_claimed(
                run_id, taken_over=lease.taken_from is not None
            )
        except ResumableError as exc:  # the run's own outcome is recorded in the store
            log.info("run %s ended: %s", run_id, exc)
        except Exception:  # a bug must not kill the worker; the lease lapses and
            log.exception("run %s crashed its worker task", run_id)  # another retries

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._active.discard(task)
        self.completed += 1
        self._finished.set()

    async def _idle(self, stop: asyncio.Event) -> None:
        """Sleep until work may be there.

        That is a store notification, a finished run, a stop, or the poll interval
        (the fallback where the store cannot notify).
        """
        self._finished.clear()
        nap_s = self.poll_s
        if self._scheduler is not None:  # wake for the next tick, not after it
            due_s = (self._scheduler.next_check_ms - self.engine.clock.now_ms()) / 1000
            nap_s = max(0.0, min(nap_s, due_s))
        notify = self.engine.capabilities.wake_up
        nap: Awaitable[Any] = (
            notify.wait_for_work(nap_s) if notify is not None else asyncio.sleep(nap_s)
        )
        waiters: list[asyncio.Future[Any]] = [
            asyncio.ensure_future(stop.wait()),
            asyncio.ensure_future(self._finished.wait()),
            asyncio.ensure_future(nap),
        ]
        try:
            await asyncio.wait(
                waiters, timeout=nap_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for waiter in waiters:
                waiter.cancel()
