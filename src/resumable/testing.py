"""Test helpers: `FakeClock`, `crash_test`, and `StoreContract`, the suite every store must pass.

`crash_test` (from `resumable.crashtest`) kills your workflow at every step
boundary in turn and checks each resume; see that module.

A third-party store runs the same suite as ours::

    class TestMyStore(StoreContract):
        @pytest.fixture
        async def store(self) -> AsyncIterator[Store]:
            store = MyStore(...)
            yield store
            await store.close()
"""

from __future__ import annotations

import asyncio

from resumable._contract_archive import ArchiveStoreContract
from resumable._contract_maintenance import MaintenanceContract
from resumable._contract_records import T0, run_record, snapshot_record, step_record
from resumable._contract_runs import RunStoreContract
from resumable._contract_snapshots import SnapshotStoreContract
from resumable._contract_thread_archive import ThreadArchiveContract
from resumable._tamper import (
    Mutation,
    StoredField,
    TamperFailure,
    TamperReport,
    TamperSubject,
    TamperSuite,
    decompression_bomb,
    mutations_of,
    plain_frame,
)
from resumable.crashtest import CrashReport, Trial, crash_test, record_effect

__all__ = [
    "T0",
    "CrashReport",
    "FakeClock",
    "Mutation",
    "StoreContract",
    "StoredField",
    "TamperFailure",
    "TamperReport",
    "TamperSubject",
    "TamperSuite",
    "Trial",
    "crash_test",
    "decompression_bomb",
    "mutations_of",
    "plain_frame",
    "record_effect",
    "run_record",
    "snapshot_record",
    "step_record",
]


class FakeClock:
    """A clock that moves only when told (or when a sleeper asks it to).

    `sleep()` advances the clock by the requested time and yields once, so code
    that waits for an hour finishes at once with the clock an hour later.
    """

    def __init__(self, start_ms: int = T0) -> None:
        self._now_ms = start_ms
        self.sleeps: list[float] = []
        """Every duration passed to sleep(), in order."""

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, seconds: float) -> None:
        """Move the clock forward."""
        self._now_ms += int(seconds * 1000)

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)
        await asyncio.sleep(0)


class StoreContract(
    RunStoreContract,
    SnapshotStoreContract,
    MaintenanceContract,
    ArchiveStoreContract,
    ThreadArchiveContract,
):
    """Behaviour every Store must show. Subclass it and provide a `store` fixture."""
