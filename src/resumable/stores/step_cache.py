"""The step cache's index: which recorded step serves a cache key (`SupportsStepCache`).

A step declared with `@step(cache=...)` records, once it succeeded, an entry
`key -> (run_id, seq)` naming the journal row that holds its value. A later call
with the same key, in any run, is served from that row: the engine copies the
value into its own run (`_engine/step_cache.py`), so the entry is only an index
and never the value's only home. An entry whose row is gone (the run was deleted
or archived) is a miss, never an error.

Stores declare the capability by implementing the Protocol below; each method is
one transaction, and time is passed in, never read from a clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from resumable.stores.protocol import StepRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheEntry:
    """One key of the step cache, and the journal row holding its value."""

    key: str
    """The cache key (a hex digest the engine computes: step, code version, args)."""
    step: str
    """The step's journal name (`resumable cache clear --step`)."""
    workflow: str
    """The workflow of the run that recorded it (`resumable cache clear --workflow`)."""
    run_id: str
    seq: int
    """The row holding the value: `(run_id, seq)` in the journal."""
    created_at_ms: int
    expires_at_ms: int | None = None
    """After this the entry is a miss; None: it never expires."""

    def is_live(self, now_ms: int) -> bool:
        """Whether the entry still serves hits at `now_ms`."""
        return self.expires_at_ms is None or now_ms < self.expires_at_ms


@runtime_checkable
class SupportsStepCache(Protocol):
    """An optional capability: a store that keeps the step cache's index."""

    async def put_cache_entries(self, entries: Sequence[CacheEntry]) -> None:
        """Record `entries` in one transaction.

        Each replaces any entry of its key (the last write wins).
        """
        ...

    async def lookup_cache(
        self, key: str, *, now_ms: int
    ) -> tuple[CacheEntry, StepRecord] | None:
        """The live entry of `key` and the journal row it names, in one read.

        None when there is no entry, it expired at `now_ms`, or its row is gone.
        """
        ...

    async def clear_cache(
        self, *, step: str | None = None, workflow: str | None = None
    ) -> int:
        """Delete the entries of `step` and of `workflow` (None: any); how many."""
        ...
