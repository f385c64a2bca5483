"""Fsyncs that callers taking turns at a store make after their turn, and share.

A store that commits with an fsync (SQLite, durability=full) makes every caller
wait for the disk inside its call, holding whatever the caller holds.
`SharedTurns` is a lock for callers that take turns at a store. A turn's writes
commit without an fsync, and the turn makes the syncs they owe once it has
released the lock, so the next caller works meanwhile. A turn that ends while
another caller waits for the lock leaves its syncs to that caller's turn, which
makes them with its own: one fsync for both (group commit).

`ResumableSaver` takes its sync calls' turns so: LangGraph calls `put` while
put_writes, called just before from another thread, still runs, and when `put`
already waits as put_writes' turn ends, the step fsyncs once instead of twice (a
200-step graph: 283 to 365 WAL fsyncs here, depending on how busy the machine
is, against 403).

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


def _make(syncs: dict[Sync, None]) -> None:
    for sync in syncs:
        sync()


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


class _Left:
    """Syncs a turn left to the next one, and whether that one made them."""

    __slots__ = ("_done", "_made", "syncs")

    def __init__(self, syncs: dict[Sync, None]) -> None:
        self.syncs = syncs
        self._done = threading.Event()
        self._made = False

    def finish(self, *, made: bool) -> None:
        self._made = made
        self._done.set()

    def wait(self) -> bool:
        """Wait until the next turn is done with them: whether it made them."""
        self._done.wait()
        return self._made


class SharedTurns:
    """A lock for callers that take turns at a store and share their fsyncs.

    `turn()` holds the lock for one caller at a time. Writes in the turn commit
    without an fsync (`owe_sync`), and the turn releases the lock before the
    syncs they owe are made, even when it raises. A turn that ends while another
    caller waits for the lock leaves its syncs to that caller's turn and waits:
    when that turn ends, it makes them with its own (after its own writes, so one
    fsync of a WAL puts both on disk) and wakes the first. Every caller still returns only once its
    writes are on disk; while the first waits, the lock is free.

    A turn that was left syncs makes them itself and passes nothing on, so a
    caller waits for one other turn at most. Should the next turn fail to make
    them, each caller that left its own makes them again itself, and raises if
    that fails too.

    `lock` is the lock underneath, for a caller that takes a turn without sharing
    syncs (SQLite commits its writes with their own fsyncs): it neither leaves
    syncs nor is left any.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._state = threading.Lock()  # guards the two below
        self._waiting = 0  # callers in turn() that have not taken the lock yet
        self._left: _Left | None = None  # left by the last turn, for the next

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        """Hold the lock; its writes are on disk when this returns or raises.

        Raises:
            StoreError: a sync failed; the turn's writes may not be on disk.
        """
        with self._state:
            self._waiting += 1
        try:
            self.lock.acquire()
        except BaseException:  # interrupted while waiting
            self._stop_waiting()
            raise
        with self._state:
            self._waiting -= 1
            given, self._left = self._left, None
        syncs = _Syncs()
        token = _SYNCS.set(syncs)
        left: _Left | None = None
        try:
            yield
        finally:
            _SYNCS.reset(token)
            syncs.ended = True
            try:
                if given is None and syncs.owed:
                    left = self._leave(syncs.owed)
            finally:
                self.lock.release()
            self._settle(syncs.owed, given, left)

    def _leave(self, owed: dict[Sync, None]) -> _Left | None:
        """Leave `owed` to the next turn if a caller waits for it (lock held)."""
        with self._state:
            if not self._waiting:
                return None
            self._left = left = _Left(owed)
        return left

    @staticmethod
    def _settle(
        owed: dict[Sync, None], given: _Left | None, left: _Left | None
    ) -> None:
        """Make the syncs owed and given, unless `left` to a turn that made them."""
        if left is not None and left.wait():
            return
        if given is None:
            _make(owed)
            return
        try:
            _make({**owed, **given.syncs})
        except BaseException:
            given.finish(made=False)
            raise
        given.finish(made=True)

    def _stop_waiting(self) -> None:
        """A caller stopped waiting: syncs left for no turn go back to their callers."""
        with self._state:
            self._waiting -= 1
            orphan = None if self._waiting else self._left
            if orphan is not None:
                self._left = None
        if orphan is not None:
            orphan.finish(made=False)
