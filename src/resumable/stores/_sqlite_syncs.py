"""SQLite, durability=full: the WAL's fsyncs, shared by the commits they cover.

Every write transaction gets a number as it commits (`committed`). A durable write
then calls `through(number)`, which returns once an fsync of the WAL that started
after that commit has ended: every frame written before an fsync starts, by any
connection to the file, is on disk when it ends. A write whose commit came before
the fsync under way waits for it and is done; one whose commit came after waits
for it too, then starts the next, which covers every commit made meanwhile (group
commit). No fsync waits for a timer or for commits that may follow.
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
        # under _state: commits numbered so far, every commit up to `_synced` is
        # on disk, whether an fsync is under way, and the ranges of commits whose
        # fsync failed (low, high]: a later fsync does not bring back pages the
        # kernel failed to write, so those commits stay failed
        self.committed = 0
        self._synced = 0
        self._syncing = False
        self._failed: list[tuple[int, int, StoreError]] = []
        self._fd: int | None = None  # open until close(); `_fd_lock` guards it
        self._fd_lock = threading.Lock()

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
                if not self._syncing:
                    break
                self._state.wait()
            self._syncing = True
            target, synced = self.committed, self._synced
        done = False
        try:
            self._sync()
            done = True
        except StoreError as exc:
            with self._state:
                self._failed.append((synced, target, exc))
            raise
        finally:
            with self._state:
                self._syncing = False
                if done:
                    self._synced = max(self._synced, target)
                self._state.notify_all()

    def _sync(self) -> None:
        """Sync the WAL file to disk.

        The descriptor stays open while the store is: SQLite never deletes the WAL
        of a file that still has a connection (ours), and it keeps no lock on the
        WAL that closing it could drop.
        """
        with self._fd_lock:
            try:
                if self._fd is None:
                    self._fd = os.open(self._wal, os.O_RDONLY)
                self._sync_file(self._fd)
            except OSError as exc:
                raise StoreError(
                    store=self.url,
                    detail=f"cannot fsync its WAL file, so the writes just committed "
                    f"may not be on disk ({exc}); check the disk, then retry them",
                ) from exc

    def close(self) -> None:
        """Close the WAL's descriptor (after any fsync under way)."""
        with self._fd_lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
