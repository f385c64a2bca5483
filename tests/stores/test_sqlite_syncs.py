"""SQLite's WAL fsyncs: numbered commits, shared fsyncs, syncs deferred past a lock."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from resumable.errors import StoreError
from resumable.stores.sqlite import SQLiteStore
from resumable.stores.sqlite.wal import WalSyncs
from resumable.stores.syncs import DeferredSyncs
from resumable.testing import snapshot_record

WAIT_S = 10  # a bound on waiting for another thread, never reached when all is well


class GatedDisk:
    """A `sync_file` that records each fsync and holds the first until released."""

    def __init__(self) -> None:
        self.started: list[int] = []  # the commit count when each fsync began
        self.ended = 0
        self.first_started = threading.Event()
        self.release = threading.Event()
        self.error: OSError | None = None
        self.count_commits: Callable[[], int] = lambda: 0

    def __call__(self, fd: int) -> None:
        self.started.append(self.count_commits())
        if len(self.started) == 1:
            self.first_started.set()
            assert self.release.wait(WAIT_S)
        if self.error is not None:
            raise self.error
        os.fsync(fd)
        self.ended += 1


@pytest.fixture
def gated(tmp_path: Path) -> tuple[WalSyncs, GatedDisk]:
    Path(f"{tmp_path / 'x.db'}-wal").write_bytes(b"frames")
    disk = GatedDisk()
    syncs = WalSyncs("sqlite:///x.db", tmp_path / "x.db", disk)
    disk.count_commits = lambda: syncs.committed
    return syncs, disk


def _blocked(future: Future[None]) -> bool:
    with contextlib.suppress(TimeoutError):
        future.result(timeout=0.05)
    return not future.done()


def test_a_commit_made_during_an_fsync_starts_its_own_at_once(
    gated: tuple[WalSyncs, GatedDisk],
) -> None:
    """The fsync under way began before it: it cannot cover it, so waiting for
    it to end first would only add its remaining time."""
    syncs, disk = gated
    first = syncs.note_commit()
    with ThreadPoolExecutor(2) as pool:
        early = pool.submit(syncs.through, first)
        assert disk.first_started.wait(WAIT_S)
        later = pool.submit(syncs.through, syncs.note_commit())
        later.result(WAIT_S)  # its own fsync, begun with both commits made
        assert _blocked(early)  # still waiting for the first
        disk.release.set()
        early.result(WAIT_S)
    assert disk.started == [1, 2]
    assert disk.ended == 2


def test_a_commit_made_before_an_fsync_began_waits_for_that_one(
    gated: tuple[WalSyncs, GatedDisk],
) -> None:
    syncs, disk = gated
    first, second = syncs.note_commit(), syncs.note_commit()
    with ThreadPoolExecutor(2) as pool:
        covering = pool.submit(syncs.through, second)
        assert disk.first_started.wait(WAIT_S)
        covered = pool.submit(syncs.through, first)
        assert _blocked(covered)  # it waits for the fsync under way, starts none
        assert disk.started == [2]
        disk.release.set()
        covering.result(WAIT_S)
        covered.result(WAIT_S)
    assert disk.started == [2]
    assert disk.ended == 1


def test_commits_made_before_an_fsync_starts_share_it(
    gated: tuple[WalSyncs, GatedDisk],
) -> None:
    syncs, disk = gated
    numbers = [syncs.note_commit() for _ in range(5)]
    disk.release.set()
    with ThreadPoolExecutor(5) as pool:
        list(pool.map(syncs.through, numbers))
    assert disk.started == [5]  # one fsync, begun once all five had committed
    syncs.through(3)  # already on disk: no fsync
    assert disk.ended == 1


def test_a_failed_fsync_fails_the_commits_it_covered_even_after_a_later_success(
    gated: tuple[WalSyncs, GatedDisk],
) -> None:
    """Linux marks the pages it failed to write clean: a later fsync does not save them."""
    syncs, disk = gated
    disk.release.set()
    syncs.through(syncs.note_commit())  # on disk
    covered = syncs.note_commit()
    disk.error = OSError(5, "Input/output error")
    with pytest.raises(StoreError, match=r"may not be on disk.*check the disk"):
        syncs.through(covered)
    disk.error = None
    syncs.through(syncs.note_commit())  # a later commit syncs again
    with pytest.raises(StoreError, match="may not be on disk"):
        syncs.through(covered)
    syncs.through(1)  # synced before the failure: still fine
    assert len(disk.started) == 3


# --- deferred syncs on SQLiteStore ---------------------------------------------------
class DiskSpy:
    """A store's `sync_file`: records each WAL sync and makes it, or fails with `error`.

    `gate` is the store's inline lock: holding it sends every call to the store thread.
    """

    def __init__(self) -> None:
        self.events: list[str] = []
        self.error: OSError | None = None
        self.gate = threading.Lock()

    def __call__(self, fd: int) -> None:
        if self.error is not None:
            raise self.error
        self.events.append("WAL synced")
        os.fsync(fd)


@pytest.fixture
async def spied(tmp_path: Path) -> tuple[SQLiteStore, DiskSpy]:
    disk = DiskSpy()
    store = await SQLiteStore(
        f"sqlite:///{tmp_path / 'store.db'}", sync_file=disk, inline_lock=disk.gate
    ).open()
    await store.save_snapshot(snapshot_record("t", "0000", ()))  # opens inline
    disk.events.clear()
    return store, disk


@pytest.mark.parametrize("on_thread", [False, True], ids=["inline", "store-thread"])
async def test_a_durable_write_in_a_deferred_block_commits_and_syncs_in_wait(
    spied: tuple[SQLiteStore, DiskSpy], on_thread: bool
) -> None:
    store, disk = spied
    owed = DeferredSyncs()
    try:
        held = disk.gate if on_thread else contextlib.nullcontext()
        with owed, held:
            await store.save_snapshot(snapshot_record("t", "0001", ()))
            assert disk.events == []  # committed, its fsync left to the block
        found = await store.list_snapshots("t")
        assert [r.checkpoint_id for r in found] == ["0001", "0000"]  # readable now
        assert disk.events == []
        owed.wait()
        assert disk.events == ["WAL synced"]
        owed.wait()  # nothing more is owed
        assert disk.events == ["WAL synced"]
        await store.save_snapshot(snapshot_record("t", "0002", ()))  # no block
        assert disk.events == ["WAL synced"] * 2
    finally:
        await store.close()


async def test_a_write_made_after_its_block_ended_syncs_itself(
    spied: tuple[SQLiteStore, DiskSpy],
) -> None:
    """A task started in the block carries it on: nobody would wait for its sync."""
    store, disk = spied
    go = asyncio.Event()

    async def later() -> None:
        await go.wait()
        await store.save_snapshot(snapshot_record("t", "0001", ()))

    try:
        owed = DeferredSyncs()
        with owed:
            task = asyncio.ensure_future(later())  # a copy of the block's context
        go.set()
        await task
        assert disk.events == ["WAL synced"]
        owed.wait()
        assert disk.events == ["WAL synced"]
    finally:
        await store.close()


async def test_a_failed_deferred_sync_raises_from_wait(
    spied: tuple[SQLiteStore, DiskSpy],
) -> None:
    store, disk = spied
    disk.error = OSError(5, "Input/output error")
    try:
        owed = DeferredSyncs()
        with owed:
            await store.save_snapshot(snapshot_record("t", "0001", ()))
        with pytest.raises(StoreError, match=r"may not be on disk.*check the disk"):
            owed.wait()
    finally:
        await store.close()
