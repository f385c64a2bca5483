"""Turns that callers take at a store, each making its fsyncs once the lock is free.

A store that commits with an fsync (SQLite, durability=full) makes every caller
wait for the disk inside its call, holding whatever the caller holds.
`SharedTurns` is a lock for callers that take turns at a store. A turn's writes
commit without an fsync (`owe_sync`), and the turn makes the syncs they owe once
it has released the lock: the next caller's turn runs while the disk works, and
every caller still returns only once its writes are on disk.

A caller that nobody waits for can let the next caller go first
(`turn(defer=True)`). LangGraph calls put_writes, then put from another thread,
and in a run with durability="sync" each step waits for put alone. There
`ResumableSaver`'s put_writes waits, up to DEFER_S, for put's turn to start, and
takes its own turn once put's ends, while put's fsync runs: the step no longer
waits for put_writes' turn (a sync step of the LangGraph benchmark: 4-8% less
time here, the two savers' steps interleaved in one process). Each call fsyncs
on its own: 403 WAL fsyncs for a 200-step graph, where leaving put_writes' fsync
to a put already waiting for the lock made 283-365, and kept that put waiting
for put_writes' whole turn.

A deferral that times out means no such call follows (LangGraph's put waits for
the put_writes of DeltaChannel writes, say); after MISSES_MAX of them in a row, a
SharedTurns stops deferring, but for one call in PROBE_EVERY, which tells when
callers follow again.

Stores take part through `owe_sync`; a store that never defers a sync ignores
the turns, and its writes are durable when their own calls return.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator
from typing import Final

Sync = Callable[[], None]
"""What a store makes to put its deferred writes on disk (an fsync of its WAL).

Equal syncs are made once: a bound method of one store compares equal to itself.
"""

DEFER_S: Final = 0.002
"""How long a deferred turn waits for another caller's turn to start. Here put's
turn ends 0.9 ms (median; 1.2 ms at the 3rd quartile) after put_writes is
called, on a busy machine, and starts about half a millisecond sooner."""
MISSES_MAX: Final = 2
"""Deferrals in a row that time out before a SharedTurns stops deferring."""
PROBE_EVERY: Final = 32
"""Once it has stopped: one deferrable call in this many still defers."""


class _Syncs:
    """The syncs owed to the writes of one turn."""

    __slots__ = ("ended", "owed")

    def __init__(self) -> None:
        self.owed: dict[Sync, None] = {}  # insertion-ordered, unique
        # a task started in the turn carries its context on after the turn ends,
        # when nothing would pay what its writes owe: they then sync themselves
        self.ended = False


_SYNCS: Final[contextvars.ContextVar[_Syncs | None]] = contextvars.ContextVar(
    "resumable_syncs", default=None
)


def owe_sync(sync: Sync) -> bool:
    """For stores: whether a write may skip its fsync, owing `sync` to the turn.

    True inside a `SharedTurns` turn (and `sync` is then made when it ends),
    False elsewhere: the write must be durable when its call returns.
    """
    syncs = _SYNCS.get()
    if syncs is None or syncs.ended:
        return False
    syncs.owed[sync] = None
    return True


class SharedTurns:
    """A lock for callers that take turns at a store, syncing after their turns.

    `turn()` holds the lock for one caller at a time. Writes in the turn commit
    without an fsync (`owe_sync`), and the turn releases the lock before the
    syncs they owe are made, even when it raises: it returns (or raises) once
    they are made, and raises if one fails.

    `held()` is a turn whose writes make their own fsyncs as they commit: it
    neither owes syncs nor defers, and a deferred turn sees it start and end as
    any other. `lock` is the lock underneath.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._counts = threading.Condition(threading.Lock())  # told as a turn ends
        # under _counts: turns started and ended so far, deferrals in a row that
        # timed out, and deferrable calls that did not defer since the last one
        self._started = self._ended = self._missed = self._skipped = 0

    @contextlib.contextmanager
    def turn(self, *, defer: bool = False) -> Iterator[None]:
        """Hold the lock; its writes are on disk when this returns or raises.

        Args:
            defer: Let another caller's turn go first, if one starts within
                DEFER_S (see the module doc).

        Raises:
            StoreError: a sync failed; the turn's writes may not be on disk.
        """
        if defer:
            self._defer()
        syncs = _Syncs()
        try:
            with self.held():
                token = _SYNCS.set(syncs)
                try:
                    yield
                finally:
                    _SYNCS.reset(token)
                    syncs.ended = True
        finally:
            for sync in syncs.owed:
                sync()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold the lock, counted as a turn that starts and ends (see `_defer`)."""
        self.lock.acquire()
        try:
            with self._counts:
                self._started += 1
            yield
        finally:
            self.lock.release()
            with self._counts:
                self._ended += 1
                self._counts.notify_all()

    def _defer(self) -> None:
        """Wait until another caller's turn ends, if one ends or starts within DEFER_S.

        Woken as that turn releases the lock, not as it starts: a thread woken
        mid-turn wants the GIL, and slows the turn the step waits for (a sync
        step: ~1.5% longer here).
        """
        with self._counts:
            if self._missed >= MISSES_MAX:
                self._skipped += 1
                if self._skipped < PROBE_EVERY:
                    return
                self._skipped = 0
            started, ended = self._started, self._ended
            if not (
                self._counts.wait_for(lambda: self._ended != ended, DEFER_S)
                or self._started != started  # one started meanwhile and still runs
            ):
                self._missed += 1
                return
            self._counts.wait_for(lambda: self._ended != ended)
            self._missed = 0
