"""SQLite, durability=full: the WAL's fsyncs, shared by the commits they cover.

Every write transaction gets a number as it commits (`committed`). A durable write
then calls `through(number)`, which returns once an fsync of the WAL that started
after that commit has ended: every frame written before an fsync starts, by any
connection to the file, is on disk when it ends. A write whose commit came before
an fsync under way began waits for that one (group commit); otherwise it starts
its own at once, beside any under way that began too early to cover it. No fsync
waits for a timer, for commits that may follow, or for another fsync to end.

Starting at once matters to `ResumableSaver`: LangGraph's `put` commits while
put_writes' fsync runs, and its step waits for put's fsync alone. Waiting for
put_writes' fsync to end before starting put's made a `durability="sync"` step
of benchmarks/langgraph_storage.py's graph 1.08x and 1.26x as long (medians of
9 and 11 lockstep rounds, both ways and SqliteSaver stepping in turn on a loaded
two-CPU machine; slower in 20 of the 20 rounds).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from resumable.errors import StoreError


class WalSyncs:
    """Numbered commits of one SQLite file, and the fsyncs of its WAL that cover them."""

    def __init__(self, url: str, path: Path, sync_file: Callable[[int], None]) -> None:
        self.url, self._wal = url, Path(f"{path}-wal")
        self._sync_file = sync_file
        self._state = threading.Condition(threading.Lock())
        # under _state: commits numbered so far, every commit up to `_synced` is on
        # disk, the commit counts at which the fsyncs under way began, and the
        # ranges of commits whose fsync failed, (low, high]: a later fsync does
        # not bring back pages the kernel failed to write, so those stay failed
        self.committed = 0
        self._synced = 0
        self._under_way: list[int] = []
        self._failed: list[tuple[int, int, StoreError]] = []
        self._fd: int | None = None  # opened at the first fsync, open until close()

    def note_commit(self) -> int:
        """Number a commit that just returned; a durable write passes it to `through`."""
        with self._state:
            self.committed += 1
            return self.committed

    def through(self, number: int) -> None:
        """Return once every commit numbered up to `number` is on disk.

        Raises:
            StoreError: the fsync covering it failed; it may not be on disk.
        """
        with self._state:
            while True:
                for low, high, error in self._failed:
                    if low < number <= high:
                        raise error
                if self._synced >= number:
                    return
                if not any(began >= number for began in self._under_way):
                    break
                self._state.wait()  # an fsync that covers it is under way
            target, synced = self.committed, self._synced
            self._under_way.append(target)
            fd = self._open()
        done = False
        try:
            self._sync(fd)
            done = True
        except StoreError as exc:
            with self._state:
                self._failed.append((synced, target, exc))
            raise
        finally:
            with self._state:
                self._under_way.remove(target)
                if done:
                    self._synced = max(self._synced, target)
                self._state.notify_all()

    def _open(self) -> int | OSError:
        """The WAL's descriptor (the caller holds `_state`), or why it cannot open.

        It stays open while the store is: SQLite never deletes the WAL of a file
        that still has a connection (ours), and it keeps no lock on the WAL that
        closing it could drop.
        """
        if self._fd is None:
            try:
                self._fd = os.open(self._wal, os.O_RDONLY)
            except OSError as exc:
                return exc
        return self._fd

    def _sync(self, fd: int | OSError) -> None:
        try:
            if isinstance(fd, OSError):
                raise fd
            self._sync_file(fd)
        except OSError as exc:
            raise StoreError(
                store=self.url,
                detail=f"cannot fsync its WAL file, so the writes just committed "
                f"may not be on disk ({exc}); check the disk, then retry them",
            ) from exc

    def close(self) -> None:
        """Close the WAL's descriptor, once the fsyncs under way have ended."""
        with self._state:
            self._state.wait_for(lambda: not self._under_way)
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
