"""Engine: the facade users hold. Each method delegates to one module of this layer."""

from __future__ import annotations

import asyncio
import os
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Mapping,
    Sequence,
)
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, NoReturn, Self, TypeVar, overload

from resumable._engine import lease as leases
from resumable._engine.bridge import Bridge
from resumable._engine.check import CheckReport, check_runs
from resumable._engine.clock import Clock, SystemClock
from resumable._engine.context import Observer
from resumable._engine.conversation import Conversation
from resumable._engine.drive import Driver
from resumable._engine.events import Event, latest, read_events, watch_events
from resumable._engine.export import (
    InputView,
    JournalPage,
    StepExport,
    export_query,
    export_steps,
    input_views,
    journal_page,
)
from resumable._engine.feed import POLL_S
from resumable._engine.forks import fork_run
from resumable._engine.history import StepView, run_history
from resumable._engine.journal import get_run
from resumable._engine.ledger import Ledger, read_ledger
from resumable._engine.listing import (
    RunCounts,
    RunFilter,
    RunPage,
    RunView,
    ThreadPage,
    count_runs,
    list_runs,
    runs_page,
    threads_page,
)
from resumable._engine.maintenance import (
    archive,
    collect_garbage,
    unarchive,
    unarchive_thread,
)
from resumable._engine.metering import metering_by_default
from resumable._engine.observe import combine, report_commit_batches
from resumable._engine.rekey import RekeyReport, rekey
from resumable._engine.retention import GcReport
from resumable._engine.schedules import (
    DECLARED,
    Schedule,
    Scheduler,
    ScheduleView,
    declare,
    view,
)
from resumable._engine.snapshots import Checkpoint
from resumable._engine.specs import TYPES, workflow_spec
from resumable._engine.states import EVERY_STATE, MISSING, EveryState, States
from resumable._engine.streams import StreamEvent, read_stream
from resumable._engine.waits import WAIT_PREFIX
from resumable._engine.worker import Queue, Worker
from resumable.errors import CapabilityMissing, RunNotFound, ScheduleNotFound
from resumable.pricing import PriceTable
from resumable.serde import KeyRing, Serde, TypeRegistry
from resumable.stores import DEFAULT_URL, create_store, redact
from resumable.stores.archive import Archived
from resumable.stores.blobs import BlobStore, open_blobs
from resumable.stores.capabilities import Capabilities
from resumable.stores.offload import DEFAULT_OFFLOAD_OVER, OffloadStore
from resumable.stores.protocol import (
    RunRecord,
    RunStatus,
    RunStore,
)

R = TypeVar("R")


class RunHandle:
    """A run started in the background by `Engine.start`."""

    def __init__(self, engine: Engine, run_id: str, task: asyncio.Task[Any]) -> None:
        self.run_id = run_id
        self._engine, self._task = engine, task

    async def status(self) -> RunStatus:
        """The run's status as the store records it now."""
        run = await self._engine.store.get_run(self.run_id)
        if run is None:
            raise RunNotFound(run_id=self.run_id)
        return run.status

    async def result(self) -> Any:
        """Wait for the run to end; its result, or its error (WorkflowFailed, ...).

        CancelledError once the engine has closed before the run ended: the run
        is then as the store recorded it (waiting, say), for `resume` to continue.
        """
        return await asyncio.shield(self._task)

    async def cancel(self) -> None:
        """Cancel the run (see `Engine.cancel`)."""
        await self._engine.cancel(self.run_id)


def _taken(
    store: str | RunStore, blobs: str | BlobStore | None, offload_over: int
) -> RunStore:
    """The store an Engine uses: made from a URL, its payloads offloaded to `blobs`.

    Raises:
        CapabilityMissing: `blobs` with a store that is not a full `Store`.
    """
    taken = create_store(store) if isinstance(store, str) else store
    if blobs is None:
        return taken
    return OffloadStore(
        Capabilities.of(taken).full_store(taken, call="Engine(blobs=...)"),
        open_blobs(blobs) if isinstance(blobs, str) else blobs,
        offload_over=offload_over,
    )


def _key_ring(encryption_key: KeyRing | str | None) -> KeyRing | None:
    """The keys payloads are sealed with: given, or $RESUMABLE_ENCRYPTION_KEY."""
    if encryption_key is None:
        encryption_key = os.environ.get("RESUMABLE_ENCRYPTION_KEY") or None
    if isinstance(encryption_key, str):
        return KeyRing.from_env(encryption_key)
    return encryption_key


class Engine:
    """Starts, resumes and inspects durable runs on one store.

    Args:
        store: A store URL (`sqlite:///path.db`, `memory://`, `postgresql://...`,
            `redis://...`) or a store object: a full `Store`, or any `RunStore`,
            whose missing parts raise CapabilityMissing when used (see
            docs/stores.md). Default: `./.resumable/state.db`.
        encryption_key: Encrypt every payload with AES-256-GCM: a KeyRing, or the
            RESUMABLE_ENCRYPTION_KEY format `id:base64key,...` (first is current).
            Default: $RESUMABLE_ENCRYPTION_KEY if set.
        lease_ttl_s: How long a run's lease lasts without a heartbeat; a crashed
            worker's runs are taken over after at most this long.
        store_retry_s: How long a run's store write may take, retries included,
            before the run stops with CheckpointWriteError: on a store that waits on
            a server, an attempt that hangs (a pool waiting for a server that is
            gone) is cut off at this too; the embedded stores' writes
            (`LocalWrites`) are not, and SQLite's wait for a lock is bounded by its
            `busy_timeout_ms`.
        clock: Where time comes from (tests pass `resumable.testing.FakeClock`).
        prices: Model prices for the ledger and dollar budgets (default: the
            built-in table, `resumable.pricing`).
        max_payload_bytes: A step result, input or state larger than this (encoded)
            is refused with SerializationError naming the run, step and size; a
            stored payload that is, or decompresses to, more is refused on read
            with CorruptCheckpointError before anything that large is allocated.
        types: Types this engine may decode besides those the program declared
            (`resumable.register()` and step and workflow annotations). They are
            this engine's own: another Engine in the process does not see them.
        observers: What is told about executions, steps and store writes:
            `resumable.observability.Tracing()` (OpenTelemetry spans) and
            `Metrics()` (Prometheus), or your own `Observer`. None: no cost.
        blobs: Offload payloads sealed to more than `offload_over` bytes to this
            object store (`s3://bucket/prefix`, `file:///folder`, or a
            `resumable.stores.blobs.BlobStore`), uploaded before the row that
            references them commits; the same as `?blobs=` on the store URL.
        offload_over: The offload threshold in bytes (default 256 KiB).
        metering: Meter every call a step makes through the `openai` and
            `anthropic` SDKs into the ledger, whatever the step returns (see
            docs/guide/cost.md). Default: on, unless RESUMABLE_METERING=0.
    """

    def __init__(
        self,
        store: str | RunStore = DEFAULT_URL,
        *,
        encryption_key: KeyRing | str | None = None,
        lease_ttl_s: float = 5.0,
        store_retry_s: float = 30.0,
        clock: Clock | None = None,
        prices: PriceTable | None = None,
        max_payload_bytes: int | None = 64 * 1024 * 1024,
        types: Iterable[type] = (),
        observers: Iterable[Observer] = (),
        blobs: str | BlobStore | None = None,
        offload_over: int = DEFAULT_OFFLOAD_OVER,
        metering: bool | None = None,
    ) -> None:
        self.store: RunStore = _taken(store, blobs, offload_over)
        """The store, as given or made from the URL: a full `Store`, or a
        `RunStore` whose missing parts `capabilities` names."""
        self.capabilities = capabilities = Capabilities.of(self.store)
        """What the store offers beyond RunStore, checked once, here."""
        keys = _key_ring(encryption_key)
        registry = TypeRegistry(parent=TYPES)
        registry.register(*types)
        self.serde = Serde(registry, keys=keys, max_bytes=max_payload_bytes)
        streams = capabilities.payload_streams
        if streams is not None:
            streams.stream_with(self.serde.reader)
        self._encrypted = keys is not None
        self.clock: Clock = clock or SystemClock()
        self.owner = leases.new_owner()
        self._driver = Driver(
            store=self.store,
            serde=self.serde,
            clock=self.clock,
            owner=self.owner,
            lease_ttl_s=lease_ttl_s,
            store_retry_s=store_retry_s,
            prices=prices or PriceTable(),
            observer=combine(list(observers)),
            metering=metering_by_default() if metering is None else metering,
            uploads=streams if streams is not None and streams.streams else None,
            step_cache=capabilities.step_cache,
            feeds=capabilities.feeds,
        )
        self._runtime = self._driver.runtime
        report_commit_batches(self._runtime, capabilities.commit_batches)
        self._states = (
            States(
                capabilities.snapshot_part(self.store, call="Engine"),
                self.serde,
                self.clock,
                packing=capabilities.packs,
            )
            if capabilities.snapshots
            else None
        )
        """Thread states; None on a store without `SnapshotStore`."""
        self._bridge = Bridge()
        self._schedules: dict[str, Schedule] = {}
        """Schedules `schedule()` declared: this engine's workers start them."""

    def __repr__(self) -> str:
        return f"Engine({redact(self.store.url)!r})"

    # --- running ------------------------------------------------------------------
    @overload
    async def run(
        self,
        wf: Callable[..., Coroutine[Any, Any, R]],
        /,
        *args: Any,
        run_id: str | None = None,
        ttl: timedelta | None = None,
        **kwargs: Any,
    ) -> R: ...
    @overload
    async def run(
        self,
        wf: Callable[..., R],
        /,
        *args: Any,
        run_id: str | None = None,
        ttl: timedelta | None = None,
        **kwargs: Any,
    ) -> R: ...
    async def run(
        self,
        wf: Callable[..., Any],
        /,
        *args: Any,
        run_id: str | None = None,
        ttl: timedelta | None = None,
        **kwargs: Any,
    ) -> Any:
        """Start the run, or resume it if `run_id` exists, and return its result.

        A finished run returns its recorded result without executing anything. A
        failed run re-raises WorkflowFailed, unless a step caused the failure: then
        running it again retries that step (steps that succeeded replay).

        Raises:
            WorkflowFailed: the run ended with an error.
            RunCancelled: the run was cancelled.
            NonDeterminismError: the code calls different steps than the run recorded.

        `run_id` and `ttl` (how long after it starts the run may be deleted by
        `gc` once finished) are the engine's; other keyword arguments go to the
        workflow.
            CheckpointWriteError: the store stopped taking writes; resume later.
        """
        spec = workflow_spec(wf)
        run = await self._driver.create(spec, args, kwargs, run_id=run_id, ttl=ttl)
        return await self._driver.drive(spec, run, retry_failed=False)

    @overload
    def run_sync(
        self,
        wf: Callable[..., Coroutine[Any, Any, R]],
        /,
        *args: Any,
        run_id: str | None = None,
        ttl: timedelta | None = None,
        **kwargs: Any,
    ) -> R: ...
    @overload
    def run_sync(
        self,
        wf: Callable[..., R],
        /,
        *args: Any,
        run_id: str | None = None,
        ttl: timedelta | None = None,
        **kwargs: Any,
    ) -> R: ...
    def run_sync(
        self,
        wf: Callable[..., Any],
        /,
        *args: Any,
        run_id: str | None = None,
        ttl: timedelta | None = None,
        **kwargs: Any,
    ) -> Any:
        """`run` for synchronous code: blocks until the run ends.

        Ctrl-C (KeyboardInterrupt) stops the runs this engine drives and releases
        their leases before it propagates, as `asyncio.run(engine.run(...))` does.
        """
        try:
            return self._bridge.run(
                self.run(wf, *args, run_id=run_id, ttl=ttl, **kwargs)
            )
        except KeyboardInterrupt:
            self._bridge.run(self._driver.stop())
            raise

    async def fork(
        self,
        source: str,
        /,
        *,
        at_step: int,
        run_id: str | None = None,
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> str:
        """Create a run that shares the first `at_step` steps of `source`.

        The new run replays those steps from the original's journal (shared, not
        copied) and executes from step `at_step + 1` with the current code,
        optionally with new workflow arguments. The original is never modified.
        Run the fork with `resume(new_id)` (or `run(wf, *args, run_id=new_id)`).

        Args:
            source: The run to fork.
            at_step: The last step the fork shares, numbered as `history()` and
                `resumable show` number them (0: none); at most the last step.
            run_id: The new run's id (default: generated).
            args: New workflow arguments (default: the original's).
            kwargs: New keyword arguments (default: the original's).

        Returns:
            The new run's id.

        Raises:
            RunConflict: `at_step` is past the last step, or `run_id` exists.
        """
        return await fork_run(
            self._runtime,
            source,
            at_step=at_step,
            run_id=run_id,
            args=args,
            kwargs=kwargs,
        )

    async def rerun(self, source: str, /, *, run_id: str | None = None) -> str:
        """Run `source`'s workflow again, with its input, on today's code, to its end.

        A new run (recorded as a fork of `source` at step 0: it shares no step);
        every step declared with `@step(cache=...)` whose key matches an entry
        (same code version and arguments) is served from the cache instead of
        executing, so changing one prompt pays for the calls it changes only.

        Returns:
            The new run's id (its result: `await resume(id)` returns it again).

        Raises:
            WorkflowFailed: the new run failed (as `resume` raises it).
        """
        new_id = await self.fork(source, at_step=0, run_id=run_id)
        await self.resume(new_id)
        return new_id

    async def clear_cache(
        self, *, step: str | None = None, workflow: str | None = None
    ) -> int:
        """Delete step cache entries: of `step`, of `workflow`, or all; how many.

        Raises:
            CapabilityMissing: the store keeps no step cache (`SupportsStepCache`).
        """
        index = self.capabilities.step_cache
        if index is None:
            raise CapabilityMissing(
                store=self.store.url, capability="SupportsStepCache", call="clear_cache"
            )
        return await index.clear_cache(step=step, workflow=workflow)

    async def start(
        self,
        wf: Callable[..., Awaitable[Any]] | Callable[..., Any],
        /,
        *args: Any,
        run_id: str | None = None,
        ttl: timedelta | None = None,
        **kwargs: Any,
    ) -> RunHandle:
        """Record the run and execute it in the background; returns at once."""
        spec = workflow_spec(wf)
        run = await self._driver.create(spec, args, kwargs, run_id=run_id, ttl=ttl)
        task = asyncio.ensure_future(self._driver.drive(spec, run, retry_failed=False))
        return RunHandle(self, run.run_id, task)

    async def enqueue(
        self,
        wf: Callable[..., Any],
        /,
        *args: Any,
        queue: str = "default",
        run_id: str | None = None,
        ttl: timedelta | None = None,
        **kwargs: Any,
    ) -> str:
        """Record a run for a worker to execute; returns its run_id at once.

        Enqueueing a run_id that exists already changes nothing (it is idempotent),
        as long as the arguments are the same.
        """
        spec = workflow_spec(wf)
        run = await self._driver.create(
            spec, args, kwargs, run_id=run_id, queue=queue, ttl=ttl
        )
        return run.run_id

    def schedule(
        self,
        wf: Callable[..., Any],
        cron: str,
        /,
        *,
        tz: str = "UTC",
        name: str | None = None,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        catch_up: int = 0,
        queue: str = "default",
    ) -> Schedule:
        """Start `wf(*args, **kwargs)` at every tick of `cron`, in this engine's workers.

        Each tick is one run, `sched:<name>:<UTC tick>`, however many workers
        share the store. `@workflow(schedule=...)` declares one in the code
        instead, for every worker that imports it.

        Args:
            wf: A `@workflow`.
            cron: Five cron fields, or six with seconds last (croniter's format).
            tz: The IANA time zone the fields are read in.
            name: The schedule's name (default: the workflow's).
            args: Positional arguments of every run.
            kwargs: Keyword arguments of every run.
            catch_up: After downtime, start at most this many missed ticks besides
                the latest (0: skip them).
            queue: The queue its runs are enqueued on.

        Raises:
            ScheduleInvalid: the cron expression or the time zone cannot be read.
            ImportError: croniter is missing: `pip install 'resumable[schedule]'`.
        """
        declared = declare(
            workflow_spec(wf),
            cron,
            tz=tz,
            name=name,
            args=args,
            kwargs=kwargs,
            catch_up=catch_up,
            queue=queue,
        )
        self._schedules[declared.name] = declared
        return declared

    async def schedules(self) -> list[ScheduleView]:
        """Every schedule in the store, with its next fire times."""
        store = self.capabilities.schedule_part(self.store, call="Engine.schedules")
        now_ms = self.clock.now_ms()
        return [view(r, now_ms=now_ms) for r in await store.list_schedules()]

    async def pause_schedule(self, name: str) -> ScheduleView:
        """Stop starting a schedule's ticks, in every worker, until resumed.

        Raises:
            ScheduleNotFound: no schedule of that name is in the store.
        """
        return await self._set_paused(name, paused=True)

    async def resume_schedule(self, name: str) -> ScheduleView:
        """Start a paused schedule's ticks again, from the next one on.

        The ticks that fell due while it was paused are passed over, not caught up.

        Raises:
            ScheduleNotFound: no schedule of that name is in the store.
        """
        return await self._set_paused(name, paused=False)

    async def _set_paused(self, name: str, *, paused: bool) -> ScheduleView:
        store = self.capabilities.schedule_part(
            self.store,
            call="Engine.pause_schedule" if paused else "Engine.resume_schedule",
        )
        now_ms = self.clock.now_ms()
        record = await store.set_schedule_paused(
            name, paused=paused, through_ms=None if paused else now_ms, now_ms=now_ms
        )
        if record is None:
            raise ScheduleNotFound(schedule=name)
        return view(record, now_ms=now_ms)

    def worker(
        self,
        *,
        concurrency: int = 8,
        queues: Mapping[str, Queue] | None = None,
        workflows: list[str] | None = None,
        poll_s: float = 0.5,
        versions: list[str] | None = None,
    ) -> Worker:
        """A worker that claims this store's runnable runs: `await engine.worker().run()`.

        See `Worker` for the arguments.
        """
        return Worker(
            self,
            concurrency=concurrency,
            queues=queues,
            workflows=workflows,
            poll_s=poll_s,
            versions=versions,
        )

    @property
    def lease_ttl_s(self) -> float:
        """How long a lease lasts without a heartbeat."""
        return self._runtime.lease_ttl_s

    async def resume(self, run_id: str) -> Any:
        """Resume a run by id, finding its workflow by the name it recorded.

        Unlike `run`, this also re-executes a run that failed in the workflow's own
        code (after you fixed it); steps that succeeded replay.
        """
        return await self._driver.resume(run_id)

    async def send(self, run_id: str, key: str, value: Any) -> None:
        """Deliver input to a run; `wait_for(key)` in the run returns it.

        Each key takes one value: the first one sent is the one the run receives,
        and a later send to the same key is refused, so a retried `send` can never
        change what a run already acted on. A value may be sent before the run
        reaches its `wait_for`.

        Raises:
            RunNotFound: no run has that id.
            InputRejected: the run has ended, or the key already holds a value.
        """
        await self._driver.send(run_id, key, value)

    async def cancel(self, run_id: str) -> RunStatus:
        """Cancel a run: it stops before its next step and is never resumed.

        Returns the run's status afterwards ("cancelled", or how it had already ended).
        """
        return await self._driver.cancel(run_id)

    # --- thread states ------------------------------------------------------------
    async def save_state(
        self,
        thread_id: str,
        state: Any,
        *,
        label: str | None = None,
        metadata: Any = None,
        parent: str | None = None,
        namespace: str = "",
        checkpoint_id: str | None = None,
    ) -> Checkpoint:
        """Save a version of a thread's state (the manual-checkpoint pattern).

        Lists and dicts are stored element by element, content-addressed: saving a
        conversation after each turn writes only the new messages.

        Args:
            thread_id: The thread (conversation, session) the state belongs to.
            state: Any value the codec can encode.
            label: A name for this version, shown in `state_history`.
            metadata: Any encodable value kept beside the state.
            parent: The checkpoint this version follows (default: the thread's
                latest); pass an older one to branch the thread from there.
            namespace: Separates independent states of one thread (default `""`;
                a conversation saves in `"conversation"`). `load_state` reads one
                namespace (`""` unless given); `state_history` and `resumable
                show-thread` list every namespace unless given one.
            checkpoint_id: The new checkpoint's id (default: generated). Ids must
                sort in the order versions are saved (e.g. uuid6/uuid7 strings).

        Returns:
            The new checkpoint; its `metadata` is the object passed, not a copy
            decoded back (loading it gives an equal value).
        """
        states = self._states or self._no_states("save_state")
        return await states.save(
            thread_id,
            state,
            label=label,
            metadata=metadata,
            parent=parent,
            namespace=namespace,
            checkpoint_id=checkpoint_id,
        )

    async def load_state(
        self,
        thread_id: str,
        *,
        checkpoint_id: str | None = None,
        namespace: str = "",
        default: Any = MISSING,
    ) -> Any:
        """The thread's latest state, or the state at `checkpoint_id`.

        Raises:
            CheckpointNotFound: nothing was saved in `namespace` (and no
                `default` was given); the message names the namespaces the
                thread has (a conversation's saves are in "conversation").
        """
        states = self._states or self._no_states("load_state")
        return await states.load(
            thread_id, checkpoint_id=checkpoint_id, namespace=namespace, default=default
        )

    async def view_state(
        self, thread_id: str, *, checkpoint_id: str | None = None, namespace: str = ""
    ) -> Any:
        """`load_state` as a generic view: readable without the state's types.

        Plain JSON-like data naming the type of every tagged value (see
        `resumable.serde.view`); nothing is imported or constructed.

        Raises:
            CheckpointNotFound: nothing was saved there.
            CorruptCheckpointError: a stored part is damaged or missing.
        """
        states = self._states or self._no_states("view_state")
        return await states.view(
            thread_id, checkpoint_id=checkpoint_id, namespace=namespace
        )

    async def load_checkpoint(
        self, thread_id: str, *, checkpoint_id: str | None = None, namespace: str = ""
    ) -> tuple[Checkpoint, Any] | None:
        """A checkpoint (the latest, or the given one) with its state; None if absent."""
        states = self._states or self._no_states("load_checkpoint")
        return await states.load_checkpoint(
            thread_id, checkpoint_id=checkpoint_id, namespace=namespace
        )

    async def delete_thread(self, thread_id: str) -> int:
        """Delete every checkpoint of a thread (in every namespace); returns how many.

        The content chunks they used are removed by `gc` once nothing uses them.
        """
        states = self._states or self._no_states("delete_thread")
        return await states.delete_thread(thread_id)

    async def delete_states(
        self, thread_id: str, checkpoints: Iterable[str | tuple[str, str]]
    ) -> int:
        """Delete single checkpoints of a thread; returns how many existed.

        Each checkpoint is an id (in namespace "") or a `(namespace, checkpoint_id)`
        pair; ids naming no checkpoint are skipped. The others stay loadable: one
        stored as changes against a deleted checkpoint is first rewritten whole, and
        a packed one (older checkpoints are stored together) is rewritten out of its
        pack. A crash
        midway loses no kept checkpoint; calling again finishes the deletion. The
        content chunks only they used are removed by `gc`.

        Raises:
            ValueError: a namespace names the engine's packs.
            StoreError: another engine rewrote a pack meanwhile; nothing was lost,
                call again.
        """
        states = self._states or self._no_states("delete_states")
        return await states.delete(thread_id, checkpoints)

    async def state_history(
        self,
        thread_id: str,
        *,
        limit: int | None = None,
        before: str | None = None,
        namespace: str | EveryState | None = EVERY_STATE,
    ) -> list[Checkpoint]:
        """The thread's checkpoints, newest first.

        By default every state saved under the thread, whatever its namespace:
        `save_state` (namespace `""` unless given), a conversation
        (`engine.conversation(thread_id)` saves in namespace `"conversation"`) and
        LangGraph checkpoints (root and subgraphs); each `Checkpoint` names its
        `namespace`.

        Args:
            thread_id: The thread.
            limit: At most this many (newest first).
            before: Only checkpoints older than this checkpoint id.
            namespace: Only this namespace (`""` is what `save_state` uses by
                default); None: every namespace, LangGraph's pending writes too.
        """
        states = self._states or self._no_states("state_history")
        return await states.history(
            thread_id, limit=limit, before=before, namespace=namespace
        )

    async def threads(
        self, *, prefix: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> ThreadPage:
        """One page of the threads holding snapshots, most recently saved first.

        Lists `save_state` threads and LangGraph threads alike, not the threads the
        library keeps for itself. Paged by key like `runs_page`.

        Args:
            prefix: Only threads whose id starts with this.
            limit: Threads per page.
            cursor: The `next_cursor` of the previous page (None: the first page).
        """
        store = self.capabilities.snapshot_part(self.store, call="threads")
        return await threads_page(store, prefix=prefix, limit=limit, cursor=cursor)

    async def fork_state(
        self, thread_id: str, checkpoint_id: str, *, to_thread: str, namespace: str = ""
    ) -> Checkpoint:
        """Start thread `to_thread` from a checkpoint of another thread.

        The new thread shares every chunk with the original (nothing is copied).
        """
        states = self._states or self._no_states("fork_state")
        return await states.fork(
            thread_id, checkpoint_id, to_thread=to_thread, namespace=namespace
        )

    async def conversation(self, thread_id: str) -> Conversation:
        """A chat thread, as last saved; append messages and `save()` complete turns.

        It is saved as the thread's state in namespace `"conversation"`, beside
        any `save_state` of the same thread (namespace `""`):
        `state_history(thread_id)`, `resumable threads` and `resumable
        show-thread` list it; `load_state(thread_id, namespace="conversation")`
        reads it.
        """
        return await Conversation.open(self, thread_id)

    # --- inspecting ---------------------------------------------------------------
    async def runs(
        self,
        *,
        status: RunStatus | list[RunStatus] | None = None,
        workflow: str | None = None,
        parent: str | None = None,
        forked_from: str | None = None,
        queue: str | None = None,
        limit: int = 100,
        version: str | None = None,
    ) -> list[RunView]:
        """Runs matching every filter given, newest first."""
        return await list_runs(
            self.capabilities.listing_part(self.store, call="runs"),
            status=status,
            workflow=workflow,
            parent=parent,
            forked_from=forked_from,
            queue=queue,
            limit=limit,
            version=version,
        )

    async def runs_page(
        self,
        selection: RunFilter | None = None,
        *,
        limit: int = 50,
        cursor: str | None = None,
    ) -> RunPage:
        """One page of the runs `selection` matches, newest first.

        Pages are found by key, not by offset, so a deep page costs what the first
        does, and a run created meanwhile never shifts a page.

        Args:
            selection: Which runs (default: all).
            limit: Runs per page.
            cursor: The `next_cursor` of the previous page (None: the first page).
        """
        listing = self.capabilities.listing_part(self.store, call="runs_page")
        return await runs_page(listing, selection, limit=limit, cursor=cursor)

    async def inputs(self, run_id: str) -> list[InputView]:
        """The inputs sent to a run (`send`), oldest first, values as generic views.

        Raises:
            RunNotFound: There is no such run.
        """
        listing = self.capabilities.listing_part(self.store, call="inputs")
        await self._get(run_id)
        return await input_views(listing, self.serde, run_id)

    async def awaited_keys(self, run_id: str) -> list[str]:
        """The keys a run waits for in `wait_for` and was not sent, in call order.

        Those of the waits it has reached (empty once it has ended). `send` also
        takes other keys (a value for a `wait_for` the run has not reached yet);
        the CLI and the dashboard ask before sending one.

        Raises:
            RunNotFound: There is no such run.
        """
        run = await self._get(run_id)
        if run.is_terminal:
            return []
        sent = await self.store.get_inputs(run_id)
        keys = [
            step.name.removeprefix(WAIT_PREFIX)
            for step in await run_history(self.store, self.serde, run)
            if step.status == "waiting" and step.name.startswith(WAIT_PREFIX)
        ]
        return [key for key in dict.fromkeys(keys) if key not in sent]

    async def count_runs(self, selection: RunFilter | None = None) -> RunCounts:
        """How many runs `selection` matches, by status and queue."""
        listing = self.capabilities.listing_part(self.store, call="count_runs")
        return await count_runs(listing, selection)

    async def get(self, run_id: str) -> RunView:
        """One run's summary, with its input and its result or error. Raises RunNotFound."""
        return RunView.detailed(await self._get(run_id), self.serde)

    async def history(self, run_id: str) -> list[StepView]:
        """The run's journal in seq order, including steps shared through a fork."""
        return await run_history(self.store, self.serde, await self._get(run_id))

    async def journal_page(self, run_id: str, steps: slice) -> JournalPage:
        """Some of a run's steps, how many it has and its ledger, reading its journal once.

        What a view of a long run needs (the dashboard's run page): `steps` as
        `export([run_id], run_input=True, steps=steps)` gives them (only their
        values are read), the count `history` would give, and `ledger`.

        Raises:
            RunNotFound: There is no such run.
        """
        return await journal_page(
            self.store, self.serde, self._runtime.prices, await self._get(run_id), steps
        )

    async def ledger(self, run_id: str) -> Ledger:
        """What the run spent: incurred by calls made, reused by replays (see Ledger)."""
        return await read_ledger(self.store, self.serde, self._runtime.prices, run_id)

    # --- progress events and streams (feed.py, events.py, streams.py) ----------
    @overload
    async def events(self, run_id: str) -> dict[str, Any]: ...
    @overload
    async def events(self, run_id: str, key: str) -> Any: ...
    async def events(self, run_id: str, key: str | None = None) -> Any:
        """The latest value the run published under `key` (None if none yet).

        Without `key`, a dict of every key's latest value. See `resumable.publish`.

        Raises:
            RunNotFound: There is no such run.
            CapabilityMissing: The store keeps no feeds.
        """
        feeds = self.capabilities.feed_part(self.store, call="events")
        await self._get(run_id)
        values = latest(await read_events(feeds, self.serde, run_id))
        return values if key is None else values.get(key)

    async def watch(
        self, run_id: str, *, after: int = 0, poll_s: float = POLL_S
    ) -> AsyncIterator[Event]:
        """Every event the run published past offset `after`, then each new one.

        Follows the run from any process until it has finished (succeeded, failed
        or cancelled), polling the store every `poll_s` when caught up; a waiting
        or sleeping run is followed on. Break out of the loop to stop sooner.

        Raises:
            RunNotFound: There is no such run.
            CapabilityMissing: The store keeps no feeds.
        """
        feeds = self.capabilities.feed_part(self.store, call="watch")
        await self._get(run_id)
        async for event in watch_events(
            self.store, feeds, self.serde, run_id, after=after, poll_s=poll_s
        ):
            yield event

    async def stream(
        self,
        run_id: str,
        step: int,
        *,
        since: int = 0,
        follow: bool = True,
        poll_s: float = POLL_S,
    ) -> AsyncIterator[StreamEvent]:
        """The chunks the streaming step at seq `step` yielded, past offset `since`.

        Reads while the step runs and after (then from the store, whoever wrote
        them). An `attempt` event opens each execution of the step: when one comes
        after chunks, the step is running again (a retry, or after a crash) and
        what the earlier attempt yielded is void. With `follow`, waits for more
        until the step is journaled or the run has finished; without it, stops
        when caught up.

        Raises:
            RunNotFound: There is no such run.
            CapabilityMissing: The store keeps no feeds.
        """
        feeds = self.capabilities.feed_part(self.store, call="stream")
        await self._get(run_id)
        async for event in read_stream(
            self.store,
            feeds,
            self.serde,
            run_id,
            step,
            since=since,
            follow=follow,
            poll_s=poll_s,
        ):
            yield event

    # --- maintenance ------------------------------------------------------------
    async def gc(
        self,
        *,
        older_than: timedelta | None = None,
        status: RunStatus | tuple[RunStatus, ...] = (
            "succeeded",
            "failed",
            "cancelled",
        ),
        keep_last: int | None = None,
        dry_run: bool = False,
        batch: int = 500,
        blobs_grace: timedelta = timedelta(hours=1),
    ) -> GcReport:
        """Delete finished runs (with their journals and inputs) and unused chunks.

        A run is due when it finished more than `older_than` ago, or its `ttl`
        (given when it started) has passed; with `keep_last` and no `older_than`,
        when it is not among the newest `keep_last` of its workflow. Runs that have
        not finished, runs a fork shares steps with, and children of unfinished
        parents are kept.

        Args:
            older_than: Age (since the run last changed) beyond which it is due.
            status: Which finished statuses may be deleted.
            keep_last: Keep this many of the newest finished runs of each workflow;
                alone, delete the other finished runs, whatever their age.
            dry_run: Report what would be deleted; delete nothing.
            batch: Runs per delete transaction.
            blobs_grace: With payload offload, objects no row references are
                deleted once older than this: younger ones may belong to a row
                about to commit (an upload precedes its row).
        """
        capabilities, store = self.capabilities, self.store
        return await collect_garbage(
            self._runtime,
            listing=capabilities.listing_part(store, call="gc"),
            maintenance=capabilities.maintenance_part(store, call="gc"),
            snapshots=capabilities.snapshot_part(store, call="gc")
            if capabilities.snapshots
            else None,
            objects=capabilities.objects,
            older_than=older_than,
            status=status,
            keep_last=keep_last,
            dry_run=dry_run,
            batch=batch,
            blobs_grace=blobs_grace,
        )

    async def archive(
        self, *, older_than: timedelta, limit: int = 1000
    ) -> list[Archived]:
        """Move finished runs' journals to the object store, one object per run.

        Runs that finished more than `older_than` ago keep their run row (listed
        and returning their result as before) but their journal records and
        inputs move into one compressed object each and one stub row stays; they
        are shown, forked, checked and priced as before (`resumable.stores.archive`,
        `unarchive` puts them back). The saved states of threads whose newest save
        is that old move into one object per thread too, but for the newest
        snapshot of each namespace, which stays live, so loading a thread's
        latest state never reads the object store (`resumable.stores.archive`;
        `unarchive_thread` puts them back). Saving to an archived thread adds live
        rows beside its stub.

        Raises:
            UsageError: the engine has no object store (`blobs=`).
            StoreError: the object store did not take an archive (runs archived
                before it stay archived).
        """
        return await archive(
            self.store,
            self.capabilities.objects,
            self.clock,
            None if self._states is None else self._states.snapshots,
            older_than=older_than,
            limit=limit,
        )

    async def unarchive(self, run_id: str) -> bool:
        """Put an archived run's journal and inputs back in the primary store.

        Returns False when the run was not archived.

        Raises:
            UsageError: the engine has no object store (`blobs=`).
            RunNotFound: there is no such run.
            CorruptCheckpointError: the run's archive object is missing or damaged.
        """
        return await unarchive(self.store, self.capabilities.objects, run_id)

    async def unarchive_thread(self, thread_id: str) -> bool:
        """Put a thread's archived snapshots and chunks back in the primary store.

        Returns False when none of its snapshots was archived.

        Raises:
            UsageError: the engine has no object store (`blobs=`).
            CorruptCheckpointError: the thread's archive object is missing or damaged.
        """
        return await unarchive_thread(self.store, self.capabilities.objects, thread_id)

    async def rekey(self, *, batch: int = 500, dry_run: bool = False) -> RekeyReport:
        """Re-encrypt every payload not sealed with the current key (key rotation).

        Give the engine a key ring whose first key is the new one and that still
        holds the old ones; after rekey, the old keys can be dropped. A store
        written without encryption is encrypted in place the same way. Crash-safe:
        every payload stays readable throughout, and running it again finishes.
        """
        return await rekey(
            self.capabilities.maintenance_part(self.store, call="rekey"),
            self.serde,
            encrypted=self._encrypted,
            batch=batch,
            dry_run=dry_run,
        )

    def export(
        self,
        run_ids: Sequence[str] = (),
        *,
        workflow: str | None = None,
        status: RunStatus | Sequence[RunStatus] | None = None,
        since: datetime | timedelta | None = None,
        run_input: bool = False,
        steps: slice | None = None,
    ) -> AsyncIterator[StepExport]:
        """Every step of the selected runs as flat records, for analysis.

        `async for record in engine.export(workflow="analyze"): ...` yields one
        `StepExport` per journal entry (oldest run first, each in seq order) with
        timings, attempts, the args fingerprint, usage and cost, and the generic
        view of the result or error, readable without the application's code.

        Args:
            run_ids: These runs only (RunNotFound if one is missing); default:
                every run the other filters match.
            workflow: Runs of this workflow only.
            status: Runs in this status (or any of these) only.
            since: Runs created at or after this time, or within this long ago.
            run_input: Add the view of each run's input `(args, kwargs)`.
            steps: Only these of each run's steps, by position in its journal
                (`slice(-100, None)`: the newest 100); only those are read.
        """
        query = export_query(
            run_ids,
            workflow=workflow,
            status=status,
            since=since,
            run_input=run_input,
            now_ms=self.clock.now_ms(),
            steps=steps,
        )
        listing = (
            None
            if run_ids
            else self.capabilities.listing_part(self.store, call="export")
        )
        return export_steps(
            self.store, listing, self.serde, self._runtime.prices, query
        )

    async def check(
        self,
        *,
        status: RunStatus | list[RunStatus] | None = None,
        workflow: str | None = None,
        version: str | None = None,
        run_ids: list[str] | None = None,
        limit: int | None = None,
        since: timedelta | None = None,
        timeout_s: float = 10.0,
    ) -> CheckReport:
        """Replay stored runs against the code loaded now, executing nothing.

        Each run's workflow runs from the top as a resume would, but every step,
        child run, wait and sleep is answered from the journal or stops the check
        there: nothing executes and nothing is written. See `CheckReport`.

        Args:
            status: Which runs (default: those that may execute again: queued,
                running, waiting, sleeping, failed).
            workflow: Only runs of this workflow.
            version: Only runs that started on this workflow version.
            run_ids: Only these runs (then `status` and `workflow` are ignored).
            limit: At most this many runs, newest first.
            since: Only runs updated within this long.
            timeout_s: How long one run's workflow body may take before its
                verdict is "timeout" (a body awaiting something other than steps).
        """
        listing = (
            None
            if run_ids is not None
            else self.capabilities.listing_part(self.store, call="check")
        )
        return await check_runs(
            self._runtime,
            listing,
            status=status,
            workflow=workflow,
            version=version,
            run_ids=run_ids,
            limit=limit,
            since=since,
            timeout_s=timeout_s,
        )

    async def close(self) -> None:
        """Stop the runs this engine drives, then release the store's connections.

        A run that was executing is queued again, its lease released, for any
        process to resume at once; the step it was in runs again there. A run
        waiting or sleeping stays so in the store, to be continued by `send` or
        `resume` from any process. A `RunHandle.result()` still waiting raises
        CancelledError. The store refuses calls once closed.
        """
        await self._driver.stop()
        await self.store.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # --- internals ----------------------------------------------------------------
    async def _resume_claimed(self, run_id: str, *, taken_over: bool = False) -> Any:
        """Drive a run this engine's `Worker` claimed (its workflow found by name).

        `taken_over`: the claim took the run's lease from another owner
        (`Lease.taken_from`), one that crashed or stopped while running it.
        """
        return await self._driver.resume_claimed(run_id, taken_over=taken_over)

    def _scheduler(self, workflows: list[str] | None) -> Scheduler | None:
        """What starts the ticks of the schedules a worker of these workflows runs.

        None when there are none (the worker then never looks). Raises
        CapabilityMissing when there are some and the store keeps no schedules.
        """
        declared = {s.name: s for s in DECLARED.of(workflows)}
        declared.update(
            (name, s)
            for name, s in self._schedules.items()
            if workflows is None or s.workflow.name in workflows
        )
        if not declared:
            return None
        return Scheduler(
            list(declared.values()),
            store=self.capabilities.schedule_part(
                self.store, call="a scheduled worker"
            ),
            now_ms=self.clock.now_ms,
            enqueue=self._enqueue_tick,
            observer=self._runtime.observer,
        )

    async def _enqueue_tick(self, schedule: Schedule, tick_ms: int) -> bool:
        """Record the run of a schedule's tick; whether this call created it."""
        run_id = schedule.run_id(tick_ms)
        if await self.store.get_run(run_id) is not None:
            return False  # another worker's, or this one's before a crash
        await self._driver.create(
            schedule.workflow,
            schedule.args,
            dict(schedule.kwargs),
            run_id=run_id,
            queue=schedule.queue,
        )
        return True

    def _no_states(self, call: str) -> NoReturn:
        raise CapabilityMissing(
            store=self.store.url, capability="SnapshotStore", call=call
        )

    async def _get(self, run_id: str) -> RunRecord:
        return await get_run(self.store, run_id)
