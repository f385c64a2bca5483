"""Engine: the facade users hold. Each method delegates to one module of this layer."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import secrets
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Self, TypeVar, overload

from resumable._engine import lease as leases
from resumable._engine.bridge import Bridge
from resumable._engine.check import DEFAULT_STATUSES, CheckReport, check_runs
from resumable._engine.clock import Clock, SystemClock
from resumable._engine.context import Runtime
from resumable._engine.conversation import Conversation
from resumable._engine.damage import reading
from resumable._engine.decorators import TYPES, WORKFLOWS, WorkflowSpec, workflow_spec
from resumable._engine.export import (
    ExportQuery,
    InputView,
    StepExport,
    export_steps,
    input_views,
)
from resumable._engine.ids import check_id
from resumable._engine.ledger import Ledger
from resumable._engine.ledger import build as build_ledger
from resumable._engine.listing import (
    RunCounts,
    RunFilter,
    ThreadPage,
    decode_cursor,
    encode_cursor,
    threads_page,
)
from resumable._engine.observe import Observer, combine, report_commit_batches
from resumable._engine.outcome import workflow_failed
from resumable._engine.rekey import RekeyReport, rekey
from resumable._engine.retention import GcReport, collect
from resumable._engine.runs import execute_run, is_retryable, load_journal, run_place
from resumable._engine.snapshots import Checkpoint, Snapshots
from resumable._engine.steps import step_place
from resumable._engine.waits import Suspend, input_place
from resumable._engine.worker import Queue, Worker
from resumable.errors import (
    CheckpointNotFound,
    InputRejected,
    LeaseLost,
    RunCancelled,
    RunConflict,
    RunNotFound,
    UsageError,
    WorkflowNotRegistered,
)
from resumable.pricing import PriceTable
from resumable.serde import KeyRing, Serde, TypeRegistry
from resumable.serde.chunked import stored_size
from resumable.stores import DEFAULT_URL, create_store, redact
from resumable.stores._records import checked_run, checked_steps
from resumable.stores.archive import Archived
from resumable.stores.blobs import BlobStore, open_blobs
from resumable.stores.offload import DEFAULT_OFFLOAD_OVER, OffloadStore
from resumable.stores.protocol import (
    InputRecord,
    Lease,
    RunQuery,
    RunRecord,
    RunStatus,
    SnapshotRecord,
    StepRecord,
    Store,
)

R = TypeVar("R")
_MISSING: Any = object()
_POLL_S = 0.25
_WAIT_POLL_S = 1.0  # how often a suspended run is re-read when no local send wakes it


@dataclass(frozen=True, slots=True, kw_only=True)
class RunView:
    """A run as `Engine.runs()` lists it."""

    run_id: str
    workflow: str
    status: RunStatus
    created_at: datetime
    updated_at: datetime
    parent_id: str | None
    forked_from: str | None
    fork_seq: int | None
    queue: str | None
    version: str | None = None
    """The workflow version the run started on (`@workflow(version=)`)."""
    lease_owner: str | None = None
    """The worker that holds (or last held) the run's lease."""
    lease_expires_at: datetime | None = None
    """When that lease ends unless renewed (None: never leased)."""

    @classmethod
    def of(cls, run: RunRecord) -> RunView:
        """The view of a stored run."""
        return cls(
            run_id=run.run_id,
            workflow=run.workflow,
            status=run.status,
            created_at=_datetime(run.created_at_ms),
            updated_at=_datetime(run.updated_at_ms),
            parent_id=run.parent_id,
            forked_from=run.forked_from,
            fork_seq=run.fork_seq,
            queue=run.queue,
            version=run.version,
            lease_owner=run.lease_owner,
            lease_expires_at=_lease_time(run.lease_expires_at_ms),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPage:
    """One page of `Engine.runs_page`."""

    runs: list[RunView]
    next_cursor: str | None
    """Pass it back as `cursor` for the next page; None on the last page."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StepView:
    """One journal entry as `Engine.history()` shows it."""

    seq: int
    name: str
    status: str
    attempts: int
    started_at: datetime
    duration_ms: int
    fingerprint: str
    output_bytes: int
    inherited_from: str | None
    """The run this step belongs to when it is shared through a fork."""
    _payload: bytes | None
    _place: str
    _serde: Serde

    def output(self) -> Any:
        """The recorded result, or for a failed step the recorded error as a dict."""
        return self._serde.loads(self._payload or b"", place=self._place)

    def view(self) -> Any:
        """`output()` as plain JSON-like data, readable without the step's types.

        Tagged values keep their type name (`{"$type": "mod:Class", ...fields}`);
        nothing is imported or constructed (see `resumable.serde.view`).

        Raises:
            CorruptCheckpointError: The stored value is damaged or over the limit.
        """
        return self._serde.view(self._payload or b"", place=self._place)


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
        """Wait for the run to end; its result, or its error (WorkflowFailed, ...)."""
        return await asyncio.shield(self._task)

    async def cancel(self) -> None:
        """Cancel the run (see `Engine.cancel`)."""
        await self._engine.cancel(self.run_id)


class Engine:
    """Starts, resumes and inspects durable runs on one store.

    Args:
        store: A store URL (`sqlite:///path.db`, `memory://`, `postgresql://...`,
            `redis://...`) or a Store object. Default: `./.resumable/state.db`.
        encryption_key: Encrypt every payload with AES-256-GCM: a KeyRing, or the
            RESUMABLE_ENCRYPTION_KEY format `id:base64key,...` (first is current).
            Default: $RESUMABLE_ENCRYPTION_KEY if set.
        lease_ttl_s: How long a run's lease lasts without a heartbeat; a crashed
            worker's runs are taken over after at most this long.
        store_retry_s: How long a run's store write may take, retries included,
            before the run stops with CheckpointWriteError: an attempt that hangs
            (a pool waiting for a server that is gone) is cut off at this too.
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
    """

    def __init__(
        self,
        store: str | Store = DEFAULT_URL,
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
    ) -> None:
        self.store: Store = create_store(store) if isinstance(store, str) else store
        if blobs is not None:
            self.store = OffloadStore(
                self.store,
                open_blobs(blobs) if isinstance(blobs, str) else blobs,
                offload_over=offload_over,
            )
        if encryption_key is None:
            encryption_key = os.environ.get("RESUMABLE_ENCRYPTION_KEY") or None
        keys = (
            KeyRing.from_env(encryption_key)
            if isinstance(encryption_key, str)
            else encryption_key
        )
        registry = TypeRegistry(parent=TYPES)
        registry.register(*types)
        self.serde = Serde(registry, keys=keys, max_bytes=max_payload_bytes)
        if isinstance(self.store, OffloadStore):
            self.store.stream_with(self.serde.reader)
        self._encrypted = keys is not None
        self.clock: Clock = clock or SystemClock()
        self.owner = leases.new_owner()
        self._runtime = Runtime(
            store=self.store,
            serde=self.serde,
            clock=self.clock,
            owner=self.owner,
            lease_ttl_s=lease_ttl_s,
            store_retry_s=store_retry_s,
            run_child=self._run_child,
            prices=prices or PriceTable(),
            observer=combine(list(observers)),
        )
        report_commit_batches(self._runtime)
        self._active: dict[str, asyncio.Task[Any]] = {}
        self._wakeups: dict[str, asyncio.Event] = {}
        self._snapshots = Snapshots(self.store, self.serde)
        self._bridge = Bridge()

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
        run = await self._create(spec, args, kwargs, run_id=run_id, ttl=ttl)
        return await self._drive(spec, run, retry_failed=False)

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
        """`run` for synchronous code: blocks until the run ends."""
        return self._bridge.run(self.run(wf, *args, run_id=run_id, ttl=ttl, **kwargs))

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

        Returns:
            The new run's id.
        """
        original = await self._get(source)
        journal = await load_journal(self.store, original)
        if not 0 <= at_step <= max(journal, default=0):
            raise RunConflict(
                run_id=source,
                reason=f"has {max(journal, default=0)} recorded steps; "
                f"at_step must be between 0 and that (got {at_step})",
            )
        run_id = run_id if run_id is not None else new_run_id()
        if args is None and kwargs is None:
            args, kwargs = self.serde.loads(
                original.input, place=run_place(source, "input")
            )
        now_ms = self.clock.now_ms()
        created = await self.store.create_run(
            RunRecord(
                run_id=run_id,
                workflow=original.workflow,
                status="queued",
                input=self.serde.dumps(
                    (tuple(args or ()), dict(kwargs or {})),
                    place=run_place(run_id, "input"),
                    root="args",
                ),
                created_at_ms=now_ms,
                updated_at_ms=now_ms,
                forked_from=source,
                fork_seq=at_step,
                # it replays the source's steps: it needs code that can run those
                version=original.version,
            )
        )
        if created.forked_from != source or created.created_at_ms != now_ms:
            raise RunConflict(
                run_id=run_id, reason="already exists; choose another run_id"
            )
        return run_id

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
        run = await self._create(spec, args, kwargs, run_id=run_id, ttl=ttl)
        task = asyncio.ensure_future(self._drive(spec, run, retry_failed=False))
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
        run = await self._create(
            spec, args, kwargs, run_id=run_id, queue=queue, ttl=ttl
        )
        return run.run_id

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

    async def resume_claimed(self, run_id: str, *, taken_over: bool = False) -> Any:
        """Drive a run this engine's worker claimed (its workflow found by name).

        `taken_over`: the claim took the run's lease from another owner
        (`Lease.taken_from`), one that crashed or stopped while running it.
        """
        run = await self._get(run_id)
        spec = WORKFLOWS.get(run.workflow)
        if spec is None:
            raise WorkflowNotRegistered(
                run_id=run_id, workflow=run.workflow, hint="this worker"
            )
        if self._runtime.observer is not None:
            first = run.fence == 1  # its first lease: it waited in its queue until now
            wait_s = (self.clock.now_ms() - run.created_at_ms) / 1000 if first else None
            self._runtime.observer.run_claimed(run, queue_wait_s=wait_s)
            if taken_over:
                self._runtime.observer.lease_taken_over(run_id)
        return await self._drive(spec, run, retry_failed=False)

    async def resume(self, run_id: str) -> Any:
        """Resume a run by id, finding its workflow by the name it recorded.

        Unlike `run`, this also re-executes a run that failed in the workflow's own
        code (after you fixed it); steps that succeeded replay.
        """
        run = await self._get(run_id)
        spec = WORKFLOWS.get(run.workflow)
        if spec is None:
            raise WorkflowNotRegistered(
                run_id=run_id,
                workflow=run.workflow,
                hint="this process; import the module that defines it (CLI: --app MODULE)",
            )
        return await self._drive(spec, run, retry_failed=True)

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
        check_id("input key", key)
        run = await self._get(run_id)
        if run.is_terminal:
            raise InputRejected(
                run_id=run_id,
                key=key,
                reason=f"the run has already ended ({run.status})",
            )
        accepted = await self.store.send_input(
            InputRecord(
                run_id=run_id,
                key=key,
                value=self.serde.dumps(
                    value, place=input_place(run_id, key), root="value"
                ),
                sent_at_ms=self.clock.now_ms(),
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
        """Cancel a run: it stops before its next step and is never resumed.

        Returns the run's status afterwards ("cancelled", or how it had already ended).
        """
        run = await self.store.cancel_run(run_id, now_ms=self.clock.now_ms())
        task = self._active.get(run_id)
        if task is not None and run.status == "cancelled":
            task.cancel()
        return run.status

    # --- snapshots ----------------------------------------------------------------
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
            namespace: Separates independent states of one thread.
            checkpoint_id: The new checkpoint's id (default: generated). Ids must
                sort in the order versions are saved (e.g. uuid6/uuid7 strings).

        Returns:
            The new checkpoint; its `metadata` is the object passed, not a copy
            decoded back (loading it gives an equal value).
        """
        if parent is None:
            latest = await self._snapshots.packs.find(thread_id, namespace, None)
            parent = None if latest is None else latest.checkpoint_id
        record = await self._snapshots.save(
            thread_id,
            state,
            now_ms=self.clock.now_ms(),
            namespace=namespace,
            parent_id=parent,
            label=label,
            metadata=metadata,
            checkpoint_id=checkpoint_id,
        )
        return self._checkpoint(record, metadata)

    async def load_state(
        self,
        thread_id: str,
        *,
        checkpoint_id: str | None = None,
        namespace: str = "",
        default: Any = _MISSING,
    ) -> Any:
        """The thread's latest state, or the state at `checkpoint_id`.

        Raises:
            CheckpointNotFound: nothing was saved (and no `default` was given).
        """
        found = await self._snapshots.load(
            thread_id, namespace=namespace, checkpoint_id=checkpoint_id
        )
        if found is not None:
            return found[1]
        if default is not _MISSING:
            return default
        what = f"checkpoint {checkpoint_id!r}" if checkpoint_id else "saved state"
        raise CheckpointNotFound(
            thread_id=thread_id,
            detail=f"has no {what}; save one with Engine.save_state, or pass default=",
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
        found = await self._snapshots.view(
            thread_id, namespace=namespace, checkpoint_id=checkpoint_id
        )
        if found is None:
            what = f"checkpoint {checkpoint_id!r}" if checkpoint_id else "saved state"
            raise CheckpointNotFound(
                thread_id=thread_id,
                detail=f"has no {what} in namespace {namespace!r}; list them with "
                f"Engine.state_history({thread_id!r}, namespace=None)",
            )
        return found[1]

    async def conversation(self, thread_id: str) -> Conversation:
        """A chat thread, as last saved; append messages and `save()` complete turns."""
        return await Conversation.open(self, thread_id)

    async def load_checkpoint(
        self, thread_id: str, *, checkpoint_id: str | None = None, namespace: str = ""
    ) -> tuple[Checkpoint, Any] | None:
        """A checkpoint (the latest, or the given one) with its state; None if absent."""
        found = await self._snapshots.load(
            thread_id, namespace=namespace, checkpoint_id=checkpoint_id
        )
        return None if found is None else (self._checkpoint(found[0]), found[1])

    async def delete_thread(self, thread_id: str) -> int:
        """Delete every checkpoint of a thread (in every namespace); returns how many.

        The content chunks they used are removed by `gc` once nothing uses them.
        """
        self._snapshots.forget(thread_id)
        return await self.store.delete_thread(thread_id)

    async def state_history(
        self,
        thread_id: str,
        *,
        limit: int | None = None,
        before: str | None = None,
        namespace: str | None = "",
    ) -> list[Checkpoint]:
        """The thread's checkpoints, newest first (every namespace if `namespace` is None)."""
        records = await self._snapshots.packs.history(
            thread_id, namespace=namespace, before=before, limit=limit
        )
        return [self._checkpoint(record) for record in records]

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
        return await threads_page(self.store, prefix=prefix, limit=limit, cursor=cursor)

    async def fork_state(
        self, thread_id: str, checkpoint_id: str, *, to_thread: str, namespace: str = ""
    ) -> Checkpoint:
        """Start thread `to_thread` from a checkpoint of another thread.

        The new thread shares every chunk with the original (nothing is copied).
        """
        found = await self._snapshots.load(
            thread_id, namespace=namespace, checkpoint_id=checkpoint_id
        )
        if found is None:
            raise CheckpointNotFound(
                thread_id=thread_id,
                detail=f"has no checkpoint {checkpoint_id!r}; list them with "
                f"Engine.state_history({thread_id!r})",
            )
        record = await self._snapshots.save(
            to_thread,
            found[1],
            now_ms=self.clock.now_ms(),
            namespace=namespace,
            parent_id=None,
            label=f"fork of {thread_id}@{checkpoint_id}",
            metadata={
                "forked_from": {"thread_id": thread_id, "checkpoint_id": checkpoint_id}
            },
        )
        return self._checkpoint(record)

    def _checkpoint(
        self, record: SnapshotRecord, metadata: Any = _MISSING
    ) -> Checkpoint:
        """The public view of a snapshot record.

        `metadata`: the value just saved as the record's metadata, when the caller
        has it; else it is decoded from the record (a LangGraph step saves two
        records and reads neither's metadata back: ~15 us each).
        """
        with reading(
            f"thread {record.thread_id!r} checkpoint {record.checkpoint_id!r}"
        ):
            return Checkpoint(
                thread_id=record.thread_id,
                checkpoint_id=record.checkpoint_id,
                parent_id=record.parent_id,
                label=record.label,
                metadata=self._snapshots.metadata(record)
                if metadata is _MISSING
                else metadata,
                created_at=_datetime(record.created_at_ms),
                namespace=record.namespace,
            )

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
        statuses = [status] if isinstance(status, str) else list(status or [])
        records = await self.store.list_runs(
            RunQuery(
                status=statuses,
                workflow=workflow,
                parent_id=parent,
                forked_from=forked_from,
                queue=queue,
                limit=limit,
                version=version,
            )
        )
        return [RunView.of(checked_run(run)) for run in records]

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
        query = (selection or RunFilter()).query(
            limit=limit + 1, after=None if cursor is None else decode_cursor(cursor)
        )
        records = await self.store.list_runs(query)
        runs = [RunView.of(checked_run(run)) for run in records[:limit]]
        last = records[limit - 1] if len(records) > limit else None
        return RunPage(
            runs=runs,
            next_cursor=None
            if last is None
            else encode_cursor(last.created_at_ms, last.run_id),
        )

    async def inputs(self, run_id: str) -> list[InputView]:
        """The inputs sent to a run (`send`), oldest first, values as generic views.

        Raises:
            RunNotFound: There is no such run.
        """
        await self._get(run_id)
        return await input_views(self.store, self.serde, run_id)

    async def count_runs(self, selection: RunFilter | None = None) -> RunCounts:
        """How many runs `selection` matches, by status and queue."""
        return RunCounts(
            by_status_and_queue=await self.store.count_runs(
                (selection or RunFilter()).query()
            )
        )

    async def get(self, run_id: str) -> RunView:
        """One run's summary. Raises RunNotFound."""
        return RunView.of(await self._get(run_id))

    async def history(self, run_id: str) -> list[StepView]:
        """The run's journal in seq order, including steps shared through a fork."""
        run = await self._get(run_id)
        journal = await load_journal(self.store, run)
        return [
            _step_view(record, run_id, self.serde)
            for seq, record in sorted(journal.items())
            if seq > 0
        ]

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
        (given when it started) has passed. Runs that have not finished, runs a
        fork shares steps with, and children of unfinished parents are kept.

        Args:
            older_than: Age (since the run last changed) beyond which it is due.
            status: Which finished statuses may be deleted.
            keep_last: Keep this many of the newest finished runs of each workflow.
            dry_run: Report what would be deleted; delete nothing.
            batch: Runs per delete transaction.
            blobs_grace: With payload offload, objects no row references are
                deleted once older than this: younger ones may belong to a row
                about to commit (an upload precedes its row).
        """
        statuses = (status,) if isinstance(status, str) else tuple(status)
        report = await collect(
            self.store,
            now_ms=self.clock.now_ms(),
            older_than=older_than,
            status=statuses,
            keep_last=keep_last,
            dry_run=dry_run,
            batch=batch,
        )
        if isinstance(self.store, OffloadStore) and not dry_run:
            blobs = await self.store.collect_garbage(
                older_than_ms=int(blobs_grace.total_seconds() * 1000),
                now_ms=self.clock.now_ms(),
            )
            report = dataclasses.replace(report, blobs=blobs)
        if self._runtime.observer is not None:
            self._runtime.observer.gc_collected(report)
        return report

    async def archive(
        self, *, older_than: timedelta, limit: int = 1000
    ) -> list[Archived]:
        """Move finished runs' payloads to the object store, one object per run.

        Runs that finished more than `older_than` ago keep their rows (listed,
        shown, forked and checked as before) but their payloads move into one
        compressed object each; so do the saved states of threads whose newest
        save is that old, one object per thread (see `resumable.stores.archive`).

        Raises:
            UsageError: the engine has no object store (`blobs=`).
            StoreError: the object store did not take an archive (runs archived
                before it stay archived).
        """
        store = self.store
        if not isinstance(store, OffloadStore):
            raise UsageError(
                f"store {redact(store.url)}: archive needs an object store: add "
                f"?blobs=s3://bucket/prefix (or file:///folder) to the store URL, or "
                f"pass Engine(blobs=...)"
            )
        cutoff_ms = self.clock.now_ms() - int(older_than.total_seconds() * 1000)
        return await store.archive_finished(updated_before_ms=cutoff_ms, limit=limit)

    async def rekey(self, *, batch: int = 500, dry_run: bool = False) -> RekeyReport:
        """Re-encrypt every payload not sealed with the current key (key rotation).

        Give the engine a key ring whose first key is the new one and that still
        holds the old ones; after rekey, the old keys can be dropped. A store
        written without encryption is encrypted in place the same way. Crash-safe:
        every payload stays readable throughout, and running it again finishes.
        """
        if not self._encrypted:
            raise UsageError(
                "rekey needs encryption keys: pass encryption_key= or set "
                "RESUMABLE_ENCRYPTION_KEY (new key first, then the old ones)"
            )
        return await rekey(self.store, self.serde, batch=batch, dry_run=dry_run)

    async def ledger(self, run_id: str) -> Ledger:
        """What the run spent: incurred by calls made, reused by replays (see Ledger)."""
        await self._get(run_id)
        records = []
        for record in checked_steps(run_id, await self.store.load_journal(run_id)):
            place = step_place(run_id, record.seq, record.name)
            if record.seq < 0:
                records.append(
                    (record, self.serde.loads(record.output or b"", place=place))
                )
            elif record.usage is not None:
                records.append(
                    (record, self.serde.loads(record.usage, place=place + " usage"))
                )
        return build_ledger(run_id, records, self._runtime.prices)

    def export(
        self,
        run_ids: Sequence[str] = (),
        *,
        workflow: str | None = None,
        status: RunStatus | Sequence[RunStatus] | None = None,
        since: datetime | timedelta | None = None,
        run_input: bool = False,
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
        """
        if isinstance(since, timedelta):
            since = _datetime(self.clock.now_ms()) - since
        query = ExportQuery(
            run_ids=[run_ids] if isinstance(run_ids, str) else list(run_ids),
            workflow=workflow,
            status=[status] if isinstance(status, str) else list(status or ()),
            created_since_ms=None if since is None else int(since.timestamp() * 1000),
            run_input=run_input,
        )
        return export_steps(self.store, self.serde, self._runtime.prices, query)

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
        statuses: tuple[RunStatus, ...] = (
            (status,) if isinstance(status, str) else tuple(status or DEFAULT_STATUSES)
        )
        return await check_runs(
            self._runtime,
            status=statuses,
            workflow=workflow,
            version=version,
            run_ids=run_ids,
            limit=limit,
            updated_since_ms=None
            if since is None
            else self.clock.now_ms() - int(since.total_seconds() * 1000),
            timeout_s=timeout_s,
        )

    async def close(self) -> None:
        """Release the store's connections and threads."""
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
    async def _get(self, run_id: str) -> RunRecord:
        run = await self.store.get_run(run_id)
        if run is None:
            raise RunNotFound(run_id=run_id)
        return checked_run(run)

    async def _run_child(
        self,
        spec: WorkflowSpec,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        run_id: str,
        parent_id: str,
        retry_failed: bool,
    ) -> Any:
        run = await self._create(spec, args, kwargs, run_id=run_id, parent_id=parent_id)
        return await self._drive(spec, run, retry_failed=retry_failed)

    async def _create(
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
        spec.register_types()
        run_id = check_id("run_id", run_id) if run_id is not None else new_run_id()
        if queue is not None:
            check_id("queue name", queue)
        now_ms = self.clock.now_ms()
        encoded = self.serde.dumps(
            (args, kwargs), place=run_place(run_id, "input"), root="args"
        )
        run = await self.store.create_run(
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
        if run.workflow != spec.name:
            raise RunConflict(
                run_id=run_id,
                reason=f"belongs to workflow {run.workflow!r}, not {spec.name!r}; "
                f"choose another run_id",
            )
        if self._runtime.observer is not None and run.created_at_ms == now_ms:
            await self._runtime.observer.run_created(self._runtime, run)
        if run.input != encoded:  # the run existed: it must be the same call
            recorded = self.serde.loads(run.input, place=run_place(run_id, "input"))
            if self.serde.fingerprint(recorded) != self.serde.fingerprint(
                (args, kwargs)
            ):
                raise RunConflict(
                    run_id=run_id,
                    reason=f"was started with other arguments; resume it with "
                    f"Engine.resume({run_id!r}) or start a new run_id",
                )
        return run

    async def _drive(
        self, spec: WorkflowSpec, run: RunRecord, *, retry_failed: bool
    ) -> Any:
        task = self._active.get(run.run_id)
        if task is None:
            task = asyncio.ensure_future(
                self._until_done(spec, run, retry_failed=retry_failed)
            )
            self._active[run.run_id] = task
            task.add_done_callback(lambda done: self._forget(run.run_id, done))
        return await asyncio.shield(task)

    async def _until_done(
        self, spec: WorkflowSpec, run: RunRecord, *, retry_failed: bool
    ) -> Any:
        spec.register_types()
        while True:
            if run.is_terminal:
                if run.status != "failed" or not (
                    retry_failed or is_retryable(self._failure(run))
                ):
                    return self._ended(run)
                await self.store.reopen_run(run.run_id, now_ms=self.clock.now_ms())
                retry_failed = True
            elif run.status in ("waiting", "sleeping"):
                run = await self._until_runnable(run.run_id)
                if run.is_terminal:
                    continue
            lease = await self._acquire(run)
            if lease is None:
                run = await self._get(run.run_id)
                continue
            try:
                # no re-read after the lease: execution uses only what never changes
                # (the run's id, input and fork lineage); its fence comes with the lease
                return await execute_run(
                    self._runtime, spec, run, lease, retry_failed=retry_failed
                )
            except Suspend:
                run, retry_failed = await self._get(run.run_id), False
                continue
            except (LeaseLost, asyncio.CancelledError):
                latest = await self.store.get_run(run.run_id)
                if latest is not None and latest.status == "cancelled":
                    raise RunCancelled(run_id=run.run_id) from None
                await self._release(lease)
                raise
            except BaseException:
                await self._release(lease)
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
        while True:
            run = await self._get(run_id)
            if run.status not in ("waiting", "sleeping"):
                return run
            now_ms = self.clock.now_ms()
            if run.wake_at_ms is not None and run.wake_at_ms <= now_ms:
                return run
            remaining_s = (
                _POLL_S if run.wake_at_ms is None else (run.wake_at_ms - now_ms) / 1000
            )
            woken = self._wakeups.setdefault(run_id, asyncio.Event())
            nap = asyncio.ensure_future(
                self.clock.sleep(min(remaining_s, _WAIT_POLL_S))
            )
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
        return self.serde.loads(
            run.output or b"", place=run_place(run.run_id, "output")
        )

    def _failure(self, run: RunRecord) -> dict[str, Any]:
        info = self.serde.loads(
            run.output or b"", place=run_place(run.run_id, "output")
        )
        return (
            info if isinstance(info, dict) else {"type": "Error", "message": str(info)}
        )

    async def _release(self, lease: Lease) -> None:
        """Give up a lease at once when an execution stops without ending the run.

        After Ctrl-C, a cancellation or a store error, a restart need not wait the
        lease out. Best effort: the lease still expires on its own if this write fails.
        """
        with contextlib.suppress(BaseException):
            await self.store.renew_lease(
                lease.run_id, fence=lease.fence, now_ms=self.clock.now_ms(), ttl_ms=0
            )

    async def _acquire(self, run: RunRecord) -> Lease | None:
        """Take the run's lease, waiting out a live owner; None if it ended meanwhile."""
        ttl_ms = int(self._runtime.lease_ttl_s * 1000)
        take_over: str | None = None
        while True:
            lease = await self.store.acquire_lease(
                run.run_id,
                owner=self.owner,
                now_ms=self.clock.now_ms(),
                ttl_ms=ttl_ms,
                take_over=take_over,
            )
            if lease is not None:
                if lease.taken_from is not None and self._runtime.observer is not None:
                    self._runtime.observer.lease_taken_over(run.run_id)
                return lease
            current = await self._get(run.run_id)
            if current.is_terminal:
                return None
            if leases.is_dead_local_owner(current.lease_owner):
                take_over = current.lease_owner
                continue
            wait_ms = current.lease_expires_at_ms - self.clock.now_ms()
            await asyncio.sleep(min(_POLL_S, max(wait_ms, 1) / 1000))


def new_run_id() -> str:
    """A unique, time-sortable run id."""
    return f"{time.time_ns() // 1_000_000:012x}-{secrets.token_hex(6)}"


def _datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _lease_time(ms: int) -> datetime | None:
    """A lease's expiry to show; None if never leased, or past what a datetime holds.

    Only shown, never acted on: the store compares the stored number itself, so a
    damaged expiry must not make every listing of the run fail.
    """
    try:
        return _datetime(ms) if ms else None
    except (ValueError, OverflowError, OSError):
        return None


def _step_view(record: StepRecord, run_id: str, serde: Serde) -> StepView:
    return StepView(
        seq=record.seq,
        name=record.name,
        status=record.status,
        attempts=record.attempts,
        started_at=_datetime(record.started_at_ms),
        duration_ms=record.finished_at_ms - record.started_at_ms,
        fingerprint=record.fingerprint,
        output_bytes=stored_size(record.output),
        inherited_from=None if record.run_id == run_id else record.run_id,
        _payload=record.output,
        _place=step_place(record.run_id, record.seq, record.name),
        _serde=serde,
    )
