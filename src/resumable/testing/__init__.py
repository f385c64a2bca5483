"""Test kits: for your workflows, and for the author of a store.

For workflows:

- `resumable.testing.crash`: `crash_test` kills your workflow with SIGKILL at
  every step boundary in turn and checks each resume (`record_effect` counts the
  side effects it checks).
- `FakeClock`: time that moves only when told, so an hour's sleep takes none.

For a store (see "Checking a store of your own" in the documentation):

- `resumable.testing.contract`: `StoreContract`, the behaviour every store must
  show. A third-party store runs the same suite as ours::

      class TestMyStore(StoreContract):
          @pytest.fixture
          async def store(self) -> AsyncIterator[Store]:
              store = MyStore(...)
              yield store
              await store.close()

- `resumable.testing.tamper`: `TamperSuite` damages what the store wrote, one
  value at a time, and checks that the library fails safe.

Every name below is importable from `resumable.testing` itself.
"""

from __future__ import annotations

from resumable.testing.clock import FakeClock
from resumable.testing.contract import (
    T0,
    StoreContract,
    run_record,
    snapshot_record,
    step_record,
)
from resumable.testing.crash import CrashReport, Trial, crash_test, record_effect
from resumable.testing.tamper import (
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
