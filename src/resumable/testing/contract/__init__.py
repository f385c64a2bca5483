"""The store contract: `StoreContract`, the behaviour every store must show.

A store proves it follows the `resumable.stores.protocol` contract by running
these tests on itself: subclass `StoreContract` and give it a `store` fixture.
The tests of a part the store does not implement (`SnapshotStore`, `RunListing`,
`Maintenance`, `PacksSnapshots`, the archive capabilities) skip, naming the part.

Modules, one per part of the protocol:

- `records`: the records and identifiers the tests build (`run_record`, `T0`, ...)
- `runs`: runs, leases, claims, versions, the journal, inputs (`RunStore`)
- `snapshots`: chunks, snapshots, threads, payload scans, packing (`SnapshotStore`)
- `maintenance`: deleting runs, scanning and swapping payloads (`Maintenance`)
- `archive`: a run's rows swapped for a stub and back (`SupportsArchive`)
- `thread_archive`: a thread's snapshots swapped for a stub (`SupportsThreadArchive`)
- `step_cache`: the step cache's index, key to journal row (`SupportsStepCache`)
- `schedules`: schedule definitions, paused, last tick (`KeepsSchedules`)
- `feeds`: runs' append-only channels of events and chunks (`KeepsFeeds`)
"""

from __future__ import annotations

from resumable.testing.contract.archive import ArchiveStoreContract
from resumable.testing.contract.feeds import FeedContract
from resumable.testing.contract.maintenance import MaintenanceContract
from resumable.testing.contract.records import (
    T0,
    run_record,
    snapshot_record,
    step_record,
)
from resumable.testing.contract.runs import RunStoreContract
from resumable.testing.contract.schedules import ScheduleStoreContract
from resumable.testing.contract.snapshots import SnapshotStoreContract
from resumable.testing.contract.step_cache import StepCacheContract
from resumable.testing.contract.thread_archive import ThreadArchiveContract

__all__ = ["T0", "StoreContract", "run_record", "snapshot_record", "step_record"]


class StoreContract(
    RunStoreContract,
    SnapshotStoreContract,
    MaintenanceContract,
    ArchiveStoreContract,
    ThreadArchiveContract,
    StepCacheContract,
    ScheduleStoreContract,
    FeedContract,
):
    """Behaviour every Store must show. Subclass it and provide a `store` fixture.

    Example:
        ```python
        class TestMyStore(StoreContract):
            @pytest.fixture
            async def store(self) -> AsyncIterator[Store]:
                store = MyStore(...)
                yield store
                await store.close()
        ```
    """
