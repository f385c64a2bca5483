"""What a store offers beyond `RunStore`, declared as small Protocols, found once.

A store implements `RunStore` (runs, leases, journal, inputs). Everything else is
optional, and each option is a Protocol a store satisfies by having its members:

| Protocol | members | what it buys |
| --- | --- | --- |
| `SnapshotStore` | chunks, snapshots, threads | `save_state`, `load_state`, LangGraph |
| `PacksSnapshots` | `swap_snapshots` | older snapshots packed: less space |
| `RunListing` | `list_runs`, `count_runs`, `list_inputs` | `runs()`, CLI, dashboard |
| `Maintenance` | `delete_runs`, `scan/replace_payload` | `gc()`, `rekey()` |
| `NeedsOpen` | `async open()` | `open_store` connects and migrates up front |
| `SupportsWakeUp` | `async wait_for_work(timeout_s)` | workers wake on new work, not a poll |
| `RunsOnAnyLoop` | `any_loop = True` | sync callers drive it on their own thread |
| `LocalWrites` | `local_writes = True` | its writes are not timed out one by one |
| `ReportsCommitBatches` | `add_commit_listener` | the commit batch size metric |
| `StreamsPayloads` | `streams`, `stream_with`, `put_sealed` | large results move a chunk at a time |
| `KeepsObjects` | `collect_garbage`, `archive_finished`, `restore_archived[_thread]` | `gc()` of objects, `archive()` |
| `SupportsStepCache` | `put_cache_entries`, `lookup_cache`, `clear_cache` | `@step(cache=...)`, `rerun` |
| `KeepsSchedules` | `save_schedule`, `list_schedules`, `set_schedule_paused`, `mark_schedule_ticked` | scheduled runs |
| `KeepsFeeds` | `append_feed`, `read_feed` | `publish`/`events`/`watch`, streaming steps |

`Capabilities.of(store)` checks them all once, when the engine (or `open_store`)
takes the store, and whoever needs one is handed the typed reference it holds,
instead of probing the store with `getattr` at each use. A call that needs a part
the store lacks asks `Capabilities.snapshot_part` (`listing_part`,
`maintenance_part`, `full_store`), which raises `CapabilityMissing` naming the
part, the call and the store. A store that wraps another (`WrapsStore`, like
`OffloadStore`) offers the parts and the optional capabilities of the store it
wraps, and the payload streams it adds; the step cache is looked up through the
wrapper (which resolves a value it offloaded) when both have it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol, cast, runtime_checkable

from resumable.errors import CapabilityMissing
from resumable.stores.archive import Archived
from resumable.stores.feeds import FeedEntry
from resumable.stores.offload_stream import Opener, Sealed
from resumable.stores.protocol import (
    Maintenance,
    PacksSnapshots,
    RunListing,
    RunStore,
    ScheduleRecord,
    SnapshotStore,
    Store,
)
from resumable.stores.step_cache import SupportsStepCache


@runtime_checkable
class NeedsOpen(Protocol):
    """A store that connects (and creates or migrates its schema) in `open`.

    Its other methods open it on first use too; `open_store` calls `open` so
    that a bad URL or a newer schema is reported where the store is opened.
    """

    async def open(self) -> object:
        """Connect and migrate; idempotent. Returns the store."""
        ...


@runtime_checkable
class SupportsWakeUp(Protocol):
    """A store that can tell an idle worker new work arrived (PostgreSQL, Redis)."""

    async def wait_for_work(self, timeout_s: float) -> None:
        """Return when a run may have become claimable, or after `timeout_s`.

        Returning early without work is fine (the worker claims and finds none);
        it must never raise: a failed notification channel just sleeps.
        """
        ...


@runtime_checkable
class RunsOnAnyLoop(Protocol):
    """A store whose coroutines may run on any event loop, in any thread.

    A store declares it with a class attribute `any_loop = True` when it keeps no
    client bound to the loop that opened it (SQLite's own threads and the memory
    store qualify; psycopg's pool and redis-py's asyncio client do not). Callers
    without a loop may then drive it on a private loop of their own thread instead
    of crossing to a bridge thread. It promises nothing about calls made from
    several threads at once: such callers serialize their calls.

    A store without it still serves one loop after another, as consecutive
    `asyncio.run()` calls do: PostgreSQL and Redis close their clients with the
    loop they belong to and open new ones on the next (`stores.loopend`).
    """

    any_loop: bool


@runtime_checkable
class LocalWrites(Protocol):
    """A store whose writes wait on no server: each returns or raises on its own.

    A store declares it with a class attribute `local_writes = True` when its
    writes reach no other machine: the memory store, and SQLite, whose wait for
    another process's write lock is bounded by its `busy_timeout_ms`. The engine
    gives each write to any other store at most the rest of `store_retry_s`
    (`commits.durably`): a pool waiting for a server that is gone would otherwise
    hang the run. Such a store's writes are not timed out one by one, which
    saves a timer per step; `store_retry_s` still bounds their retries.

    A wrapper does not inherit it (`OffloadStore` uploads to an object store),
    nor does a subclass: it is read from the class that declares it.
    """

    local_writes: bool


def writes_locally(store: RunStore) -> bool:
    """Whether the class of `store` declares `LocalWrites`.

    Its class, not the object: a wrapper does not inherit it, not even one that
    forwards every attribute it lacks to the store it wraps (`__getattr__`).
    """
    return vars(type(store)).get("local_writes") is True


@runtime_checkable
class ReportsCommitBatches(Protocol):
    """A store that writes concurrent step commits together.

    PostgresStore groups the `commit_step` calls that queue while a write is in
    flight into one transaction; the engine reports each group's size
    (`resumable_commit_batch_size`) when it is made with observers.
    """

    def add_commit_listener(self, listener: Callable[[int], None]) -> None:
        """Call `listener(size)` after each transaction of step commits is written.

        `size` counts the step records it wrote (1 for a lone commit). The
        listener runs on the store's event loop; it must not raise or block.
        """
        ...


@runtime_checkable
class StreamsPayloads(Protocol):
    """A store that moves large payloads a chunk at a time (`OffloadStore`).

    Down: a large result is read through the frame reader `stream_with` gave it
    (the engine's `Serde.reader`), never whole in memory. Up, when `streams` is
    True (its object store streams): the engine seals a large result on demand
    and hands it to `put_sealed`, which uploads it as it is made and returns what
    the row keeps in its place; the row commits only after that returns.
    """

    @property
    def streams(self) -> bool:
        """Whether `put_sealed` uploads a frame a chunk at a time."""
        ...

    def stream_with(self, opener: Opener) -> None:
        """Read large results and run payloads through `opener`'s sinks."""
        ...

    async def put_sealed(
        self, sealed: Sealed, *, run_id: str, seq: int | None
    ) -> bytes:
        """Upload a frame made on demand; what the row keeps in its place.

        Raises:
            CheckpointWriteError: the object store did not take it.
        """
        ...


@runtime_checkable
class KeepsObjects(Protocol):
    """A store whose payloads may live in an object store (`OffloadStore`).

    `Engine.gc` deletes the objects no row references any more; `Engine.archive`
    moves finished runs' journals and cold threads' snapshots into it, and
    `unarchive`/`unarchive_thread` put them back.
    """

    async def collect_garbage(self, *, older_than_ms: int, now_ms: int) -> int:
        """Delete unreferenced objects older than `older_than_ms`; how many."""
        ...

    async def archive_finished(
        self,
        *,
        updated_before_ms: int,
        limit: int,
        now_ms: int,
        prepare: Callable[[str], Awaitable[Collection[tuple[str, str]] | None]]
        | None = None,
    ) -> list[Archived]:
        """Archive up to `limit` finished runs and `limit` threads gone cold."""
        ...

    async def restore_archived(self, run_id: str) -> object | None:
        """Put an archived run's rows back; None if it was not archived."""
        ...

    async def restore_archived_thread(self, thread_id: str) -> object | None:
        """Put a thread's archived snapshots back; None if none was archived."""
        ...


@runtime_checkable
class KeepsSchedules(Protocol):
    """A store that keeps schedules: their definitions, paused or not, last tick.

    Scheduled runs are started by workers (`resumable._engine.schedules`): each
    tick's run id is derived from the schedule and the tick, so `create_run`'s
    uniqueness starts it once however many workers see it due. What this adds is
    the state every worker and the CLI share.
    """

    async def save_schedule(self, record: ScheduleRecord) -> ScheduleRecord:
        """Record a schedule's definition; what the store now holds.

        A new one is stored as given. One of that name already there takes the
        definition (`workflow`, `cron`, `tz`, `catch_up`, `updated_at_ms`) and keeps
        its state (`paused`, `last_tick_ms`, `created_at_ms`).
        """
        ...

    async def list_schedules(self) -> list[ScheduleRecord]:
        """Every schedule, by name."""
        ...

    async def set_schedule_paused(
        self, name: str, *, paused: bool, through_ms: int | None, now_ms: int
    ) -> ScheduleRecord | None:
        """Pause or resume a schedule; None if there is none of that name.

        `through_ms`, when given, also marks every tick up to it as passed (as
        `mark_schedule_ticked` does), so a resumed schedule does not start the
        ticks that fell due while it was paused.
        """
        ...

    async def mark_schedule_ticked(
        self, name: str, *, tick_ms: int, now_ms: int
    ) -> bool:
        """Raise `last_tick_ms` to `tick_ms` (never lower it); whether it rose.

        False when it was at `tick_ms` or later already (another worker marked
        it first), or there is no such schedule.
        """
        ...


@runtime_checkable
class KeepsFeeds(Protocol):
    """A store that keeps each run's feed: progress events and streamed chunks.

    A feed is a set of append-only channels per run (`stores.feeds`). Entries are
    numbered from 1 per channel in append order; `delete_runs` deletes a run's
    feed with it. Appending to a run the store does not hold raises `RunNotFound`.
    """

    async def append_feed(
        self,
        run_id: str,
        channel: str,
        payloads: Sequence[bytes],
        *,
        now_ms: int,
        once_key: str | None = None,
    ) -> int | None:
        """Append `payloads` to the channel, in order, in one transaction.

        With `once_key`, append nothing if the channel already took an append with
        that once_key (and return None): a replayed publish is not appended twice.

        Returns:
            The offset of the last entry appended; None if the once_key was seen.
        """
        ...

    async def read_feed(
        self, run_id: str, channel: str, *, after: int, limit: int
    ) -> list[FeedEntry]:
        """Up to `limit` entries of the channel with offsets past `after`, in order."""
        ...


@runtime_checkable
class WrapsStore(Protocol):
    """A store that adds to another, as `OffloadStore` does.

    Its parts (snapshots, packs, listing, maintenance) and optional capabilities
    (open, wake-up, any loop, commit batches) are those of `inner`.
    """

    inner: RunStore


@dataclass(frozen=True, slots=True, kw_only=True)
class Capabilities:
    """What one store offers beyond `RunStore`, as `Capabilities.of` found it."""

    snapshots: bool = False
    """It implements `SnapshotStore`."""
    packs: bool = False
    """It implements `SnapshotStore` and `PacksSnapshots`: the engine packs older
    snapshots (without it they stay loose, and everything else works the same)."""
    listing: bool = False
    """It implements `RunListing`."""
    maintenance: bool = False
    """It implements `Maintenance`."""
    any_loop: bool = False
    """It runs on any event loop (`RunsOnAnyLoop` with `any_loop = True`)."""
    local_writes: bool = False
    """Its writes wait on no server (`LocalWrites`, declared by the store itself)."""
    opener: NeedsOpen | None = None
    """Where to call `open()`, if the store has one."""
    wake_up: SupportsWakeUp | None = None
    """Where to call `wait_for_work()`, if the store can notify."""
    commit_batches: ReportsCommitBatches | None = None
    """Where to add a commit listener, if the store groups commits."""

    payload_streams: StreamsPayloads | None = None
    """Where to hand the frame reader and large results, if the store streams
    payloads (`StreamsPayloads`: an `OffloadStore`)."""
    objects: KeepsObjects | None = None
    """Where to collect and archive to, if the store keeps payloads in an object
    store (`KeepsObjects`: an `OffloadStore`)."""
    step_cache: SupportsStepCache | None = None
    """Where to look the step cache up, if the store keeps its index
    (`SupportsStepCache`); without it a cached step always executes."""
    schedules: KeepsSchedules | None = None
    """Where schedules are kept, if the store keeps them (`KeepsSchedules`)."""
    feeds: KeepsFeeds | None = None
    """Where runs' progress events and streamed chunks go (`KeepsFeeds`)."""

    @classmethod
    def of(cls, store: RunStore) -> Capabilities:
        """Check every capability of `store` (once: keep the result)."""
        optional = store
        while isinstance(optional, WrapsStore):
            optional = optional.inner

        def has(part: type) -> bool:
            # a wrapper forwards a part to the store it wraps: both must have it
            return isinstance(store, part) and isinstance(optional, part)

        return cls(
            snapshots=has(SnapshotStore),
            packs=has(SnapshotStore) and has(PacksSnapshots),
            listing=has(RunListing),
            maintenance=has(Maintenance),
            any_loop=isinstance(optional, RunsOnAnyLoop) and optional.any_loop is True,
            local_writes=writes_locally(store),
            opener=optional if isinstance(optional, NeedsOpen) else None,
            wake_up=optional if isinstance(optional, SupportsWakeUp) else None,
            commit_batches=(
                optional if isinstance(optional, ReportsCommitBatches) else None
            ),
            payload_streams=store if isinstance(store, StreamsPayloads) else None,
            objects=store if isinstance(store, KeepsObjects) else None,
            # a wrapper's own: it resolves the offloaded value its row points to
            step_cache=(
                cast("SupportsStepCache", store) if has(SupportsStepCache) else None
            ),
            schedules=optional if isinstance(optional, KeepsSchedules) else None,
            feeds=optional if isinstance(optional, KeepsFeeds) else None,
        )

    def snapshot_part(self, store: RunStore, *, call: str) -> SnapshotStore:
        """`store` as the `SnapshotStore` it was found to be.

        Raises:
            CapabilityMissing: it is not one; the message names `call`.
        """
        if not self.snapshots:
            raise CapabilityMissing(
                store=store.url, capability="SnapshotStore", call=call
            )
        return cast("SnapshotStore", store)  # the isinstance check `of` made

    def listing_part(self, store: RunStore, *, call: str) -> RunListing:
        """`store` as the `RunListing` it was found to be.

        Raises:
            CapabilityMissing: it is not one; the message names `call`.
        """
        if not self.listing:
            raise CapabilityMissing(store=store.url, capability="RunListing", call=call)
        return cast("RunListing", store)  # the isinstance check `of` made

    def maintenance_part(self, store: RunStore, *, call: str) -> Maintenance:
        """`store` as the `Maintenance` it was found to be.

        Raises:
            CapabilityMissing: it is not one; the message names `call`.
        """
        if not self.maintenance:
            raise CapabilityMissing(
                store=store.url, capability="Maintenance", call=call
            )
        return cast("Maintenance", store)  # the isinstance check `of` made

    def feed_part(self, store: RunStore, *, call: str) -> KeepsFeeds:
        """Where `store` keeps runs' feeds.

        Raises:
            CapabilityMissing: it keeps none; the message names `call`.
        """
        if self.feeds is None:
            raise CapabilityMissing(store=store.url, capability="KeepsFeeds", call=call)
        return self.feeds

    def full_store(self, store: RunStore, *, call: str) -> Store:
        """`store` as the full `Store` it was found to be (every part).

        Raises:
            CapabilityMissing: it lacks a part; the message names the first.
        """
        parts = {
            "SnapshotStore": self.snapshots,
            "PacksSnapshots": self.packs,
            "RunListing": self.listing,
            "Maintenance": self.maintenance,
        }
        for part, present in parts.items():
            if not present:
                raise CapabilityMissing(store=store.url, capability=part, call=call)
        return cast("Store", store)  # the isinstance checks `of` made

    def schedule_part(self, store: RunStore, *, call: str) -> KeepsSchedules:
        """Where the store keeps schedules.

        Raises:
            CapabilityMissing: it keeps none; the message names `call`.
        """
        if self.schedules is None:
            raise CapabilityMissing(
                store=store.url, capability="KeepsSchedules", call=call
            )
        return self.schedules

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the capabilities found, for messages and `resumable info`."""
        found = {
            "SnapshotStore": self.snapshots,
            "PacksSnapshots": self.packs,
            "RunListing": self.listing,
            "Maintenance": self.maintenance,
            "RunsOnAnyLoop": self.any_loop,
            "LocalWrites": self.local_writes,
            "NeedsOpen": self.opener is not None,
            "SupportsWakeUp": self.wake_up is not None,
            "ReportsCommitBatches": self.commit_batches is not None,
            "StreamsPayloads": self.payload_streams is not None,
            "KeepsObjects": self.objects is not None,
            "SupportsStepCache": self.step_cache is not None,
            "KeepsSchedules": self.schedules is not None,
            "KeepsFeeds": self.feeds is not None,
        }
        return tuple(name for name, present in found.items() if present)
