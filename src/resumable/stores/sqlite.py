"""SQLiteStore: the embedded default, one file shared safely by several processes.

SQL runs on one dedicated thread per store, so the event loop never blocks on
disk. That thread drains every job queued while it was busy and commits the writes
among them in one transaction (group commit): concurrent runs share an fsync, and a
lone sequential step still costs exactly one INSERT and one COMMIT.

A lone write does not need the thread: handing it over costs as much as a
`durability=normal` commit itself. So a write first tries an inline path, a
second connection with no busy wait that commits on the calling thread if the
file's write lock is free at once. With
`durability=normal` (no fsync per commit) every write tries it; with `full`, only
a write whose run also made the write before it, with none queued: a single
workflow skips the hop, while the writes of concurrent runs interleave and share
fsyncs on the store thread (50 runs at once: ~40 us a step, against ~200 inline).
Otherwise (another process is writing, another caller holds the inline
connection) the write queues as usual. With `full` an inline commit checkpoints a
WAL of 100 pages itself (the store thread's at SQLite's default, 1000); with
`normal`, whose commits do not fsync, the inline connection leaves checkpoints
(an fsync) to the store thread.

Every connection commits with SQLite's `synchronous=NORMAL`. With `full`, a
durable write then fsyncs the WAL itself (`_sync_wal`) before its call returns,
once SQLite's write lock is free, so the next write commits while the disk works.
In WAL mode that is what `synchronous=FULL` does (it syncs the WAL at each commit;
checkpoints sync the same at either setting), without statements to switch the
setting off around each write that need not sync (two, ~10 us each in a busy
process). One difference: another connection may read a commit a moment before
its fsync ends. A power cut in that moment loses it, and with it every commit
after it (see below: the WAL is replayed in order), among them whatever was
written from it.

Lease writes (acquire, renew, release) commit without an fsync, whatever the
durability. A lease only keeps live processes apart, and a WAL file is shared
only by processes of one machine (its index is shared memory), which a power cut
ends together. The next durable commit fsyncs the WAL, and with it every lease
write before it. A resume takes its lease 0.25 ms sooner here, far more on a disk
with slow fsyncs, and a heartbeat costs no fsync. So does a pack swap
(`replace_snapshots`): it only saves space, and a power cut before the next
durable commit undoes it whole (a WAL is replayed in order up to its last intact
commit), leaving the rows loose and readable. A LangGraph thread packs every 16
steps; each swap paid an fsync, ~0.4 ms here.

A write in a `syncs.SharedTurns` turn commits without an fsync too, and the
turn fsyncs the WAL once it has released its lock (`_sync_wal`): its writes are
on disk before the caller goes on, as every other write is, and the next turn
runs meanwhile. `ResumableSaver`'s sync calls take such turns.

Reads of one run or one thread (its journal, record, inputs, snapshots and
chunks) take the inline connection too when it is free and no write of this store
is queued (which they would have to see). No other thread has to wake, which on a
busy machine takes longer than the read: two wake-ups cost ~0.2 ms here, and a
LangGraph `get_tuple` makes several reads. A journal load, most of a resume,
then makes its records on the thread that replays them, still in its CPU's cache
(the replay of 1000 steps: 5.0 ms, against 6.0). The loop is busy meanwhile, ~3 us
per recorded step; on the store thread the load would hold the GIL for most of
that time anyway, making the records. Scans of every run (`list_runs`, the
payload scan of key rotation) stay on the store thread.

URL: `sqlite:///relative/path.db` or `sqlite:////absolute/path.db`, with optional
`?durability=full` (fsync on every commit but a lease's, the default) or `?durability=normal`
(WAL without fsync per commit: survives a process crash, not a power cut),
`busy_timeout_ms=` (how long to wait for another process's write lock), and
`mmap_mb=` (how much of the file SQLite reads through a memory map, 256 by
default; 0 reads it with read() calls). Mapped reads make a cold resume's journal
load ~35% faster; the price is that a read error on the disk (or the file cut
short by something other than SQLite) ends the process with SIGBUS instead of
raising an error. The journal is safe either way: the run resumes from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, NamedTuple, TypeVar
from urllib.parse import parse_qs, urlsplit

from resumable.errors import (
    CheckpointWriteError,
    ChunksMissing,
    LeaseLost,
    RunNotFound,
    SchemaVersionError,
    StoreError,
)
from resumable.stores import _sql
from resumable.stores import _sqlite_archive as _archive
from resumable.stores import _sqlite_claims as _claims
from resumable.stores._records import schema_version_of
from resumable.stores.protocol import (
    NO_CHUNKS,
    ArchiveStub,
    DeleteResult,
    InputRecord,
    Lease,
    Payload,
    PayloadKind,
    QueuePolicy,
    RunQuery,
    RunRecord,
    RunUpdate,
    SnapshotRecord,
    StepRecord,
    ThreadRecord,
    check_pack,
)
from resumable.stores.syncs import owe_sync

T = TypeVar("T")
_t = _sql.to_text
Conn = sqlite3.Connection
DEFAULT_PATH: Final = Path(".resumable") / "state.db"
_BATCH_MAX: Final = 512
# durability=full: an inline commit checkpoints the WAL itself once it holds this
# many pages (about 40 one-KB steps), as SQLite does at 1000 by default.
# Measured (benchmarks/step_overhead.py, 1 KB and 16 KB steps): a step costs the
# least at 100 pages, ~20% more at 1000 and ~45% more with the WAL checkpointed
# every 250 commits on the store thread, where the checkpoint's writes and fsync
# compete with the commits' fsyncs for the disk.
_WAL_PAGES_FULL: Final = 100
# durability=normal: commits do not fsync and a checkpoint does, so the inline
# connection never checkpoints; the store thread does (RESTART: the WAL is reused
# from its start) every this many inline commits, which only bounds the WAL.
_CHECKPOINT_EVERY: Final = 2500
_NOT_INLINE: Final = object()
_PRESENT_MAX: Final = 100_000  # chunk hashes a store remembers it saw stored
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
_TERMINAL_SQL: Final = "('succeeded', 'failed', 'cancelled')"

_SELECT_RUN: Final = "SELECT * FROM resumable_runs WHERE run_id = ?"
_INSERT_RUN: Final = (
    f"INSERT INTO resumable_runs ({', '.join(_sql.RUN_COLUMNS)}) "  # noqa: S608 - constant columns
    f"VALUES ({', '.join('?' * len(_sql.RUN_COLUMNS))}) ON CONFLICT (run_id) DO NOTHING"
)
_SELECT_JOURNAL: Final = (
    f"SELECT {', '.join(_sql.JOURNAL_COLUMNS)} FROM resumable_steps WHERE run_id = ?"  # noqa: S608 - constant columns
)
_LOAD_JOURNAL: Final = _SELECT_JOURNAL + " ORDER BY seq"
_LOAD_JOURNAL_UP_TO: Final = _SELECT_JOURNAL + " AND seq <= ? ORDER BY seq"
# the fence check and the write are one statement, so no other writer can slip between
_COMMIT_STEP: Final = (
    f"INSERT OR REPLACE INTO resumable_steps ({', '.join(_sql.STEP_COLUMNS)}) "  # noqa: S608 - constant columns
    f"SELECT {', '.join('?' * len(_sql.STEP_COLUMNS))} WHERE EXISTS "
    "(SELECT 1 FROM resumable_runs WHERE run_id = ? AND fence = ?)"
)
# payload bytes of the runs `delete_runs` is about to delete ({marks}: placeholders)
_PAYLOAD_BYTES: Final = (
    "SELECT total(length(input)) + total(length(output)) FROM resumable_runs"
    " WHERE run_id IN ({marks})",
    "SELECT total(length(output)) + total(length(usage)) FROM resumable_steps"
    " WHERE run_id IN ({marks})",
    "SELECT total(length(value)) FROM resumable_inputs WHERE run_id IN ({marks})",
)
_RENEW: Final = """
UPDATE resumable_runs SET lease_expires_at_ms = ?
 WHERE run_id = ? AND fence = ? AND status = 'running'
"""
_UPDATE_RUN: Final = """
UPDATE resumable_runs
   SET status = :status, output = COALESCE(:output, output), wake_at_ms = :wake_at_ms,
       expires_at_ms = COALESCE(:expires_at_ms, expires_at_ms), updated_at_ms = :now_ms,
       lease_owner = CASE WHEN :status = 'running' THEN lease_owner END,
       lease_expires_at_ms = CASE WHEN :status = 'running' THEN lease_expires_at_ms ELSE 0 END
 WHERE run_id = :run_id AND fence = :fence
"""
_CANCEL: Final = f"""
UPDATE resumable_runs
   SET status = 'cancelled', lease_owner = NULL, lease_expires_at_ms = 0,
       fence = fence + 1, wake_at_ms = NULL, updated_at_ms = ?
 WHERE run_id = ? AND status NOT IN {_TERMINAL_SQL}
"""  # noqa: S608 - built from constants
_WAKE: Final = """
UPDATE resumable_runs SET status = 'queued', wake_at_ms = NULL, updated_at_ms = ?
 WHERE run_id = ? AND status = 'waiting'
"""
_PUT_CHUNK: Final = (
    "INSERT INTO resumable_chunks (hash, data) VALUES (?, ?) "
    "ON CONFLICT (hash) DO NOTHING"
)
_SELECT_CHUNKS: Final = "SELECT hash, data FROM resumable_chunks WHERE hash IN "
_SELECT_CHUNK_HASHES: Final = "SELECT hash FROM resumable_chunks WHERE hash IN "
_SNAPSHOT_COLUMNS: Final = (
    "thread_id, namespace, checkpoint_id, parent_id, manifest, chunk_refs, label, "
    "metadata, created_at_ms"
)
_INSERT_SNAPSHOT: Final = (
    f"INSERT OR REPLACE INTO resumable_snapshots ({_SNAPSHOT_COLUMNS}) "  # noqa: S608 - constant column list
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SNAPSHOTS_IN: Final = (
    "FROM resumable_snapshots WHERE thread_id = ? AND namespace = ? "
    "AND checkpoint_id IN "
)
_COUNT_SNAPSHOTS: Final = "SELECT count(*) " + _SNAPSHOTS_IN
_DELETE_SNAPSHOTS: Final = "DELETE " + _SNAPSHOTS_IN


class SQLiteOptions(NamedTuple):
    """What a sqlite:// URL says."""

    path: Path
    durability: str
    busy_timeout_ms: int
    mmap_mb: int


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
    return SQLiteOptions(Path(raw), durability, **numbers)


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


_fdatasync: Final = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


class SQLiteStore:
    """The Store protocol on one SQLite file, in WAL mode."""

    any_loop = True  # see protocol.runs_on_any_loop

    def __init__(self, url: str = f"sqlite:///{DEFAULT_PATH}") -> None:
        self.url = url
        options = parse_url(url)
        self.path, self.durability = options.path, options.durability
        self._busy_timeout_ms, self._mmap_mb = options.busy_timeout_ms, options.mmap_mb
        self._jobs: queue.SimpleQueue[_Job | str | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._opened = threading.Event()
        self._open_error: BaseException | None = None
        self._lock = threading.Lock()
        self._inline: Conn | None = None
        self._inline_lock = threading.Lock()
        self._inline_commits = 0
        self._queued_writes = 0  # writes handed to the store thread, not yet done
        self._last_writer: str | None = None  # the run of the latest write call
        self._present = _PresentChunks()
        self._wal_fd: int | None = None  # for _sync_wal, open until close()
        self._wal_lock = threading.Lock()

    # --- lifecycle --------------------------------------------------------------
    async def open(self) -> SQLiteStore:
        """Start the store's thread, create the file and migrate its schema (idempotent)."""
        with self._lock:
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
        return self

    async def close(self) -> None:
        with self._inline_lock:
            if self._inline is not None:
                self._inline.close()
                self._inline = None
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._jobs.put(None)
            await asyncio.to_thread(thread.join)
        with self._wal_lock:
            if self._wal_fd is not None:
                os.close(self._wal_fd)
                self._wal_fd = None

    def _connect(self, *, inline: bool = False) -> Conn:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        busy_timeout_ms = 0 if inline else int(self._busy_timeout_ms)
        conn = sqlite3.connect(
            self.path,
            isolation_level=None,
            timeout=busy_timeout_ms / 1000,
            check_same_thread=not inline,  # the inline connection is guarded by a lock
        )
        conn.row_factory = sqlite3.Row
        if not inline:  # WAL persists in the file; the store thread set it at open
            conn.execute("PRAGMA journal_mode = WAL")
        # commits never sync themselves: a durable one syncs the WAL once it has
        # committed (`_sync_wal`), with durability=full
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
        conn.execute(f"PRAGMA mmap_size = {self._mmap_mb * 2**20}")
        if inline:
            pages = _WAL_PAGES_FULL if self.durability == "full" else 0
            conn.execute(f"PRAGMA wal_autocheckpoint = {pages}")
        return conn

    def _migrate(self, conn: Conn) -> None:
        supported = _sql.latest_version("sqlite")
        conn.execute(
            "BEGIN IMMEDIATE"
        )  # one process migrates; the others wait, then see it done
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS resumable_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )
            row = conn.execute(
                "SELECT value FROM resumable_meta WHERE key = 'schema_version'"
            ).fetchone()
            current = schema_version_of(row["value"] if row else None, store=self.url)
            if current > supported:
                raise SchemaVersionError(
                    store=self.url, found=current, supported=supported
                )
            for migration in _sql.migrations("sqlite"):
                if migration.version > current:
                    for statement in _sql.split_statements(migration.sql):
                        conn.execute(statement)
            conn.execute(
                "INSERT OR REPLACE INTO resumable_meta (key, value) VALUES ('schema_version', ?)",
                (str(max(current, supported)),),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

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
        except (sqlite3.Error, OSError) as exc:
            self._open_error = StoreError(store=self.url, detail=f"cannot open: {exc}")
            return None
        try:
            self._migrate(conn)
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
        if any(job.durable for job in jobs):
            try:
                self._sync_wal()
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

    async def _call(
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
        committed (`_sync_wal`), unless it is in a `syncs.SharedTurns` turn, which
        it then owes that sync. A write that is not `durable` (a lease's, a pack
        swap) is left for the next sync to put on disk.
        """
        durable = (
            durable
            and write
            and self.durability == "full"
            and not owe_sync(self._sync_wal)
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
        self._jobs.put(_Job(fn, future, write, run_id, seq, durable=durable))
        return await future

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

        A `durable` write syncs the WAL after its commit, once it has released the
        inline connection: the next write commits meanwhile.
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
            self._sync_wal()
        elif self.durability == "normal":
            self._inline_commits += 1
            if self._inline_commits % _CHECKPOINT_EVERY == 0:
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

    def _sync_wal(self) -> None:
        """Sync the WAL to disk: a durability=full write is on disk once this returns.

        Every frame written before, by any connection to the file, is then on
        disk. A write calls it after its commit, or its `SharedTurns` turn does
        (or the next turn) once the turn ends. The file descriptor stays open
        while the store is: SQLite never deletes the WAL of a file that still has
        a connection (ours), and it keeps no lock on the WAL that closing it
        could drop.

        Raises:
            StoreError: the sync failed; the writes since the last one may be lost.
        """
        with self._wal_lock:
            try:
                if self._wal_fd is None:
                    self._wal_fd = os.open(f"{self.path}-wal", os.O_RDONLY)
                _fdatasync(self._wal_fd)
            except OSError as exc:
                raise StoreError(
                    store=self.url,
                    detail=f"cannot fsync its WAL file, so the writes just committed "
                    f"may not be on disk ({exc}); check the disk, then retry them",
                ) from exc

    def _checkpoint_soon(self) -> None:
        self._jobs.put(_CHECKPOINT)

    # --- runs -------------------------------------------------------------------
    async def create_run(self, run: RunRecord) -> RunRecord:
        def create(conn: Conn) -> RunRecord:
            conn.execute(_INSERT_RUN, _sql.run_values(run))
            return _sql.run_from_row(
                conn.execute(_SELECT_RUN, (_t(run.run_id),)).fetchone()
            )

        return await self._call(create, write=True, run_id=run.run_id)

    async def get_run(self, run_id: str) -> RunRecord | None:
        def get(conn: Conn) -> RunRecord | None:
            row = conn.execute(_SELECT_RUN, (_t(run_id),)).fetchone()
            return None if row is None else _sql.run_from_row(row)

        return await self._call(get, write=False, inline=True)

    async def list_runs(self, query: RunQuery) -> list[RunRecord]:
        where, params = _run_filters(query)
        if query.after is not None:
            where += " AND (created_at_ms, run_id) < (?, ?)"
            params += [query.after[0], _t(query.after[1])]
        sql = f"SELECT * FROM resumable_runs WHERE {where} ORDER BY created_at_ms DESC, run_id DESC LIMIT ?"  # noqa: S608 - fragments are constants, values are parameters
        params.append(query.limit)

        def select(conn: Conn) -> list[RunRecord]:
            return [_sql.run_from_row(row) for row in conn.execute(sql, params)]

        return await self._call(select, write=False)

    async def count_runs(self, query: RunQuery) -> dict[tuple[str, str | None], int]:
        where, params = _run_filters(query)
        sql = f"SELECT status, queue, count(*) AS n FROM resumable_runs WHERE {where} GROUP BY status, queue"  # noqa: S608 - fragments are constants, values are parameters

        def count(conn: Conn) -> dict[tuple[str, str | None], int]:
            return {
                (row["status"], _sql.maybe_from_text(row["queue"])): row["n"]
                for row in conn.execute(sql, params)
            }

        return await self._call(count, write=False)

    async def acquire_lease(
        self,
        run_id: str,
        *,
        owner: str,
        now_ms: int,
        ttl_ms: int,
        take_over: str | None = None,
    ) -> Lease | None:
        def acquire(conn: Conn) -> Lease | None:
            return _claims.acquire_txn(
                conn,
                run_id=run_id,
                owner=owner,
                now_ms=now_ms,
                ttl_ms=ttl_ms,
                take_over=take_over,
            )

        return await self._call(acquire, write=True, run_id=run_id, durable=False)

    async def renew_lease(
        self, run_id: str, *, fence: int, now_ms: int, ttl_ms: int
    ) -> None:
        def renew(conn: Conn) -> None:
            if conn.execute(_RENEW, (now_ms + ttl_ms, _t(run_id), fence)).rowcount == 0:
                raise LeaseLost(run_id=run_id, fence=fence)

        await self._call(renew, write=True, run_id=run_id, durable=False)

    async def update_run(self, run_id: str, *, fence: int, update: RunUpdate) -> None:
        params = {
            "status": update.status,
            "output": update.output,
            "wake_at_ms": update.wake_at_ms,
            "expires_at_ms": update.expires_at_ms,
            "now_ms": update.now_ms,
            "run_id": _t(run_id),
            "fence": fence,
        }

        def apply(conn: Conn) -> None:
            if conn.execute(_UPDATE_RUN, params).rowcount == 0:
                raise LeaseLost(run_id=run_id, fence=fence)

        await self._call(apply, write=True, run_id=run_id)

    async def cancel_run(self, run_id: str, *, now_ms: int) -> RunRecord:
        def cancel(conn: Conn) -> RunRecord:
            conn.execute(_CANCEL, (now_ms, _t(run_id)))
            row = conn.execute(_SELECT_RUN, (_t(run_id),)).fetchone()
            if row is None:
                raise RunNotFound(run_id=run_id)
            return _sql.run_from_row(row)

        return await self._call(cancel, write=True, run_id=run_id)

    async def reopen_run(self, run_id: str, *, now_ms: int) -> bool:
        def reopen(conn: Conn) -> bool:
            changed = conn.execute(
                "UPDATE resumable_runs SET status = 'queued', updated_at_ms = ? "
                "WHERE run_id = ? AND status = 'failed'",
                (now_ms, run_id),
            ).rowcount
            if (
                not changed
                and conn.execute(_SELECT_RUN, (_t(run_id),)).fetchone() is None
            ):
                raise RunNotFound(run_id=run_id)
            return bool(changed)

        return await self._call(reopen, write=True, run_id=run_id)

    async def claim_runs(
        self,
        *,
        owner: str,
        now_ms: int,
        ttl_ms: int,
        limit: int,
        workflows: Collection[str],
        queues: Mapping[str, QueuePolicy],
        versions: Collection[str] | None = None,
    ) -> list[Lease]:
        def claim(conn: Conn) -> list[Lease]:
            return _claims.claim_txn(
                conn,
                owner=owner,
                now_ms=now_ms,
                ttl_ms=ttl_ms,
                limit=limit,
                workflows=workflows,
                queues=queues,
                versions=versions,
            )

        return await self._call(claim, write=True)

    async def delete_runs(self, run_ids: Collection[str]) -> DeleteResult:
        ids = [_t(run_id) for run_id in run_ids]

        def delete(conn: Conn) -> DeleteResult:
            marks = ", ".join("?" * len(ids))
            found = [
                row["run_id"]
                for row in conn.execute(
                    f"SELECT run_id FROM resumable_runs WHERE run_id IN ({marks}) "  # noqa: S608 - placeholders only
                    f"AND status IN {_TERMINAL_SQL}",
                    ids,
                )
            ]
            if not found:
                return DeleteResult()
            marks = ", ".join("?" * len(found))
            size = sum(
                int(conn.execute(sql.format(marks=marks), found).fetchone()[0])
                for sql in _PAYLOAD_BYTES
            )
            steps = conn.execute(
                f"DELETE FROM resumable_steps WHERE run_id IN ({marks})",  # noqa: S608 - placeholders only
                found,
            ).rowcount
            inputs = conn.execute(
                f"DELETE FROM resumable_inputs WHERE run_id IN ({marks})",  # noqa: S608 - placeholders only
                found,
            ).rowcount
            conn.execute(f"DELETE FROM resumable_runs WHERE run_id IN ({marks})", found)  # noqa: S608 - placeholders only
            conn.execute(_archive.DELETE_STUBS.format(marks=marks), found)
            deleted = tuple(_sql.from_text(run_id) for run_id in found)
            return DeleteResult(
                runs=len(found),
                steps=steps,
                inputs=inputs,
                run_ids=deleted,
                bytes=size,
            )

        return await self._call(delete, write=True) if ids else DeleteResult()

    # --- journal ----------------------------------------------------------------
    async def load_journal(
        self, run_id: str, *, up_to_seq: int | None = None
    ) -> list[StepRecord]:
        def load(conn: Conn) -> list[StepRecord]:
            cursor = conn.cursor()
            cursor.row_factory = None  # plain tuples: see _sql.journal_records
            if up_to_seq is None:
                cursor.execute(_LOAD_JOURNAL, (_t(run_id),))
            else:
                cursor.execute(_LOAD_JOURNAL_UP_TO, (_t(run_id), up_to_seq))
            return _sql.journal_records(run_id, cursor.fetchall())

        return await self._call(load, write=False, inline=True)

    async def commit_step(self, step: StepRecord, *, fence: int) -> None:
        values = _sql.step_values(step)
        params = (*values, values[0], fence)  # values[0]: the run id, escaped once

        def commit(conn: Conn) -> None:
            if conn.execute(_COMMIT_STEP, params).rowcount == 0:
                raise LeaseLost(run_id=step.run_id, seq=step.seq, fence=fence)

        await self._call(commit, write=True, run_id=step.run_id, seq=step.seq)

    # --- archive (SupportsArchive, transactions in _sqlite_archive) --------------
    async def archive_journal(self, stub: ArchiveStub) -> bool:
        return await self._call(
            lambda conn: _archive.archive_journal_txn(conn, stub),
            write=True,
            run_id=stub.run_id,
        )

    async def load_archive_stub(self, run_id: str) -> ArchiveStub | None:
        return await self._call(
            lambda conn: _archive.load_stub_txn(conn, run_id), write=False, inline=True
        )

    async def restore_journal(
        self,
        stub: ArchiveStub,
        steps: Sequence[StepRecord],
        inputs: Sequence[InputRecord],
    ) -> bool:
        return await self._call(
            lambda conn: _archive.restore_journal_txn(conn, stub, steps, inputs),
            write=True,
            run_id=stub.run_id,
        )

    async def list_archive_stubs(
        self, *, after: str | None, limit: int
    ) -> list[ArchiveStub]:
        return await self._call(
            lambda conn: _archive.list_stubs_txn(conn, after, limit), write=False
        )

    # --- inputs -----------------------------------------------------------------
    async def send_input(self, record: InputRecord) -> bool:
        def send(conn: Conn) -> bool:
            if conn.execute(_SELECT_RUN, (_t(record.run_id),)).fetchone() is None:
                raise RunNotFound(run_id=record.run_id)
            inserted = conn.execute(
                "INSERT INTO resumable_inputs (run_id, key, value, sent_at_ms) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (run_id, key) DO NOTHING",
                (_t(record.run_id), _t(record.key), record.value, record.sent_at_ms),
            ).rowcount
            if inserted:
                conn.execute(_WAKE, (record.sent_at_ms, _t(record.run_id)))
            return bool(inserted)

        return await self._call(send, write=True, run_id=record.run_id)

    async def get_inputs(self, run_id: str) -> dict[str, bytes]:
        def get(conn: Conn) -> dict[str, bytes]:
            rows = conn.execute(
                "SELECT key, value FROM resumable_inputs WHERE run_id = ?",
                (_t(run_id),),
            )
            return {_sql.from_text(row["key"]): _sql.blob(row["value"]) for row in rows}

        return await self._call(get, write=False, inline=True)

    async def list_inputs(self, run_id: str) -> list[InputRecord]:
        def select(conn: Conn) -> list[InputRecord]:
            rows = conn.execute(
                "SELECT key, value, sent_at_ms FROM resumable_inputs WHERE run_id = ? "
                "ORDER BY sent_at_ms, key",
                (_t(run_id),),
            )
            return [
                InputRecord(
                    run_id=run_id,
                    key=_sql.from_text(row["key"]),
                    value=_sql.blob(row["value"]),
                    sent_at_ms=row["sent_at_ms"],
                )
                for row in rows
            ]

        return await self._call(select, write=False, inline=True)

    # --- snapshots --------------------------------------------------------------
    async def put_chunks(self, chunks: Mapping[str, bytes]) -> None:
        rows = list(chunks.items())

        def put(conn: Conn) -> None:
            conn.executemany(_PUT_CHUNK, rows)

        if rows:
            await self._call(put, write=True)

    async def get_chunks(self, hashes: Collection[str]) -> dict[str, bytes]:
        wanted = list(hashes)

        def get(conn: Conn) -> dict[str, bytes]:
            rows = _chunk_rows(conn, _SELECT_CHUNKS, wanted)
            return {row[0]: _sql.blob(row[1]) for row in rows}

        return await self._call(get, write=False, inline=True) if wanted else {}

    async def save_snapshot(
        self, snapshot: SnapshotRecord, *, chunks: Mapping[str, bytes] = NO_CHUNKS
    ) -> None:
        new_chunks = list(chunks.items())
        row = _snapshot_row(snapshot)
        older = [ref for ref in snapshot.chunk_refs if ref not in chunks]

        def save(conn: Conn) -> int:
            # writers are serialized: what this transaction finds stays until it ends
            unsure, token = self._present.unsure_txn(conn, older)
            # the common case: every chunk it names was seen stored, none to look up
            missing = set(unsure) - _stored_chunks(conn, unsure) if unsure else None
            if missing:
                raise ChunksMissing(
                    store=self.url,
                    thread_id=snapshot.thread_id,
                    hashes=tuple(sorted(missing)),
                )
            if new_chunks:
                conn.executemany(_PUT_CHUNK, new_chunks)
            conn.execute(_INSERT_SNAPSHOT, row)
            return token

        token = await self._call(save, write=True)
        self._present.add(token, snapshot.chunk_refs)

    async def load_snapshot(
        self, thread_id: str, *, namespace: str = "", checkpoint_id: str | None = None
    ) -> SnapshotRecord | None:
        def load(conn: Conn) -> SnapshotRecord | None:
            if checkpoint_id is None:
                row = conn.execute(
                    "SELECT * FROM resumable_snapshots WHERE thread_id = ? AND namespace = ? "
                    "ORDER BY checkpoint_id DESC LIMIT 1",
                    (_t(thread_id), _t(namespace)),
                ).fetchone()
            else:
                row = conn.execute(
                    "SELECT * FROM resumable_snapshots WHERE thread_id = ? AND namespace = ? "
                    "AND checkpoint_id = ?",
                    (_t(thread_id), _t(namespace), _t(checkpoint_id)),
                ).fetchone()
            return None if row is None else _snapshot(row)

        return await self._call(load, write=False, inline=True)

    async def list_snapshots(
        self,
        thread_id: str,
        *,
        namespace: str | None = "",
        before: str | None = None,
        limit: int | None = None,
    ) -> list[SnapshotRecord]:
        where: list[object] = [_t(thread_id)]
        if namespace is None:
            query = _SELECT_SNAPSHOTS_EVERY_NAMESPACE
        else:
            query = _SELECT_SNAPSHOTS
            where.append(_t(namespace))
        if before is not None:
            query += " AND checkpoint_id < ?"
            where.append(_t(before))
        query += _NEWEST_FIRST if namespace is None else _NEWEST_FIRST_IN_NAMESPACE
        where.append(-1 if limit is None else limit)

        def select(conn: Conn) -> list[SnapshotRecord]:
            return [_snapshot(row) for row in conn.execute(query, where)]

        return await self._call(select, write=False, inline=True)

    async def replace_snapshots(
        self,
        thread_id: str,
        namespace: str,
        checkpoint_ids: Collection[str],
        *,
        by: SnapshotRecord,
    ) -> bool:
        check_pack(thread_id, by)
        where = (_t(thread_id), _t(namespace))
        ids = [_t(checkpoint_id) for checkpoint_id in set(checkpoint_ids)]
        row = _snapshot_row(by)

        def replace(conn: Conn) -> bool:
            # writers are serialized: rows counted here stay until the commit
            found = sum(
                conn.execute(_COUNT_SNAPSHOTS + marks, (*where, *part)).fetchone()[0]
                for marks, part in _in_slices(ids)
            )
            if found != len(ids):
                return False
            for marks, part in _in_slices(ids):
                conn.execute(_DELETE_SNAPSHOTS + marks, (*where, *part))
            conn.execute(_INSERT_SNAPSHOT, row)
            return True

        # no fsync: see the module doc (a lost swap leaves the rows loose)
        return await self._call(replace, write=True, durable=False)

    async def delete_thread(self, thread_id: str) -> int:
        def delete(conn: Conn) -> int:
            return conn.execute(
                "DELETE FROM resumable_snapshots WHERE thread_id = ?", (_t(thread_id),)
            ).rowcount

        return await self._call(delete, write=True)

    async def scan_payloads(
        self, kind: PayloadKind, *, after: tuple[str | int, ...] | None, limit: int
    ) -> list[Payload]:
        table, ids, extra, column = _sql.PAYLOAD_COLUMNS[kind]
        names = ", ".join((*ids, *extra))
        order = ", ".join(ids)
        where = f"{column} IS NOT NULL"
        params: list[object] = []
        if after is not None:
            where += f" AND ({order}) > ({', '.join('?' * len(ids))})"
            params.extend(_sql.key_to_sql(part) for part in after[: len(ids)])
        sql = f"SELECT {names}, {column} FROM {table} WHERE {where} ORDER BY {order} LIMIT ?"  # noqa: S608 - table and columns are constants
        params.append(limit)

        def scan(conn: Conn) -> list[Payload]:
            cursor = conn.cursor()
            cursor.row_factory = None
            return [
                Payload(
                    kind=kind,
                    key=tuple(_sql.key_from_sql(part) for part in row[:-1]),
                    data=_sql.blob(row[-1]),
                )
                for row in cursor.execute(sql, params)
            ]

        return await self._call(scan, write=False)

    async def replace_payload(self, payload: Payload, *, data: bytes) -> bool:
        table, ids, _, column = _sql.PAYLOAD_COLUMNS[payload.kind]
        match = " AND ".join(f"{name} = ?" for name in ids)
        sql = f"UPDATE {table} SET {column} = ? WHERE {match} AND {column} = ?"  # noqa: S608 - table and columns are constants
        params = (
            data,
            *(_sql.key_to_sql(part) for part in payload.key[: len(ids)]),
            payload.data,
        )

        def replace(conn: Conn) -> bool:
            return conn.execute(sql, params).rowcount == 1

        return await self._call(replace, write=True)

    async def list_threads(
        self,
        *,
        prefix: str | None = None,
        after: tuple[int, str] | None = None,
        limit: int = 100,
    ) -> list[ThreadRecord]:
        params = {
            "prefix": _sql.maybe_text(prefix),
            "after_ms": None if after is None else after[0],
            "after_id": None if after is None else _t(after[1]),
            "limit": max(limit, 0),
        }

        def select(conn: Conn) -> list[ThreadRecord]:
            return [
                ThreadRecord(
                    thread_id=_sql.from_text(row["thread_id"]),
                    updated_at_ms=row["updated_at_ms"],
                )
                for row in conn.execute(_LIST_THREADS, params)
            ]

        return await self._call(select, write=False)

    async def delete_unreferenced_chunks(self, limit: int) -> int:
        def delete(conn: Conn) -> int:
            self._present.forget()
            return conn.execute(
                "DELETE FROM resumable_chunks WHERE hash IN ("
                " SELECT c.hash FROM resumable_chunks c WHERE c.hash NOT IN ("
                "  SELECT r.value FROM resumable_snapshots s, json_each(s.chunk_refs) r)"
                " LIMIT ?)",
                (limit,),
            ).rowcount

        return await self._call(delete, write=True)


def _in_slices(values: list[str]) -> Iterator[tuple[str, list[str]]]:
    """`values` in slices under SQLite's limit of variables per statement.

    Each comes with the "(?, ?, ...)" that follows an IN: placeholders only, the
    values are parameters.
    """
    for start in range(0, len(values), 500):
        part = values[start : start + 500]
        yield f"({', '.join('?' * len(part))})", part


def _chunk_rows(conn: Conn, select: str, hashes: list[str]) -> Iterator[Any]:
    """The rows `select` (ending in "IN ") finds for `hashes`."""
    for marks, part in _in_slices(hashes):
        yield from conn.execute(select + marks, part)


# one row per thread, grouped off the primary key's (thread_id, ...) order
_LIST_THREADS: Final = """
SELECT thread_id, max(created_at_ms) AS updated_at_ms FROM resumable_snapshots
 WHERE :prefix IS NULL OR substr(thread_id, 1, length(:prefix)) = :prefix
 GROUP BY thread_id
HAVING :after_ms IS NULL OR (max(created_at_ms), thread_id) < (:after_ms, :after_id)
 ORDER BY updated_at_ms DESC, thread_id DESC
 LIMIT :limit
"""
# list_snapshots' four queries, each of constant text: one namespace's rows are a
# range of the primary key, read newest first without a sort and without reading
# the thread's other rows (a pack's manifest among them), which a condition like
# "(? IS NULL OR namespace = ?)" would make SQLite scan and sort
_SELECT_SNAPSHOTS: Final = (
    "SELECT * FROM resumable_snapshots WHERE thread_id = ? AND namespace = ?"
)
_SELECT_SNAPSHOTS_EVERY_NAMESPACE: Final = (
    "SELECT * FROM resumable_snapshots WHERE thread_id = ?"
)
_NEWEST_FIRST_IN_NAMESPACE: Final = " ORDER BY checkpoint_id DESC LIMIT ?"
_NEWEST_FIRST: Final = " ORDER BY checkpoint_id DESC, namespace DESC LIMIT ?"


def _snapshot_row(snapshot: SnapshotRecord) -> tuple[object, ...]:
    """`_INSERT_SNAPSHOT`'s parameters."""
    return (
        _t(snapshot.thread_id),
        _t(snapshot.namespace),
        _t(snapshot.checkpoint_id),
        _sql.maybe_text(snapshot.parent_id),
        snapshot.manifest,
        json.dumps(list(snapshot.chunk_refs)),
        _sql.maybe_text(snapshot.label),
        snapshot.metadata,
        snapshot.created_at_ms,
    )


def _stored_chunks(conn: Conn, hashes: list[str]) -> set[str]:
    """Which of `hashes` the chunks table holds."""
    return {row[0] for row in _chunk_rows(conn, _SELECT_CHUNK_HASHES, hashes)}


class _PresentChunks:
    """The chunks a store saw stored, which its next saves need not look up.

    A save must not name a chunk that a collection deleted (`ChunksMissing`). Looked
    up in the save's transaction, each named chunk costs an index lookup, ~12 us in
    a busy process whose caches are cold (a LangGraph step names two or three).
    Chunks go only by `delete_unreferenced_chunks`. One this store runs forgets
    them all (`forget`, in its transaction). One that another connection commits
    (the store thread's, another process's `resumable gc`) changes `PRAGMA
    data_version` on this one, which `unsure_txn` reads in the save's transaction:
    what was seen before is then looked up again.
    """

    def __init__(self) -> None:
        self._hashes: set[str] = set()
        self._seen: tuple[Conn, int] | None = None  # the connection and its version
        self._generation = 0  # bumped by `forget`: a save that began before adds none
        self._lock = threading.Lock()

    def unsure_txn(self, conn: Conn, refs: list[str]) -> tuple[list[str], int]:
        """Which of `refs` to look up in this transaction, and a token for `add`."""
        if not refs:
            return refs, self._generation
        (version,) = conn.execute("PRAGMA data_version").fetchone()
        with self._lock:
            if self._seen != (conn, version):
                self._hashes.clear()
                self._seen = (conn, version)
            return [ref for ref in refs if ref not in self._hashes], self._generation

    def add(self, token: int, hashes: Collection[str]) -> None:
        """Note `hashes` as stored by a save that committed (`token`: its unsure_txn's)."""
        with self._lock:
            if token != self._generation:
                return  # a collection ran meanwhile
            if len(self._hashes) + len(hashes) > _PRESENT_MAX:
                self._hashes.clear()
            self._hashes.update(hashes)

    def forget(self) -> None:
        """Chunks are being deleted: nothing seen before counts any more."""
        with self._lock:
            self._generation += 1
            self._hashes.clear()


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


def _snapshot(row: sqlite3.Row) -> SnapshotRecord:
    return _sql.snapshot_from_row(row, row["chunk_refs"])


def _run_filters(query: RunQuery) -> tuple[str, list[object]]:
    """The WHERE clause (never empty) and its parameters for a run query's filters."""
    clauses = ["1 = 1"]
    params: list[object] = []
    if query.status:
        clauses.append(f"status IN ({', '.join('?' * len(query.status))})")
        params.extend(query.status)
    for column, value in (
        ("workflow", query.workflow),
        ("parent_id", query.parent_id),
        ("forked_from", query.forked_from),
        ("queue", query.queue),
        ("version", query.version),
    ):
        if value is not None:
            clauses.append(f"{column} = ?")  # column names are our constants
            params.append(_t(value))
    for clause, bound in (
        ("updated_at_ms < ?", query.updated_before_ms),
        ("created_at_ms >= ?", query.created_since_ms),
        ("created_at_ms < ?", query.created_before_ms),
    ):
        if bound is not None:
            clauses.append(clause)
            params.append(bound)
    if query.run_id_prefix is not None:
        prefix = _t(query.run_id_prefix)
        clauses.append("substr(run_id, 1, ?) = ?")
        params += [len(prefix), prefix]
    return " AND ".join(clauses), params
