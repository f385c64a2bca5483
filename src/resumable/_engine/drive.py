"""The drive loop: record a run, then execute it under a lease until it ends.

One `Driver` per Engine. It keeps one task per run it drives (a second caller of
the same run awaits the first's task), waits while a run sleeps or waits for
input (woken at once by a `send` through the same engine), takes the lease,
executes (`runs.execute_run`), and gives the lease up when an execution stops
without ending the run: the run is queued again, for this or any process to resume
at once (after Ctrl-C, `stop`, a worker's stop or a store error).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

from resumable._engine import lease as leases
from resumable._engine.clock import Clock
from resumable._engine.context import Observer, Runtime
from resumable._engine.ids import check_id, new_run_id
from resumable._engine.journal import get_run, refuse_archived
from resumable._engine.outcome import workflow_failed
from resumable._engine.runs import execute_run, is_retryable
from resumable._engine.specs import WORKFLOWS, WorkflowSpec
from resumable._engine.waits import Suspend
from resumable.errors import (
    CheckpointWriteError,
    InputRejected,
    LeaseLost,
    RunCancelled,
    RunConflict,
    StoreError,
    WorkflowNotRegistered,
)
from resumable.pricing import PriceTable
from resumable.serde import Serde
from resumable.stores.capabilities import (
    KeepsFeeds,
    StreamsPayloads,
    writes_locally,
)
from resumable.stores.places import input_place, run_place
from resumable.stores.protocol import (
    InputRecord,
    Lease,
    RunRecord,
    RunStatus,
    RunStore,
    RunUpdate,
)
from resumable.stores.step_cache import SupportsStepCache

_POLL_S = 0.25
_WAIT_POLL_S = 1.0  # how often a suspended run is re-read when no local send wakes it


def _way_out(runtime: Runtime) -> float:
    """When the store calls on the way out of an execution are given up (loop time).

    They are best effort (a lease left behind expires by itself), and the store may
    be what stopped the execution: hung, after `store_retry_s` spent on a write.
    They get what a lease renewal gets before it is late, a third of the TTL, never
    more than `store_retry_s`, so `run()` ends soon after the failed write does.
    """
    bound_s = min(runtime.store_retry_s, runtime.lease_ttl_s / 3)
    return asyncio.get_running_loop().time() + bound_s


class Driver:
    """Creates runs and drives them to their end for one Engine."""

    def __init__(
        self,
        *,
        store: RunStore,
        serde: Serde,
        clock: Clock,
        owner: str,
        lease_ttl_s: float,
        store_retry_s: float,
        prices: PriceTable,
        observer: Observer | None,
        metering: bool = True,
        uploads: StreamsPayloads | None = None,
        step_cache: SupportsStepCache | None = None,
        feeds: KeepsFeeds | None = None,
    ) -> None:
        self.runtime = Runtime(
            store=store,
            serde=serde,
            clock=clock,
            owner=owner,
            lease_ttl_s=lease_ttl_s,
            store_retry_s=store_retry_s,
            run_child=self.run_child,
            prices=prices,
            observer=observer,
            metering=metering,
            uploads=uploads,
            step_cache=step_cache,
            feeds=feeds,
            times_out_writes=not writes_locally(store),
        )
        self._active: dict[str, asyncio.Task[Any]] = {}
        self._wakeups: dict[str, asyncio.Event] = {}

    async def run_child(
        self,
        spec: WorkflowSpec,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        run_id: str,
        parent_id: str,
        retry_failed: bool,
    ) -> Any:
        """Start or resume a child run to its end (`Runtime.run_child`)."""
        run = await self.create(spec, args, kwargs, run_id=run_id, parent_id=parent_id)
        return await self.drive(spec, run, retry_failed=retry_failed)

    async def resume(self, run_id: str) -> Any:
        """`Engine.resume`: drive a run by id, failed ones included."""
        run = await get_run(self.runtime.store, run_id)
        spec = WORKFLOWS.get(run.workflow)
        if spec is None:
            raise WorkflowNotRegistered(
                run_id=run_id,
                workflow=run.workflow,
                hint="this process; import the module that defines it (CLI: --app MODULE)",
            )
        return await self.drive(spec, run, retry_failed=True)

    async def resume_claimed(self, run_id: str, *, taken_over: bool) -> Any:
        """`Worker`: drive a run this engine's worker claimed (`Engine._resume_claimed`)."""
        runtime = self.runtime
        run = await get_run(runtime.store, run_id)
        spec = WORKFLOWS.get(run.workflow)
        if spec is None:
            raise WorkflowNotRegistered(
                run_id=run_id, workflow=run.workflow, hint="this worker"
            )
        if runtime.observer is not None:
            first = run.fence == 1  # its first lease: it waited in its queue until now
            wait_s = (
                (runtime.clock.now_ms() - run.created_at_ms) / 1000 if first else None
            )
            runtime.observer.run_claimed(run, queue_wait_s=wait_s)
            if taken_over:
                runtime.observer.lease_taken_over(run_id)
        return await self.drive(spec, run, retry_failed=False, stops_with_caller=True)

    async def stop(self) -> None:
        """Stop every run this engine drives, and return once each has stopped.

        What Ctrl-C and `Engine.close` do. A run that was executing gives its lease
        up and is queued again, resumable at once elsewhere (its step in flight is
        not recorded and runs again there); one waiting for input or sleeping stays
        so in the store, for a `send` or `resume` from any process. Run before the
        store closes: a task left polling would call a closed store.
        """
        tasks = list(self._active.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def send(self, run_id: str, key: str, value: Any) -> None:
        """`Engine.send`: record the input, and wake the run if this engine drives it."""
        runtime = self.runtime
        check_id("input key", key)
        run = await get_run(runtime.store, run_id)
        if run.is_terminal:
            raise InputRejected(
                run_id=run_id,
                key=key,
                reason=f"the run has already ended ({run.status})",
            )
        accepted = await runtime.store.send_input(
            InputRecord(
                run_id=run_id,
                key=key,
                value=runtime.serde.dumps(
                    value, place=input_place(run_id, key), root="value"
                ),
                sent_at_ms=runtime.clock.now_ms(),
            )
        )
        if not accepted:
            raise InputRejected(
                run_id=run_id,
                key=key,
                reason="a value was already sent under this key; the first one sent is "
                "the one the run receives (use a new key for a new input)",
            )
        woken = self._wakeups.get(run_id)
        if woken is not None:
            woken.set()

    async def cancel(self, run_id: str) -> RunStatus:
        """`Engine.cancel`: record the cancel, and stop the run if this engine drives it."""
        runtime = self.runtime
        run = await runtime.store.cancel_run(run_id, now_ms=runtime.clock.now_ms())
        task = self._active.get(run_id)
        if task is not None and run.status == "cancelled":
            task.cancel()
        return run.status

    async def create(
        self,
        spec: WorkflowSpec,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        run_id: str | None,
        parent_id: str | None = None,
        queue: str | None = None,
        ttl: timedelta | None = None,
    ) -> RunRecord:
        """Record a queued run, or find the same call recorded already.

        Raises:
            RunConflict: the run exists for another workflow or other arguments.
        """
        runtime = self.runtime
        spec.register_types()
        run_id = check_id("run_id", run_id) if run_id is not None else new_run_id()
        if queue is not None:
            check_id("queue name", queue)
        now_ms = runtime.clock.now_ms()
        encoded = runtime.serde.dumps(
            (args, kwargs), place=run_place(run_id, "input"), root="args"
        )
        run = await runtime.store.create_run(
            RunRecord(
                run_id=run_id,
                workflow=spec.name,
                status="queued",
                input=encoded,
                created_at_ms=now_ms,
                updated_at_ms=now_ms,
                parent_id=parent_id,
                queue=queue,
                version=spec.version,
                expires_at_ms=None
                if ttl is None
                else now_ms + int(ttl.total_seconds() * 1000),
            )
        )
        if not spec.answers_to(run.workflow):
            raise RunConflict(
                run_id=run_id,
                reason=f"belongs to workflow {run.workflow!r}, not {spec.name!r}; "
                f"choose another run_id",
            )
        if runtime.observer is not None and run.created_at_ms == now_ms:
            await runtime.observer.run_created(runtime, run)
        if run.input != encoded:  # the run existed: it must be the same call
            self._check_same_call(run, args, kwargs)
        return run

    def _check_same_call(
        self, run: RunRecord, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        serde = self.runtime.serde
        recorded = serde.loads(run.input, place=run_place(run.run_id, "input"))
        if serde.fingerprint(recorded) != serde.fingerprint((args, kwargs)):
            raise RunConflict(
                run_id=run.run_id,
                reason=f"was started with other arguments; resume it with "
                f"Engine.resume({run.run_id!r}) or start a new run_id",
            )

    async def drive(
        self,
        spec: WorkflowSpec,
        run: RunRecord,
        *,
        retry_failed: bool,
        stops_with_caller: bool = False,
    ) -> Any:
        """The run's result once it ends; one task per run however many callers.

        A caller that stops waiting leaves the run going, unless `stops_with_caller`
        (a worker's claim: the run stops, its lease released, when the worker does).
        """
        task = self._active.get(run.run_id)
        if task is None:
            task = asyncio.ensure_future(
                self._until_done(spec, run, retry_failed=retry_failed)
            )
            self._active[run.run_id] = task
            task.add_done_callback(lambda done: self._forget(run.run_id, done))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if stops_with_caller:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            raise

    async def _until_done(
        self, spec: WorkflowSpec, run: RunRecord, *, retry_failed: bool
    ) -> Any:
        runtime = self.runtime
        spec.register_types()
        while True:
            if run.is_terminal:
                if run.status != "failed" or not (
                    retry_failed or is_retryable(self._failure(run))
                ):
                    return self._ended(run)
                await refuse_archived(runtime.store, run.run_id)
                await runtime.store.reopen_run(
                    run.run_id, now_ms=runtime.clock.now_ms()
                )
                retry_failed = True
            elif run.status in ("waiting", "sleeping"):
                run = await self._until_runnable(run.run_id)
                if run.is_terminal:
                    continue
            lease = await self._acquire(run)
            if lease is None:
                run = await get_run(runtime.store, run.run_id)
                continue
            try:
                # no re-read after the lease: execution uses only what never changes
                # (the run's id, input and fork lineage); its fence comes with the lease
                return await execute_run(
                    runtime, spec, run, lease, retry_failed=retry_failed
                )
            except Suspend:
                run, retry_failed = await get_run(runtime.store, run.run_id), False
                continue
            except (LeaseLost, asyncio.CancelledError):
                way_out = _way_out(runtime)
                if await self._was_cancelled(run.run_id, way_out):
                    raise RunCancelled(run_id=run.run_id) from None
                await self._release(lease, way_out)
                raise
            except BaseException:
                await self._release(lease, _way_out(runtime))
                raise

    def _forget(self, run_id: str, task: asyncio.Task[Any]) -> None:
        self._active.pop(run_id, None)
        self._wakeups.pop(run_id, None)
        if not task.cancelled():
            # every caller may have stopped waiting (a timeout of theirs); what the
            # run ended with is in the store, and must not be logged as lost
            task.exception()

    async def _until_runnable(self, run_id: str) -> RunRecord:
        """Wait while the run sleeps or waits for input.

        It ends at the run's deadline, when `send` wakes it (at once when sent
        through this engine), or when another worker takes the run.
        """
        clock = self.runtime.clock
        while True:
            run = await get_run(self.runtime.store, run_id)
            if run.status not in ("waiting", "sleeping"):
                return run
            now_ms = clock.now_ms()
            if run.wake_at_ms is not None and run.wake_at_ms <= now_ms:
                return run
            remaining_s = (
                _POLL_S if run.wake_at_ms is None else (run.wake_at_ms - now_ms) / 1000
            )
            woken = self._wakeups.setdefault(run_id, asyncio.Event())
            nap = asyncio.ensure_future(clock.sleep(min(remaining_s, _WAIT_POLL_S)))
            ring = asyncio.ensure_future(woken.wait())
            try:
                await asyncio.wait({nap, ring}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                nap.cancel()
                ring.cancel()
                woken.clear()

    def _ended(self, run: RunRecord) -> Any:
        """The recorded result of a finished run; raises its recorded failure."""
        if run.status == "cancelled":
            raise RunCancelled(run_id=run.run_id)
        if run.status == "failed":
            raise workflow_failed(run.run_id, self._failure(run))
        return self.runtime.serde.loads(
            run.output or b"", place=run_place(run.run_id, "output")
        )

    def _failure(self, run: RunRecord) -> dict[str, Any]:
        info = self.runtime.serde.loads(
            run.output or b"", place=run_place(run.run_id, "output")
        )
        return (
            info if isinstance(info, dict) else {"type": "Error", "message": str(info)}
        )

    async def _was_cancelled(self, run_id: str, way_out: float) -> bool:
        """Whether the run was cancelled; False if the store cannot say by `way_out`."""
        latest = None
        with contextlib.suppress(TimeoutError, StoreError, CheckpointWriteError):
            async with asyncio.timeout_at(way_out):
                latest = await self.runtime.store.get_run(run_id)
        return latest is not None and latest.status == "cancelled"

    async def _release(self, lease: Lease, way_out: float) -> None:
        """Queue the run again, leaseless, when an execution stops without ending it.

        After Ctrl-C, a cancellation or a store error, a restart need not wait the
        lease out, and listings show the run as resumable (queued), not running. A
        run the execution ended (failed, say) or lost is left as it is. Best effort,
        and given up at `way_out`: the lease still expires on its own if this fails
        or hangs.
        """
        runtime, run_id = self.runtime, lease.run_id
        with contextlib.suppress(BaseException):
            async with asyncio.timeout_at(way_out):
                run = await runtime.store.get_run(run_id)
                if (
                    run is not None
                    and run.status == "running"
                    and run.fence == lease.fence
                ):
                    update = RunUpdate(status="queued", now_ms=runtime.clock.now_ms())
                    await runtime.store.update_run(
                        run_id, fence=lease.fence, update=update
                    )

    async def _acquire(self, run: RunRecord) -> Lease | None:
        """Take the run's lease, waiting out a live owner; None if it ended meanwhile."""
        runtime = self.runtime
        ttl_ms = int(runtime.lease_ttl_s * 1000)
        take_over: str | None = None
        while True:
            lease = await runtime.store.acquire_lease(
                run.run_id,
                owner=runtime.owner,
                now_ms=runtime.clock.now_ms(),
                ttl_ms=ttl_ms,
                take_over=take_over,
            )
            if lease is not None:
                if lease.taken_from is not None and runtime.observer is not None:
                    runtime.observer.lease_taken_over(run.run_id)
                return lease
            current = await get_run(runtime.store, run.run_id)
            if current.is_terminal:
                return None
            if leases.is_dead_local_owner(current.lease_owner):
                take_over = current.lease_owner
                continue
            wait_ms = current.lease_expires_at_ms - runtime.clock.now_ms()
            await asyncio.sleep(min(_POLL_S, max(wait_ms, 1) / 1000))
