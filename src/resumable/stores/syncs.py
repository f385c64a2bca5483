"""Durable writes that commit in a caller's lock and reach the disk after it.

A store that fsyncs each durable commit (SQLite with durability=full) makes its
caller wait for the disk inside the call, holding whatever lock the caller holds.
`ResumableSaver` holds its turn across each call, so LangGraph's `put`, called from
another thread just after `put_writes`, waited for put_writes' fsync as well as
its work, and the step waited for both.

Inside `with DeferredSyncs() as owed:` a durable write of such a store commits
and returns at once, leaving its sync to `owed` (`owe`). The caller releases its
lock, then calls `owed.wait()`, which returns once those writes are on disk, or
raises if a sync failed. Until it returns nothing of the block is durable: the
caller reports the writes done only after it, even when the block raised.

A store that knows nothing of this syncs each write as it commits: the block
changes nothing for it. A write made after the block ended (by a task it started)
syncs itself too.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from types import TracebackType
from typing import Final, Self

Sync = Callable[[int], None]
"""A store's sync: returns once every commit numbered up to its argument is on
disk. Equal syncs (a bound method of one store, each time) are made once."""

_OWED: Final[contextvars.ContextVar[DeferredSyncs | None]] = contextvars.ContextVar(
    "resumable_deferred_syncs", default=None
)


class DeferredSyncs:
    """The syncs that the durable writes of one `with` block owe; `wait` makes them."""

    __slots__ = ("_open", "_owed", "_token")

    def __init__(self) -> None:
        self._owed: dict[Sync, int] = {}  # each store's sync, and the last commit
        self._open = False
        self._token: contextvars.Token[DeferredSyncs | None] | None = None

    def __enter__(self) -> Self:
        self._token = _OWED.set(self)
        self._open = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._open = False  # a task that outlives the block carries a copy of it
        if self._token is not None:
            _OWED.reset(self._token)
            self._token = None

    def wait(self) -> None:
        """Return once every write the block left to it is on disk.

        Raises:
            StoreError: a sync failed; those writes may not be on disk.
        """
        owed, self._owed = self._owed, {}
        for sync, upto in owed.items():
            sync(upto)


def owe(sync: Sync, upto: int) -> bool:
    """For stores: leave `sync(upto)` to the enclosing block's `wait`.

    Returns False, and the write must make `sync(upto)` itself before its call
    returns, outside such a block.
    """
    owed = _OWED.get()
    if owed is None or not owed._open:
        return False
    owed._owed[sync] = max(owed._owed.get(sync, 0), upto)
    return True


def deferring() -> bool:
    """Whether a durable write made now may leave its sync to a block (`owe`)."""
    owed = _OWED.get()
    return owed is not None and owed._open
