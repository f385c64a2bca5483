"""Every built-in store is a full Store and declares its optional capabilities."""

from __future__ import annotations

import dataclasses

import pytest

from resumable import Engine
from resumable.errors import ChunksMissing
from resumable.stores.capabilities import Capabilities
from resumable.stores.memory import MemoryStore
from resumable.stores.partial import PartialStore
from resumable.stores.protocol import (
    Maintenance,
    PacksSnapshots,
    RunListing,
    RunStore,
    SnapshotStore,
    Store,
)
from resumable.testing.contract.records import snapshot_record

PARTS = ("SnapshotStore", "PacksSnapshots", "RunListing", "Maintenance")
DECLARED = {
    "memory": {"RunsOnAnyLoop", "LocalWrites"},
    "sqlite": {"RunsOnAnyLoop", "LocalWrites", "NeedsOpen"},
    "postgres": {"NeedsOpen", "SupportsWakeUp", "ReportsCommitBatches"},
    "redis": {"NeedsOpen", "SupportsWakeUp"},
}


async def test_every_built_in_store_implements_every_part(
    store: Store, backend: str
) -> None:
    for part in (RunStore, SnapshotStore, PacksSnapshots, RunListing, Maintenance):
        assert isinstance(store, part), part.__name__
    found = Capabilities.of(store)
    assert set(found.names) == {*PARTS, *DECLARED[backend]}


async def test_the_engine_keeps_a_full_store_as_it_is_and_its_capabilities(
    store: Store, backend: str
) -> None:
    engine = Engine(store)
    assert engine.store is store  # nothing wraps a full store
    assert set(engine.capabilities.names) == {*PARTS, *DECLARED[backend]}
    if "SupportsWakeUp" in DECLARED[backend]:
        waker: object = engine.capabilities.wake_up
        assert waker is store


async def test_a_partial_store_passes_a_swaps_chunks_to_the_store_it_wraps() -> None:
    inner = MemoryStore()
    store = PartialStore(inner, Capabilities(snapshots=True, packs=True))
    await store.save_snapshot(snapshot_record("t", "0001", ()))
    old = await store.list_snapshots("t")
    full = dataclasses.replace(old[0], manifest=b"full", chunk_refs=("n",))
    with pytest.raises(ChunksMissing):
        await store.swap_snapshots("t", old, by=full)
    assert await store.swap_snapshots("t", old, by=full, chunks={"n": b"N"})
    assert await inner.get_chunks(["n"]) == {"n": b"N"}
