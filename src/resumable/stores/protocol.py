"""The Store protocol, in parts, over typed records.

A store keeps runs, their journals, the inputs sent to them, and content-addressed
snapshots, in four Protocols: `RunStore` (runs, leases with fencing, journal,
inputs: all that running workflows needs), `SnapshotStore` (chunks, snapshots,
threads), `RunListing` (`runs()`, the CLI, the dashboard) and `Maintenance`
(`gc()`, `rekey()`). `Store` is all four and `PacksSnapshots` (packing of older
snapshots, optional), as the built-in stores are; a store of your own may start
with `RunStore`. Optional capabilities are the Protocols of
`resumable.stores.capabilities`, checked once, when the engine takes the store.
`docs/stores.md` shows how to write one.

A store never decodes a payload (every `bytes` field was encoded, checksummed
and optionally encrypted by `resumable.serde`), never imports the engine, and raises
only `ResumableError` subclasses, never driver errors.

Every method is one transaction. Writes made on behalf of an executing run carry
that run's fencing token (`fence`): the store applies the write only if the run's
current fence is still that token, in the same transaction, and otherwise raises
`LeaseLost`. That is what keeps a paused "zombie" worker from writing over a run
another worker took over.

Time is passed in (`now_ms`) rather than read by the store, so one clock (the
engine's, or a test's `FakeClock`) decides leases, sleeps and timeouts everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal, Protocol, get_args, runtime_checkable

from resumable.stores.kinds import JournalKind, kind_of
from resumable.stores.roles import SnapshotRole, ThreadRole, snapshot_role, thread_role

RunStatus = Literal[
    "queued",  # created, waiting for an executor (engine.enqueue, or woken by send)
    "running",  # an executor holds (or held, if its lease expired) the lease
    "waiting",  # suspended in wait_for(); woken by send() or by its timeout
    "sleeping",  # suspended in sleep(); woken at wake_at_ms
    "succeeded",
    "failed",
    "cancelled",
]
TERMINAL_STATUSES: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})
RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)

StepStatus = Literal[
    "ok",  # output holds the encoded result
    "failed",  # retries ran out; output holds the encoded error
    "retrying",  # an attempt failed and another is due; output holds its error
    "waiting",  # a wait_for/sleep was reached; output holds its deadline (ms or None)
]

NO_CHUNKS: Final[Mapping[str, bytes]] = MappingProxyType({})
"""`save_snapshot`'s and `swap_snapshots`' default: no new chunks, all are stored."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    """One execution of a workflow, named by its run_id."""

    run_id: str
    workflow: str
    status: RunStatus
    input: bytes
    """The encoded `(args, kwargs)` the run was started with."""
    created_at_ms: int
    updated_at_ms: int
    output: bytes | None = None
    """The encoded result (succeeded) or encoded error (failed)."""
    parent_id: str | None = None
    """The run that started this one as a child run."""
    forked_from: str | None = None
    fork_seq: int | None = None
    """Steps 1..fork_seq of `forked_from` are this run's first steps (shared, not copied)."""
    queue: str | None = None
    lease_owner: str | None = None
    lease_expires_at_ms: int = 0
    fence: int = 0
    """Incremented on every lease acquisition and on cancel; stale tokens are refused."""
    wake_at_ms: int | None = None
    """When a sleeping run wakes, or a waiting run's earliest timeout fires."""
    expires_at_ms: int | None = None
    """When a finished run becomes eligible for garbage collection (its TTL)."""
    version: str | None = None
    """The version of the workflow's code the run started on (`@workflow(version=)`);
    None for a workflow without one, and for runs stored before versions existed."""

    @property
    def is_terminal(self) -> bool:
        """Whether the run has finished (succeeded, failed or cancelled)."""
        return self.status in TERMINAL_STATUSES


@dataclass(frozen=True, slots=True, init=False)
class StepRecord:
    """One journal entry: the outcome of the step call at `seq` in a run.

    A ledger entry and a `map_steps` item are journal entries too; `kind` says
    which a record is, and `resumable.stores.kinds` maps kinds to seqs.
    """

    run_id: str
    seq: int
    name: str
    fingerprint: str
    """A digest of the call's arguments; replay refuses a different call at this seq."""
    status: StepStatus
    output: bytes | None
    """Encoded result (ok) or encoded error (failed, retrying); stores never decode."""
    attempts: int
    started_at_ms: int
    finished_at_ms: int
    usage: bytes | None = None
    """Encoded token usage and cost of every attempt; read by the ledger."""

    def __init__(
        self,
        *,
        run_id: str,
        seq: int,
        name: str,
        fingerprint: str,
        status: StepStatus,
        output: bytes | None,
        attempts: int,
        started_at_ms: int,
        finished_at_ms: int,
        usage: bytes | None = None,
    ) -> None:
        # A record is made at every step, and a resume makes thousands: setting the
        # slots through their own descriptors is cheaper than the frozen dataclass's
        # __init__ (object.__setattr__ per field). test_protocol checks this
        # signature against the fields, and that both build equal records.
        set_run_id(self, run_id)
        set_seq(self, seq)
        set_name(self, name)
        set_fingerprint(self, fingerprint)
        set_status(self, status)
        set_output(self, output)
        set_attempts(self, attempts)
        set_started_at_ms(self, started_at_ms)
        set_finished_at_ms(self, finished_at_ms)
        set_usage(self, usage)

    @property
    def kind(self) -> JournalKind:
        """A step call, a ledger entry or a batch item (`resumable.stores.kinds`)."""
        return kind_of(self.seq)


def _slot_setter(name: str) -> Callable[[StepRecord, Any], None]:
    setter: Callable[[StepRecord, Any], None] = getattr(StepRecord, name).__set__
    return setter


# StepRecord's slot setters, also used to build journals by the thousand (_sql)
set_run_id: Final = _slot_setter("run_id")
set_seq: Final = _slot_setter("seq")
set_name: Final = _slot_setter("name")
set_fingerprint: Final = _slot_setter("fingerprint")
set_status: Final = _slot_setter("status")
set_output: Final = _slot_setter("output")
set_attempts: Final = _slot_setter("attempts")
set_started_at_ms: Final = _slot_setter("started_at_ms")
set_finished_at_ms: Final = _slot_setter("finished_at_ms")
set_usage: Final = _slot_setter("usage")


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    """The right to execute a run, proven on every write by `fence`."""

    run_id: str
    owner: str
    fence: int
    expires_at_ms: int
    taken_from: str | None = None
    """The owner whose lease this one replaced while the run was running: its
    lease had expired (its process crashed or stalled, or stopped and released
    it) or it was a dead process on this host. None when nobody held the run
    (queued, new, woken) or `owner` already did. Set by `acquire_lease` and
    `claim_runs` (see `_rules.lease_taken_from`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunUpdate:
    """A status change made by the run's lease holder.

    Any status other than "running" also releases the lease.
    """

    status: RunStatus
    now_ms: int
    output: bytes | None = None
    wake_at_ms: int | None = None
    expires_at_ms: int | None = None
    """A new expiry; None keeps the run's (the TTL it was given at start)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunQuery:
    """Filters for `Store.list_runs`; every field narrows the result."""

    status: Collection[str] = ()
    workflow: str | None = None
    parent_id: str | None = None
    forked_from: str | None = None
    queue: str | None = None
    updated_before_ms: int | None = None
    version: str | None = None
    limit: int = 100
    """Newest first (by creation time), at most this many."""
    run_id_prefix: str | None = None
    """Only runs whose run_id starts with this."""
    created_since_ms: int | None = None
    """Only runs created at or after this time."""
    created_before_ms: int | None = None
    """Only runs created before this time."""
    after: tuple[int, str] | None = None
    """Keyset pagination: only runs listed after the run whose `(created_at_ms,
    run_id)` this is, in the newest-first order (the last run of the previous page)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class QueuePolicy:
    """Limits a queue enforces across every worker sharing the store."""

    concurrency: int | None = None
    """At most this many of the queue's runs hold a live lease at once."""
    rate: int | None = None
    """At most this many of the queue's runs start per `period_ms`."""
    period_ms: int = 60_000


@dataclass(frozen=True, slots=True, kw_only=True)
class InputRecord:
    """A value sent to a run under a key (what `wait_for(key)` receives)."""

    run_id: str
    key: str
    value: bytes
    sent_at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleRecord:
    """A schedule as the store keeps it: its definition and where its ticks are.

    The definition comes from the code that declares it (the worker saves it); the
    state (`paused`, `last_tick_ms`) is changed only by the store's own methods,
    so every worker and the CLI see the same.
    """

    name: str
    workflow: str
    cron: str
    """Five cron fields, or six with seconds last (croniter's format)."""
    tz: str
    """The IANA time zone the cron fields are read in."""
    catch_up: int
    """After downtime, start at most this many missed ticks (0: skip them)."""
    paused: bool = False
    last_tick_ms: int | None = None
    """Every tick at or before this was started or passed over; None: none yet
    (ticks after `created_at_ms` are due)."""
    created_at_ms: int
    updated_at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotRecord:
    """An explicit save of a state object: a manifest of content-addressed chunks."""

    thread_id: str
    checkpoint_id: str
    """Sortable: later checkpoints of a thread compare greater."""
    parent_id: str | None
    manifest: bytes
    """Encoded description of the state in terms of chunk hashes."""
    chunk_refs: tuple[str, ...]
    """Every chunk hash the manifest uses, so GC knows what is still referenced."""
    created_at_ms: int
    namespace: str = ""
    label: str | None = None
    metadata: bytes | None = None

    @property
    def role(self) -> SnapshotRole:
        """What the record is: a checkpoint, pending writes, a pack (`stores.roles`)."""
        return snapshot_role(self.namespace)


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadRecord:
    """A thread that holds snapshots, as `Store.list_threads` lists it."""

    thread_id: str
    updated_at_ms: int
    """The newest `created_at_ms` among its snapshots (every namespace)."""

    @property
    def role(self) -> ThreadRole:
        """A user's thread, or one the library keeps for itself (`stores.roles`)."""
        return thread_role(self.thread_id)


PayloadKind = Literal[
    "run.input",  # key (run_id,)
    "run.output",  # key (run_id,)
    "step.output",  # key (run_id, seq, name)
    "step.usage",  # key (run_id, seq, name)
    "input.value",  # key (run_id, input key)
    "snapshot.manifest",  # key (thread_id, namespace, checkpoint_id)
    "snapshot.metadata",  # key (thread_id, namespace, checkpoint_id)
    "chunk.data",  # key (hash,)
]
PAYLOAD_KINDS: tuple[PayloadKind, ...] = get_args(PayloadKind)


@dataclass(frozen=True, slots=True, kw_only=True)
class Payload:
    """One stored, sealed value, as `rekey` reads and rewrites it."""

    kind: PayloadKind
    key: tuple[str | int, ...]
    """Where it lives; the layout per kind is listed at PayloadKind."""
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteResult:
    """What a retention pass removed."""

    runs: int = 0
    steps: int = 0
    inputs: int = 0
    run_ids: tuple[str, ...] = field(default=())
    bytes: int = 0
    """Payload bytes deleted with them, as stored (encoded, compressed, encrypted):
    the runs' inputs and outputs, their steps' results and usage, their inputs'
    values. Keys, ids and indexes are not counted."""


@runtime_checkable
class RunStore(Protocol):
    """The core a store must implement: runs, leases with fencing, journal, inputs.

    This is all the engine needs to start, execute, suspend, resume and recover
    runs. One transaction per method; see the module docstring for fencing.
    """

    url: str
    """Where the store lives, with any password removed (for messages and logs)."""

    # --- runs -------------------------------------------------------------------
    async def create_run(self, run: RunRecord) -> RunRecord:
        """Insert `run` unless its run_id exists; return the stored record either way."""
        ...

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run with that id, or None."""
        ...

    async def acquire_lease(
        self,
        run_id: str,
        *,
        owner: str,
        now_ms: int,
        ttl_ms: int,
        take_over: str | None = None,
    ) -> Lease | None:
        """Take the run's lease, incrementing its fence.

        Succeeds if the run is not terminal and its lease is free, expired, held by
        `owner`, or held by `take_over` (an owner the caller knows to be dead). A
        queued, sleeping or waiting run becomes "running". Returns None when another
        live owner holds it. Raises RunNotFound.
        """
        ...

    async def renew_lease(
        self, run_id: str, *, fence: int, now_ms: int, ttl_ms: int
    ) -> None:
        """Extend the lease; raises LeaseLost if `fence` is no longer current."""
        ...

    async def update_run(self, run_id: str, *, fence: int, update: RunUpdate) -> None:
        """Apply a status change by the lease holder; raises LeaseLost if fenced out."""
        ...

    async def cancel_run(self, run_id: str, *, now_ms: int) -> RunRecord:
        """Mark a non-terminal run cancelled and fence out its executor.

        Returns the record as it now stands (unchanged if it had already finished).
        Raises RunNotFound.
        """
        ...

    async def reopen_run(self, run_id: str, *, now_ms: int) -> bool:
        """Make a failed run queued again, so it can be retried; False if not failed."""
        ...

    async def claim_runs(
        self,
        *,
        owner: str,
        now_ms: int,
        ttl_ms: int,
        limit: int,
        workflows: Collection[str],
        queues: Mapping[str, QueuePolicy],
        versions: Collection[str] | None = None,
    ) -> list[Lease]:
        """Lease up to `limit` runnable runs of the given workflows.

        Runnable: queued; running with an expired lease; sleeping or waiting with
        `wake_at_ms <= now_ms`. Queue policies are enforced across all workers.
        With `versions`, only runs whose `version` is one of them (never a run
        without a version): a worker claims only what its code can run.
        """
        ...

    # --- journal ----------------------------------------------------------------
    async def load_journal(
        self, run_id: str, *, up_to_seq: int | None = None
    ) -> list[StepRecord]:
        """The run's own step records in seq order (not those inherited by a fork)."""
        ...

    async def commit_step(self, step: StepRecord, *, fence: int) -> None:
        """Durably insert or replace the record at (run_id, seq); LeaseLost if fenced out."""
        ...

    # --- inputs -----------------------------------------------------------------
    async def send_input(self, record: InputRecord) -> bool:
        """Record an input and wake the run if it is waiting.

        Returns False (and changes nothing) if the key already holds a value.
        Raises RunNotFound.
        """
        ...

    async def get_inputs(self, run_id: str) -> dict[str, bytes]:
        """Every input sent to the run, by key."""
        ...

    async def close(self) -> None:
        """Release connections and threads; idempotent."""
        ...


@runtime_checkable
class SnapshotStore(Protocol):
    """Saved states (`save_state`, LangGraph): content-addressed chunks, snapshots, threads."""

    url: str
    """Where the store lives, as `RunStore.url` (errors about a thread name it)."""

    async def put_chunks(self, chunks: Mapping[str, bytes]) -> None:
        """Store chunks by content hash; a hash already present is left alone."""
        ...

    async def get_chunks(self, hashes: Collection[str]) -> dict[str, bytes]:
        """The chunks that exist among `hashes`."""
        ...

    async def save_snapshot(
        self, snapshot: SnapshotRecord, *, chunks: Mapping[str, bytes] = NO_CHUNKS
    ) -> None:
        """Insert a snapshot and store the new `chunks` it names, in one transaction.

        A chunk already present is left alone. Chunks the snapshot names but
        `chunks` does not hold must already be stored: if one is not (a collection
        deleted it), nothing is saved and `ChunksMissing` is raised. The check and
        the insert are atomic with `delete_unreferenced_chunks`.
        """
        ...

    async def load_snapshot(
        self, thread_id: str, *, namespace: str = "", checkpoint_id: str | None = None
    ) -> SnapshotRecord | None:
        """The given checkpoint, or the thread's latest; None if there is none."""
        ...

    async def list_snapshots(
        self,
        thread_id: str,
        *,
        namespace: str | None = "",
        before: str | None = None,
        limit: int | None = None,
    ) -> list[SnapshotRecord]:
        """A thread's snapshots, newest first (all namespaces if `namespace` is None)."""
        ...

    async def delete_snapshots(
        self, thread_id: str, keys: Collection[tuple[str, str]]
    ) -> int:
        """Delete the thread's snapshots named by `(namespace, checkpoint_id)` keys.

        In one transaction; keys naming no snapshot are skipped. Returns how many
        snapshots went. Chunks only they referenced are left for
        `delete_unreferenced_chunks` to collect.
        """
        ...

    async def delete_thread(self, thread_id: str) -> int:
        """Delete every snapshot of a thread; returns how many."""
        ...

    async def list_threads(
        self,
        *,
        prefix: str | None = None,
        after: tuple[int, str] | None = None,
        limit: int = 100,
    ) -> list[ThreadRecord]:
        """Threads holding at least one snapshot, newest first, at most `limit`.

        Ordered by `(updated_at_ms, thread_id)` descending. `prefix` keeps the
        threads whose id starts with it; `after` is the `(updated_at_ms, thread_id)`
        of the last thread of the previous page (keyset pagination).
        """
        ...

    async def delete_unreferenced_chunks(self, limit: int) -> int:
        """Delete up to `limit` chunks no snapshot references; returns how many."""
        ...


@runtime_checkable
class PacksSnapshots(Protocol):
    """A snapshot store with a compare-and-swap of snapshot records."""

    async def swap_snapshots(
        self,
        thread_id: str,
        old: Sequence[SnapshotRecord],
        *,
        by: SnapshotRecord | None,
        chunks: Mapping[str, bytes] = NO_CHUNKS,
        durable: bool = True,
    ) -> bool:
        """Replace snapshots, as they were read, by one record (a pack) or by none.

        In one transaction: if every record of `old` is still stored at its key
        (thread, namespace, checkpoint_id) with the same manifest bytes, and no
        record but one of `old` is stored at `by`'s key, delete them, insert `by`
        (if given; it may take the key of one of them, as a pack rewritten in
        place does), store `chunks` and return True. Otherwise change nothing and
        return False: another engine changed, swapped or deleted one of them
        meanwhile, and the caller reads again before it tries again.

        `chunks` are the new chunks `by` names, as for `save_snapshot` (a hash
        already present is left alone); the others it names must be stored. A
        chunk `old` named and `by` does not is left for collection. The swap is
        atomic with `delete_unreferenced_chunks`: no collection can take `chunks`
        before the swap (as one could after a `put_chunks`).

        With `durable=False` the swap only saves space (packing): the store may
        commit it less durably than other writes (SQLite: without an fsync),
        provided that a swap it loses is lost whole, the records it would have
        replaced staying. A swap that deletes rows (`Engine.delete_states`) is
        durable like any write.

        Raises:
            ValueError: a record of `old`, or `by`, belongs to another thread
                (`packing.check_swap`), before anything is read or written.
            ChunksMissing: `by` names a chunk neither given nor stored (a
                collection deleted it); nothing changed.
        """
        ...


@runtime_checkable
class RunListing(Protocol):
    """Listing and counting runs and their inputs: `Engine.runs`, the CLI, the dashboard."""

    async def list_runs(self, query: RunQuery) -> list[RunRecord]:
        """Runs matching every filter in `query`, newest first."""
        ...

    async def count_runs(self, query: RunQuery) -> dict[tuple[str, str | None], int]:
        """How many runs match every filter of `query`, by `(status, queue)`.

        `limit` and `after` are ignored; combinations with no run are left out.
        """
        ...

    async def list_inputs(self, run_id: str) -> list[InputRecord]:
        """Every input sent to the run, with when it was sent, oldest first."""
        ...


@runtime_checkable
class Maintenance(Protocol):
    """Retention and key rotation: `Engine.gc` deletes runs, `Engine.rekey` rewrites payloads."""

    async def delete_runs(self, run_ids: Collection[str]) -> DeleteResult:
        """Delete terminal runs with their journals and inputs, atomically per call."""
        ...

    async def scan_payloads(
        self, kind: PayloadKind, *, after: tuple[str | int, ...] | None, limit: int
    ) -> list[Payload]:
        """Up to `limit` non-null payloads of a kind, in key order, after `after`."""
        ...

    async def replace_payload(self, payload: Payload, *, data: bytes) -> bool:
        """Replace a payload only if it still holds `payload.data` (compare and swap).

        Returns False, changing nothing, if it changed or went away meanwhile.
        """
        ...


@runtime_checkable
class Store(RunStore, SnapshotStore, PacksSnapshots, RunListing, Maintenance, Protocol):
    """Everything a full store offers, as the built-in stores do (see the module docstring)."""
