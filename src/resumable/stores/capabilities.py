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

`Capabilities.of(store)` checks them all once, when the engine (or `open_store`)
takes the store, and whoever needs one is handed the typed reference it holds,
instead of probing the store with `getattr` at each use. A store that wraps
another (`WrapsStore`, like `OffloadStore`) offers the optional capabilities of
the store it wraps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from resumable.stores.protocol import (
    Maintenance,
    PacksSnapshots,
    RunListing,
    RunStore,
    SnapshotStore,
)


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
class WrapsStore(Protocol):
    """A store that adds to another, as `OffloadStore` does.

    Its optional capabilities (open, wake-up, any loop, commit batches) are those
    of `inner`.
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

    @classmethod
    def of(cls, store: RunStore) -> Capabilities:
        """Check every capability of `store` (once: keep the result)."""
        optional = store
        while isinstance(optional, WrapsStore):
            optional = optional.inner
        return cls(
            snapshots=isinstance(store, SnapshotStore),
            # a wrapper swaps through the store it wraps: that one must pack
            packs=isinstance(store, SnapshotStore)
            and isinstance(store, PacksSnapshots)
            and isinstance(optional, PacksSnapshots),
            listing=isinstance(store, RunListing),
            maintenance=isinstance(store, Maintenance),
            any_loop=isinstance(optional, RunsOnAnyLoop) and optional.any_loop is True,
            local_writes=writes_locally(store),
            opener=optional if isinstance(optional, NeedsOpen) else None,
            wake_up=optional if isinstance(optional, SupportsWakeUp) else None,
            commit_batches=(
                optional if isinstance(optional, ReportsCommitBatches) else None
            ),
        )

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
        }
        return tuple(name for name, present in found.items() if present)
