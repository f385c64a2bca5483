"""Every built-in store is a full Store and declares its optional capabilities."""

from __future__ import annotations

import pytest
from test_run_store_only import RunsOnly

from resumable import Engine
from resumable.errors import CapabilityMissing
from resumable.stores.capabilities import Capabilities
from resumable.stores.memory import MemoryStore
from resumable.stores.protocol import (
    Maintenance,
    PacksSnapshots,
    RunListing,
    RunStore,
    SnapshotStore,
    Store,
)

PARTS = ("SnapshotStore", "PacksSnapshots", "RunListing", "Maintenance")
DECLARED = {
    "memory": {
        "RunsOnAnyLoop",
        "LocalWrites",
        "SupportsStepCache",
        "KeepsSchedules",
        "KeepsFeeds",
    },
    "sqlite": {
        "RunsOnAnyLoop",
        "LocalWrites",
        "NeedsOpen",
        "SupportsStepCache",
        "KeepsSchedules",
        "KeepsFeeds",
    },
    "postgres": {
        "NeedsOpen",
        "SupportsWakeUp",
        "ReportsCommitBatches",
        "SupportsStepCache",
        "KeepsSchedules",
        "KeepsFeeds",
    },
    "redis": {
        "NeedsOpen",
        "SupportsWakeUp",
        "SupportsStepCache",
        "KeepsSchedules",
        "KeepsFeeds",
    },
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


async def test_a_part_a_store_lacks_raises_naming_the_part_the_call_and_the_store() -> (
    None
):
    store = RunsOnly()
    found = Capabilities.of(store)
    with pytest.raises(CapabilityMissing) as missing:
        found.snapshot_part(store, call="save_state")
    assert str(missing.value) == (
        "save_state needs a store that implements SnapshotStore, and runs-only:// "
        "does not; use a store that does (memory://, sqlite://, postgresql://, "
        "redis://) or add SnapshotStore's methods to yours (docs/stores.md)"
    )
    for ask, part in (
        (found.listing_part, "RunListing"),
        (found.maintenance_part, "Maintenance"),
        (found.full_store, "SnapshotStore"),
    ):
        with pytest.raises(CapabilityMissing) as missing:
            ask(store, call="c")
        assert (missing.value.capability, missing.value.call) == (part, "c")


async def test_a_full_store_is_its_own_parts() -> None:
    store = MemoryStore()
    found = Capabilities.of(store)
    assert found.snapshot_part(store, call="c") is store
    assert found.listing_part(store, call="c") is store
    assert found.maintenance_part(store, call="c") is store
    assert found.full_store(store, call="c") is store


def test_a_worker_with_schedules_on_a_store_without_them_refuses_to_start() -> None:
    from resumable import workflow

    @workflow(name="tests.unkept")
    async def unkept() -> None: ...

    engine = Engine(RunsOnly())
    engine.worker()  # no schedule: nothing is needed
    engine.schedule(unkept, "* * * * *")
    with pytest.raises(CapabilityMissing, match="KeepsSchedules"):
        engine.worker()
