"""The optional archiving capability: a store that swaps a finished run's rows for a stub.

Declared apart from `Store` so the core protocol stays small; this module builds on
`protocol`, never the reverse. `resumable.stores.coldruns` writes the object and
drives the swap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from resumable.stores.protocol import InputRecord, StepRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchiveStub:
    """What stays of a finished run's journal and inputs moved to an object store.

    See `resumable.stores.coldruns`.
    """

    run_id: str
    key: str
    """The object's key: `runs/<sha256 of its bytes>`, so its bytes are checkable."""
    size: int
    """The object's size in bytes."""
    steps: int
    """How many journal records it holds (steps, ledger entries, batch items)."""
    inputs: int
    """How many inputs it holds."""
    fence: int
    """The run's fence when it was archived: a run taken again since is not archived."""
    archived_at_ms: int
    refers_to: tuple[str, ...] = ()
    """Keys of other objects its records reference (offloaded payloads), which a
    collection of garbage must keep while the stub exists."""


def keys_of(value: object) -> tuple[str, ...]:
    """`ArchiveStub.refers_to` from its stored JSON list; ValueError if it is not one."""
    if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
        raise ValueError(f"not a list of object keys: {value!r:.60}")
    return tuple(value)


@runtime_checkable
class SupportsArchive(Protocol):
    """An optional capability: a store that swaps a finished run's journal for a stub.

    The object holding the rows is written by the caller (`coldruns.archive_run`)
    before `archive_journal` is called, so a crash leaves either the rows or the
    stub, never neither. `delete_runs` deletes a run's stub with the run.
    """

    async def archive_journal(self, stub: ArchiveStub) -> bool:
        """Replace the run's journal records and inputs by `stub`, in one transaction.

        Only if the run has finished, its fence is still `stub.fence`, it has no
        stub, and it holds exactly `stub.steps` journal records and `stub.inputs`
        inputs (what the object holds); otherwise change nothing and return False.
        """
        ...

    async def load_archive_stub(self, run_id: str) -> ArchiveStub | None:
        """The run's stub, or None when its journal is in the store (or no run)."""
        ...

    async def restore_journal(
        self,
        stub: ArchiveStub,
        steps: Sequence[StepRecord],
        inputs: Sequence[InputRecord],
    ) -> bool:
        """Put archived records back and delete the stub, in one transaction.

        Only if the run's stub still names `stub.key`; otherwise change nothing
        and return False. A record whose seq (or input whose key) has a row
        already keeps that row.
        """
        ...

    async def list_archive_stubs(
        self, *, after: str | None, limit: int
    ) -> list[ArchiveStub]:
        """Up to `limit` stubs in run_id order, after the run_id `after`."""
        ...
