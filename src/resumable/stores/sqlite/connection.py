"""SQLite: how a call reaches the file.

The URL's options, opening the file by `mode`, the store thread and the inline
connection.

`SQLiteThread` runs every transaction of one `SQLiteStore`; see `resumable.stores.sqlite`
for why (group commit on a dedicated thread, the inline connection, WAL syncs).

How a URL's `mode` opens the file: `rwc` creates the file and its folder; `rw` and
`ro` open an existing file only, and say which absolute path they looked at when
there is none. `ro` never writes: where the file and its folder could be written
and no WAL with frames in it is beside it, it opens them with writes refused by SQLite
(`query_only`), so the WAL files SQLite makes meanwhile are removed when it closes;
elsewhere (a live writer's WAL is there, or nothing may be written) with SQLite's
`mode=ro`, falling back to `immutable` where no WAL index can be shared (a
read-only filesystem with no `-shm` file beside the database: nothing can write it
there).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, NamedTuple, TypeVar
from urllib.parse import parse_qs, urlsplit

from resumable.errors import CheckpointWriteError, SchemaVersionError, StoreError
from resumable.stores.sqlite import migrations
from resumable.stores.sqlite.wal import WalSyncs
from resumable.stores.syncs import deferring, owe

T = TypeVar("T")
Conn = sqlite3.Connection

_BATCH_MAX: Final = 512
# durability=full: an inline commit checkpoints the WAL itself once it holds this
# many pages (about 40 one-KB steps), as SQLite does at 1000 by default.
# Measured (benchmarks/step_overhead.py, 1 KB and 16 KB steps): a step costs the
# least at 100 pages, ~20% more at 1000 and ~45% more with the WAL checkpointed
# every 250 commits on the store thread, where the checkpoint's writes and fsync
# compete with the commits' fsyncs for the disk.
WAL_PAGES_FULL: Final = 100
# durability=normal: commits do not fsync and a checkpoint does, so the inline
# connection never checkpoints; the store thread does (RESTART: the WAL is reused
# from its start) every this many inline commits, which only bounds the WAL.
CHECKPOINT_EVERY: Final = 2500
_NOT_INLINE: Final = object()
_CHECKPOINT: Final = "checkpoint"  # queued by the inline path: checkpoint the WAL
# OverflowError: sqlite3 refuses to bind an int beyond 64 bits
_DRIVER_ERRORS: Final = (sqlite3.Error, OverflowError)
# what SQLite refuses as data or as a statement: retrying cannot help
_REFUSED: Final = (
    sqlite3.DataError,
    sqlite3.IntegrityError,
    sqlite3.InterfaceError,
    sqlite3.ProgrammingError,
    sqlite3.NotSupportedError,
    OverflowError,
)


DEFAULT_PATH: Final = Path(".resumable") / "state.db"
MODES: Final = ("rwc", "rw", "ro")


class SQLiteOptions(NamedTuple):
    """What a sqlite:// URL says."""

    path: Path
    durability: str
    busy_timeout_ms: int
    mmap_mb: int
    mode: str = "rwc"
    """rwc: create if missing; rw: an existing file only; ro: read-only."""


def parse_url(url: str) -> SQLiteOptions:
    """The file path and options named by a sqlite:// URL."""
    parts = urlsplit(url)
    if parts.scheme != "sqlite":
        raise StoreError(store=url, detail="not a sqlite:// URL")
    # sqlite:///rel.db has path "/rel.db"; sqlite:////abs.db has path "//abs.db"
    raw = parts.path[1:] if parts.path.startswith("/") else parts.path
    if parts.netloc:
        raw = parts.netloc + parts.path
    if not raw:
        raise StoreError(
            store=url, detail="no file path; use sqlite:///path/to/state.db"
        )
    options = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    durability = options.pop("durability", "full").lower()
    if durability not in ("full", "normal"):
        raise StoreError(store=url, detail="durability must be 'full' or 'normal'")
    mode = options.pop("mode", "rwc").lower()
    if mode not in MODES:
        raise StoreError(store=url, detail="mode must be 'rwc', 'rw' or 'ro'")
    numbers: dict[str, int] = {}
    for name, default in (("busy_timeout_ms", "10000"), ("mmap_mb", "256")):
        try:
            numbers[name] = int(options.pop(name, default))
        except ValueError:
            raise StoreError(store=url, detail=f"{name} must be an integer") from None
        if numbers[name] < 0:
            raise StoreError(store=url, detail=f"{name} must not be negative")
    if options:
        raise StoreError(
            store=url, detail=f"unknown option(s): {', '.join(sorted(options))}"
        )
    return SQLiteOptions(Path(raw), durability, **numbers, mode=mode)


class Target(NamedTuple):
    """What `sqlite3.connect` is given for a mode, and what to set once connected."""

    database: str | Path
    uri: bool
    query_only: bool


def target(url: str, path: Path, mode: str) -> Target:
    """Where to connect for `mode`; creates the folder for `rwc`.

    Raises:
        StoreError: `rw` or `ro` and no file at `path` (named absolute).
    """
    if mode == "rwc":
        path.parent.mkdir(parents=True, exist_ok=True)
        return Target(path, uri=False, query_only=False)
    absolute = path.absolute()
    if not absolute.is_file():
        raise StoreError(
            store=url,
            detail=f"no database at {absolute} (mode={mode} opens an existing file "
            f"and creates none); check --store or $RESUMABLE_STORE: "
            f"sqlite:///relative/path.db is from the current folder, "
            f"sqlite:////absolute/path.db from the root",
        )
    if mode == "rw":
        return Target(f"{absolute.as_uri()}?mode=rw", uri=True, query_only=False)
    writable = os.access(absolute, os.W_OK) and os.access(absolute.parent, os.W_OK)
    # with no WAL beside it, or an empty one (another reader's, made as it opened),
    # closing a query_only connection writes nothing to the file, and the last one
    # to close removes the WAL files; with frames in it (a live writer's, or left
    # by a crash) it could checkpoint them: mode=ro shares it instead. (An empty
    # WAL read as "a WAL" sent a second reader to mode=ro, which cannot remove
    # the files when it closes last.)
    if writable and _wal_bytes(absolute) == 0:
        return Target(f"{absolute.as_uri()}?mode=rw", uri=True, query_only=True)
    return Target(f"{absolute.as_uri()}?mode=ro", uri=True, query_only=False)


def _wal_bytes(database: Path) -> int:
    """The size of the WAL beside `database`, 0 when there is none."""
    try:
        return Path(f"{database}-wal").stat().st_size
    except FileNotFoundError:
        return 0


def connect(
    found: Target, *, timeout_s: float, check_same_thread: bool
) -> tuple[sqlite3.Connection, Target]:
    """A connection to `found`, and the target it really used.

    A read-only file whose WAL index cannot be shared (no `-shm` beside it, and
    none can be made) is opened `immutable`: SQLite refuses it otherwise.
    """
    conn = sqlite3.connect(
        found.database,
        uri=found.uri,
        isolation_level=None,
        timeout=timeout_s,
        check_same_thread=check_same_thread,
    )
    if not str(found.database).endswith("?mode=ro"):
        return conn, found
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as exc:
        conn.close()
        if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_CANTOPEN:
            raise  # busy, damaged...: reported as it is, not read as immutable
        immutable = Target(f"{found.database}&immutable=1", uri=True, query_only=False)
        return connect(
            immutable, timeout_s=timeout_s, check_same_thread=check_same_thread
        )
    return conn, found


class _Job:
    __slots__ = ("durable", "fn", "future", "is_write", "run_id", "seq")

    def __init__(
        self,
        fn: Callable[[Conn], Any],
        future: asyncio.Future[Any],
        is_write: bool,
        run_id: str | None,
        seq: int | None,
        *,
        durable: bool,
    ) -> None:
        self.fn, self.future, self.is_write = fn, future, is_write
        self.run_id, self.seq, self.durable = run_id, seq, durable


fdatasync: Final = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


class SQLiteThread:
    """The connections of one SQLite file and the thread that serves them."""

    def __init__(
        self,
        url: str,
        path: Path,
        durability: str,
        *,
        busy_timeout_ms: int,
        mmap_mb: int,
        mode: str = "rwc",
        sync_file: Callable[[int], None],
        on_connect: Callable[[Conn, bool], None] | None = None,
        inline_lock: threading.Lock | None = None,
    ) -> None:
        self.url, self.path, self.durability = url, path, durability
        self.read_only = mode == "ro"
        self._mode = mode
        self._target: Target | None = None  # decided at the first connect
        self._on_connect = on_connect
        self._busy_timeout_ms, self._mmap_mb = busy_timeout_ms, mmap_mb
        self._jobs: queue.SimpleQueue[_Job | str | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._opened = threading.Event()
        self._open_error: BaseException | None = None
        self._lock = threading.Lock()
        self._closed = False  # for good: a call after close() must not start a thread
        self._inline: Conn | None = None
        self._inline_lock = inline_lock if inline_lock is not None else threading.Lock()
        self._inline_commits = 0
        self._queued_writes = 0  # writes handed to the store thread, not yet done
        self._last_writer: str | None = None  # the run of the latest write call
        self._wal = WalSyncs(url, path, sync_file)

    # --- lifecycle --------------------------------------------------------------
    async def open(self) -> None:
        """Start the store's thread, create the file and migrate its schema (idempotent).

        Raises:
            StoreError: the store was closed; a late caller (a task still polling a
                run) must not start a second thread, which could take the stop
                signal meant for the first and leave close() joining it forever.
        """
        with self._lock:
            if self._closed:
                raise StoreError(
                    store=self.url,
                    detail="closed: this store (or its Engine) was closed; "
                    "open a new one to use the file again",
                )
            if self._thread is None:
                self._opened.clear()
                self._open_error = None
                self._thread = threading.Thread(
                    target=self._serve,
                    name=f"resumable-sqlite:{self.path}",
                    daemon=True,
                )
                self._thread.start()
        if not self._opened.is_set():
            await asyncio.to_thread(self._opened.wait)
        if self._open_error is not None:
            with self._lock:
                self._thread = None
            raise self._open_error

    async def close(self) -> None:
        """Close the connections and stop the thread; a later call is refused."""
        with self._lock:  # first: from here on open() refuses
            self._closed = True
        with self._inline_lock:
            if self._inline is not None:
                self._inline.close()
                self._inline = None
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._jobs.put(None)
            await asyncio.to_thread(thread.join)
        self._wal.close()

    def _connect(self, *, inline: bool = False) -> Conn:
        if self._target is None:
            self._target = target(self.url, self.path, self._mode)
        busy_timeout_ms = 0 if inline else int(self._busy_timeout_ms)
        conn, self._target = connect(
            self._target,
            timeout_s=busy_timeout_ms / 1000,
            check_same_thread=not inline,  # the inline connection is guarded by a lock
        )
        conn.row_factory = sqlite3.Row
        if self._target.query_only:
            conn.execute("PRAGMA query_only = ON")
        # WAL persists in the file; the store thread set it at open (a read-only
        # open reads the file as it is)
        if not inline and not self.read_only:
            conn.execute("PRAGMA journal_mode = WAL")
        # commits never sync themselves: a durable one syncs the WAL once it has
        # committed (`_sync`), with durability=full
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
        conn.execute(f"PRAGMA mmap_size = {self._mmap_mb * 2**20}")
        if inline:
            pages = WAL_PAGES_FULL if self.durability == "full" else 0
            conn.execute(f"PRAGMA wal_autocheckpoint = {pages}")
        if self._on_connect is not None:
            self._on_connect(conn, inline)
        return conn

    def _serve(self) -> None:
        conn = self._open_reporting()
        if conn is None:
            return
        try:
            while True:
                item = self._jobs.get()
                if item is None:
                    return
                batch: list[_Job] = []
                checkpoint = stop = False
                while True:
                    if item is None:
                        stop = True
                    elif isinstance(item, str):
                        checkpoint = True
                    else:
                        batch.append(item)
                    if stop or len(batch) >= _BATCH_MAX:
                        break
                    try:
                        item = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                self._run_batch(conn, batch)
                if checkpoint:
                    self._checkpoint(conn)
                if stop:
                    return
        finally:
            conn.close()

    def _open_reporting(self) -> Conn | None:
        """The store thread's connection; whatever stops it is the opener's error."""
        try:
            return self._open_connection()
        except Exception as exc:  # noqa: BLE001 - an unforeseen failure must not hang open()
            self._open_error = StoreError(
                store=self.url, detail=f"cannot open: {exc!r}"
            )
            return None
        finally:
            self._opened.set()

    def _checkpoint(self, conn: Conn) -> None:
        """Copy the WAL into the database and restart it, outside any transaction.

        With durability=normal the inline connection does not checkpoint by itself
        (that fsync would be the only one on the hot path); without this the WAL
        would grow without bound.
        """
        with contextlib.suppress(sqlite3.Error):  # busy: the next one will do it
            conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()

    def _open_connection(self) -> Conn | None:
        try:
            conn = self._connect()
        except StoreError as exc:  # no file where mode=rw or ro needs one
            self._open_error = exc
            return None
        except (sqlite3.Error, OSError) as exc:
            self._open_error = StoreError(store=self.url, detail=f"cannot open: {exc}")
            return None
        try:
            if self.read_only:
                migrations.check_schema(conn, self.url, self.path)
            else:
                migrations.migrate(conn, self.url)
        except (SchemaVersionError, StoreError) as exc:
            self._open_error = exc
        except sqlite3.Error as exc:
            self._open_error = StoreError(
                store=self.url, detail=f"cannot migrate: {exc}"
            )
        else:
            with self._inline_lock:
                self._open_inline()  # now, not in the first write's time
            return conn
        conn.close()
        return None

    def _run_batch(self, conn: Conn, batch: list[_Job]) -> None:
        outcomes: list[tuple[_Job, bool, Any]] = []
        writes: list[_Job] = []
        for job in batch:
            if job.is_write:
                writes.append(job)
                continue
            outcomes.extend(self._run_writes(conn, writes))
            writes = []
            outcomes.append(self._run_read(conn, job))
        outcomes.extend(self._run_writes(conn, writes))
        _deliver(outcomes)

    def _run_read(self, conn: Conn, job: _Job) -> tuple[_Job, bool, Any]:
        try:
            conn.execute("BEGIN")  # a consistent view across the read's statements
            try:
                return job, True, job.fn(conn)
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            return job, False, StoreError(store=self.url, detail=f"read failed: {exc}")
        except Exception as exc:  # noqa: BLE001 - handed to the awaiting caller
            return job, False, exc

    def _run_writes(self, conn: Conn, jobs: list[_Job]) -> list[tuple[_Job, bool, Any]]:
        if not jobs:
            return []
        outcomes: list[tuple[_Job, bool, Any]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            if len(jobs) == 1:
                outcomes.append(self._run_one(conn, jobs[0], savepoint=False))
                if not outcomes[0][1]:
                    conn.execute("ROLLBACK")
                    return outcomes
            else:
                outcomes.extend(
                    self._run_one(conn, job, savepoint=True) for job in jobs
                )
            conn.execute("COMMIT")
        except _DRIVER_ERRORS as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            return [
                (job, False, self._write_error(job.run_id, job.seq, exc))
                for job in jobs
            ]
        committed = self._wal.note_commit()
        if any(job.durable for job in jobs):
            try:
                self._wal.through(committed)
            except StoreError as exc:  # committed, but maybe not on disk
                return [
                    (job, False, exc) if ok and job.durable else (job, ok, value)
                    for job, ok, value in outcomes
                ]
        return outcomes

    def _run_one(
        self, conn: Conn, job: _Job, *, savepoint: bool
    ) -> tuple[_Job, bool, Any]:
        if savepoint:
            conn.execute("SAVEPOINT job")
        try:
            result = job.fn(conn)
        except _DRIVER_ERRORS as exc:
            if not savepoint:
                raise
            conn.execute("ROLLBACK TO job")
            conn.execute("RELEASE job")
            return job, False, self._write_error(job.run_id, job.seq, exc)
        except Exception as exc:  # noqa: BLE001 - handed to the awaiting caller
            if savepoint:
                conn.execute("ROLLBACK TO job")
                conn.execute("RELEASE job")
            return job, False, exc
        if savepoint:
            conn.execute("RELEASE job")
        return job, True, result

    def _write_error(
        self, run_id: str | None, seq: int | None, exc: Exception
    ) -> Exception:
        if run_id is None:
            return StoreError(store=self.url, detail=f"write failed: {exc}")
        return CheckpointWriteError(
            run_id=run_id,
            seq=seq,
            detail=f"sqlite: {exc}",
            transient=not isinstance(exc, _REFUSED),
        )

    async def call(
        self,
        fn: Callable[[Conn], T],
        *,
        write: bool,
        run_id: str | None = None,
        seq: int | None = None,
        inline: bool = False,
        durable: bool = True,
    ) -> T:
        """Run `fn` in one transaction, on this thread when it can (see the module doc).

        Writes always try to; a read does when `inline` is set (reads of one run or
        thread). With durability=full, a `durable` write syncs the WAL once it has
        committed (`_sync`), or leaves that sync to the `syncs.DeferredSyncs` block
        it runs in. A write that is not `durable` (a lease's, a pack swap) is left
        for the next sync to put on disk.
        """
        durable = durable and write and self.durability == "full"
        if write and self.read_only:
            raise StoreError(
                store=self.url,
                detail="opened read-only (mode=ro), so it takes no writes; open it "
                "without mode=ro to change it",
            )
        if self._thread is None or not self._opened.is_set():
            await self.open()  # also waits while another caller's open is migrating
        if write and (self.durability == "normal" or self._writes_alone(run_id)):
            result = self._write_inline(fn, run_id, seq, durable=durable)
            if result is not _NOT_INLINE:
                return result  # type: ignore[return-value]  # fn's own result
        elif inline and not write and not self._queued_writes:
            result = self._read_inline(fn)
            if result is not _NOT_INLINE:
                return result  # type: ignore[return-value]  # fn's own result
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        if write:
            self._queued_writes += 1
            future.add_done_callback(self._write_done)
        owing = durable and deferring()  # the store thread commits it without a sync
        job = _Job(fn, future, write, run_id, seq, durable=durable and not owing)
        self._jobs.put(job)
        result = await future
        if owing:
            self._sync(self._wal.committed)  # a number at or after its commit's
        return result

    def _writes_alone(self, run_id: str | None) -> bool:
        """Whether a write of `run_id` may skip group commit and go inline (`full`).

        When none is queued and the last write of a run came from the same run:
        one workflow stepping on its own. Writes of concurrent runs interleave, so
        the first of another run queues, and the rest follow it while any is
        queued. (An inline commit holds the event loop through its fsync, so
        without the run check concurrent runs on one loop would never find a write
        queued and would pay one fsync each.) A write of no run (a snapshot or its
        chunks, which a workflow may save between its steps) leaves the last
        run's as it was.
        """
        if run_id is None:
            return not self._queued_writes
        last, self._last_writer = self._last_writer, run_id
        return last == run_id and not self._queued_writes

    def _write_done(self, _: asyncio.Future[Any]) -> None:
        self._queued_writes -= 1

    def _write_inline(
        self,
        fn: Callable[[Conn], Any],
        run_id: str | None,
        seq: int | None,
        *,
        durable: bool,
    ) -> object:
        """Commit `fn` on this thread if the write lock is free now, else _NOT_INLINE.

        A `durable` write syncs the WAL after its commit (`_sync`), once it has
        released the inline connection: the next write commits meanwhile.
        """
        conn = self._take_inline()
        if conn is None:
            return _NOT_INLINE
        try:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:  # busy: the store thread waits for it
                return _NOT_INLINE
            try:
                result = fn(conn)
                conn.execute("COMMIT")
                # numbered for the sync that covers it; one that owes none needs none
                committed = self._wal.note_commit() if durable else 0
            except _DRIVER_ERRORS as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise self._write_error(run_id, seq, exc) from exc
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        finally:
            self._inline_lock.release()
        if durable:
            self._sync(committed)
        elif self.durability == "normal":
            self._inline_commits += 1
            if self._inline_commits % CHECKPOINT_EVERY == 0:
                self._checkpoint_soon()
        return result

    def _read_inline(self, fn: Callable[[Conn], Any]) -> object:
        """Read with `fn` on this thread if the inline connection is free, else _NOT_INLINE.

        A driver error (a busy or damaged file) sends the read to the store thread,
        which waits out a busy file and reports the rest.
        """
        conn = self._take_inline()
        if conn is None:
            return _NOT_INLINE
        try:
            try:
                conn.execute("BEGIN")  # one consistent view, as on the store thread
                try:
                    return fn(conn)
                finally:
                    conn.execute("COMMIT")
            except sqlite3.Error:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                return _NOT_INLINE
        finally:
            self._inline_lock.release()

    def _take_inline(self) -> Conn | None:
        """The inline connection, now the caller's to release (`_inline_lock`).

        None, and nothing to release, while another caller holds it or the file is
        locked (the store thread then does the work).
        """
        if not self._inline_lock.acquire(blocking=False):
            return None
        conn = self._inline if self._inline is not None else self._open_inline()
        if conn is None:
            self._inline_lock.release()
        return conn

    def _open_inline(self) -> Conn | None:
        """The inline connection (writes, journal loads), opened now; None while locked.

        The caller holds `_inline_lock`.
        """
        try:
            self._inline = self._connect(inline=True)
        except sqlite3.OperationalError:
            return None
        return self._inline

    def _sync(self, committed: int) -> None:
        """Put the commits numbered up to `committed` on disk, or owe their sync.

        Inside a `syncs.DeferredSyncs` block the block's `wait` makes the sync;
        elsewhere it is made now (`WalSyncs.through`), before the write returns.

        Raises:
            StoreError: the sync failed; the writes since the last one may be lost.
        """
        if not owe(self._wal.through, committed):
            self._wal.through(committed)

    def _checkpoint_soon(self) -> None:
        self._jobs.put(_CHECKPOINT)


def _deliver(outcomes: list[tuple[_Job, bool, Any]]) -> None:
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Job, bool, Any]]] = {}
    for outcome in outcomes:
        by_loop.setdefault(outcome[0].future.get_loop(), []).append(outcome)
    for loop, items in by_loop.items():
        try:
            loop.call_soon_threadsafe(_resolve, items)
        except (
            RuntimeError
        ):  # the caller's loop closed while we worked; nobody is waiting
            continue


def _resolve(items: list[tuple[_Job, bool, Any]]) -> None:
    for job, ok, value in items:
        if job.future.done():  # the caller was cancelled; the write stands regardless
            continue
        if ok:
            job.future.set_result(value)
        else:
            job.future.set_exception(value)
