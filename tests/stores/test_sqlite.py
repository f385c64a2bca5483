from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from resumable import (
    CheckpointWriteError,
    CorruptCheckpointError,
    Engine,
    SchemaVersionError,
    StoreError,
    step,
    workflow,
)
from resumable.errors import ChunksMissing
from resumable.stores import _sql
from resumable.stores.protocol import RunQuery
from resumable.stores.sqlite import SQLiteStore, migrations, parse_url
from resumable.stores.sqlite.connection import CHECKPOINT_EVERY
from resumable.testing import T0, run_record, snapshot_record, step_record


def test_url_forms_and_options() -> None:
    assert parse_url("sqlite:///rel/state.db") == (
        Path("rel/state.db"),
        "full",
        10_000,
        256,
        "rwc",
    )
    assert parse_url(
        "sqlite:////abs/state.db?durability=normal&busy_timeout_ms=50&mmap_mb=0&mode=ro"
    ) == (Path("/abs/state.db"), "normal", 50, 0, "ro")
    for bad in (
        "sqlite://",
        "sqlite:///x.db?mode=rwx",
        "sqlite:///x.db?durability=off",
        "sqlite:///x.db?nope=1",
        "sqlite:///x.db?mmap_mb=lots",
        "sqlite:///x.db?busy_timeout_ms=-1",
    ):
        with pytest.raises(StoreError):
            parse_url(bad)


async def _mmap_sizes(url: str) -> list[int]:
    """The memory map size of each connection a store at `url` opens."""
    sizes: list[int] = []

    def mmap_size(conn: sqlite3.Connection, _inline: bool) -> None:
        sizes.append(conn.execute("PRAGMA mmap_size").fetchone()[0])

    store = await SQLiteStore(url, on_connect=mmap_size).open()
    await store.close()
    return sizes


async def test_reads_go_through_a_memory_map_of_the_size_the_url_sets(
    tmp_path: Path,
) -> None:
    for query, expected in (("", 256 * 2**20), ("?mmap_mb=0", 0)):
        # the store thread's connection and the inline one
        sizes = await _mmap_sizes(f"sqlite:///{tmp_path / 'm.db'}{query}")
        assert sizes == [expected, expected]


_CUT_SHORT = textwrap.dedent(
    """
    import asyncio, os, sys
    from resumable import Engine, step, workflow
    from resumable.errors import ResumableError

    @step
    async def page(i: int) -> str:
        return "x" * 3000 + str(i)

    @workflow
    async def flow(n: int) -> int:
        for i in range(n):
            await page(i)
        return n

    async def main() -> None:
        url = sys.argv[1]
        async with Engine(url) as engine:
            await engine.run(flow, 300, run_id="r")
        async with Engine(url) as engine:
            await engine.history("r")
            os.truncate(url.split("///")[1].split("?")[0], 8192)
            try:
                await engine.history("r")
            except ResumableError:
                pass

    asyncio.run(main())
    """
)


def test_a_store_opened_without_mmap_survives_its_file_being_cut_short(
    tmp_path: Path,
) -> None:
    # docs/operations.md "SQLite process killed by SIGBUS": the default memory map
    # may end the process with SIGBUS here; mmap_mb=0 turns it into an error
    url = f"sqlite:///{tmp_path / 'state.db'}?mmap_mb=0"
    done = subprocess.run(
        [sys.executable, "-c", _CUT_SHORT, url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr[-2000:]


async def test_store_on_a_newer_schema_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    store = await SQLiteStore(f"sqlite:///{db}").open()
    await store.close()
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE resumable_meta SET value = '999' WHERE key = 'schema_version'"
        )
    with pytest.raises(SchemaVersionError, match="999"):
        await SQLiteStore(f"sqlite:///{db}").open()


@pytest.mark.parametrize("version", ["abc", "", "-1", "1e3", "99999999999999"])
@pytest.mark.timeout(10)
async def test_a_damaged_schema_version_is_a_store_error_not_a_hang(
    tmp_path: Path, version: str
) -> None:
    db = tmp_path / "damaged.db"
    store = await SQLiteStore(f"sqlite:///{db}").open()
    await store.close()
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE resumable_meta SET value = ? WHERE key = 'schema_version'",
            (version,),
        )
    with pytest.raises(StoreError, match="schema_version") as caught:
        await asyncio.wait_for(SQLiteStore(f"sqlite:///{db}").open(), 5)
    assert "restore it from a backup" in str(caught.value)


async def test_an_unforeseen_failure_on_the_store_thread_reaches_the_opener(
    tmp_path: Path,
) -> None:
    def broken(conn: object, inline: bool) -> None:
        raise RuntimeError("something nobody planned for")

    store = SQLiteStore(f"sqlite:///{tmp_path / 'x.db'}", on_connect=broken)
    with pytest.raises(StoreError, match="something nobody planned for"):
        await asyncio.wait_for(store.open(), 5)


async def test_an_older_schema_is_migrated_forward_keeping_its_data(
    tmp_path: Path,
) -> None:
    db = tmp_path / "old.db"
    first = migrations.in_order()[0]
    with sqlite3.connect(db) as conn:
        conn.execute(
            "CREATE TABLE resumable_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )
        for statement in _sql.split_statements(first.sql):
            conn.execute(statement)
        conn.execute("INSERT INTO resumable_meta VALUES ('schema_version', '1')")
        conn.execute(
            "INSERT INTO resumable_runs (run_id, workflow, status, input, created_at_ms, "
            "updated_at_ms) VALUES ('kept', 'wf', 'queued', x'00', 1, 1)"
        )
    store = await SQLiteStore(f"sqlite:///{db}").open()
    try:
        assert (await store.get_run("kept")) is not None
    finally:
        await store.close()
    with sqlite3.connect(db) as conn:
        (version,) = conn.execute(
            "SELECT value FROM resumable_meta WHERE key = 'schema_version'"
        ).fetchone()
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert int(version) == migrations.latest_version() >= 2
    assert "resumable_runs_expires" in indexes


async def test_a_corrupt_step_row_is_refused_naming_run_and_step(
    tmp_path: Path,
) -> None:
    db = tmp_path / "corrupt.db"

    @step
    async def produce() -> str:
        return "precious"

    @workflow
    async def wf() -> str:
        value = await produce()
        raise RuntimeError(f"stop with {value} recorded")

    engine = Engine(f"sqlite:///{db}")
    with pytest.raises(Exception, match="stop with"):
        await engine.run(wf, run_id="c")
    await engine.close()
    with sqlite3.connect(db) as conn:
        (blob,) = conn.execute(
            "SELECT output FROM resumable_steps WHERE seq = 1"
        ).fetchone()
        flipped = bytes(blob[:-1]) + bytes([blob[-1] ^ 0x01])
        conn.execute("UPDATE resumable_steps SET output = ? WHERE seq = 1", (flipped,))
    with pytest.raises(CorruptCheckpointError) as caught:
        await Engine(f"sqlite:///{db}").resume("c")
    assert "run 'c'" in str(caught.value)
    assert "step #1" in str(caught.value)
    assert "produce" in str(caught.value)


@pytest.mark.parametrize("collector", ["another store", "a bare connection"])
async def test_a_chunk_another_connection_collects_is_missing_for_the_next_save(
    tmp_path: Path, collector: str
) -> None:
    """The chunks a store saw stored are looked up again once another connection
    wrote: it may have collected them (`resumable gc` in another process)."""
    path = tmp_path / "state.db"
    store = await SQLiteStore(f"sqlite:///{path}").open()
    try:
        await store.save_snapshot(
            snapshot_record("t", "0001", ("x",)), chunks={"x": b"X"}
        )
        await store.save_snapshot(snapshot_record("t", "0002", ("x",)))  # x seen stored
        await store.delete_thread("t")
        if collector == "another store":
            other = await SQLiteStore(f"sqlite:///{path}").open()
            try:
                assert await other.delete_unreferenced_chunks(100) == 1
            finally:
                await other.close()
        else:
            with contextlib.closing(sqlite3.connect(path)) as conn, conn:
                conn.execute("DELETE FROM resumable_chunks WHERE hash = 'x'")
        with pytest.raises(ChunksMissing) as refused:
            await store.save_snapshot(snapshot_record("t", "0003", ("x",)))
        assert refused.value.hashes == ("x",)
    finally:
        await store.close()


def test_several_processes_share_one_file(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    script = textwrap.dedent(
        f"""
        import sys
        from resumable import Engine, step, workflow

        @step
        async def s(i: int) -> int:
            return i

        @workflow(name="shared")
        async def wf(n: int) -> int:
            return sum([await s(i) for i in range(n)])

        engine = Engine("sqlite:///{db}?durability=normal")
        worker = sys.argv[1]
        for r in range(40):
            assert engine.run_sync(wf, 5, run_id=f"{{worker}}-{{r}}") == 10
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(w)], stderr=subprocess.PIPE)
        for w in range(4)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    with sqlite3.connect(db) as conn:
        (runs,) = conn.execute(
            "SELECT count(*) FROM resumable_runs WHERE status = 'succeeded'"
        ).fetchone()
        (steps,) = conn.execute("SELECT count(*) FROM resumable_steps").fetchone()
    assert (runs, steps) == (160, 800)


async def test_concurrent_first_calls_wait_for_the_open_to_finish(
    tmp_path: Path,
) -> None:
    """Regression: a caller arriving mid-migration used to write before WAL was set."""
    from resumable.stores.protocol import RunRecord

    for durability in ("full", "normal"):
        store = SQLiteStore(
            f"sqlite:///{tmp_path / durability}.db?durability={durability}"
        )
        runs = [
            RunRecord(
                run_id=f"r{i}",
                workflow="wf",
                status="queued",
                input=b"x",
                created_at_ms=i,
                updated_at_ms=i,
            )
            for i in range(20)
        ]
        created = await asyncio.gather(
            *(store.create_run(run) for run in runs),
            *(store.get_run(f"r{i}") for i in range(20)),
        )
        assert [run.run_id if run else None for run in created[:20]] == [
            f"r{i}" for i in range(20)
        ]
        await store.close()


class DiskSpy:
    """A store's `sync_file`: records each WAL sync and makes it, or fails with `error`."""

    def __init__(self, path: Path) -> None:
        self.wal = Path(f"{path}-wal")
        self.events: list[object] = []
        self.error: OSError | None = None
        self.before: Callable[[], None] = lambda: None  # runs before each sync

    def __call__(self, fd: int) -> None:
        if self.error is not None:
            raise self.error
        wal = os.stat(self.wal)
        assert (os.fstat(fd).st_dev, os.fstat(fd).st_ino) == (wal.st_dev, wal.st_ino)
        self.before()
        self.events.append("WAL synced")
        os.fsync(fd)


@pytest.fixture
def disk(tmp_path: Path) -> DiskSpy:
    return DiskSpy(tmp_path / "store.db")


class Connections:
    """A store's `on_connect` and `inline_lock`: which connection ran what, on which thread.

    Holding `gate` (the store's inline lock) sends every call to the store thread.
    `hold(text, event)` stops the store thread at its next statement containing
    `text` until `event` is set.
    """

    def __init__(self) -> None:
        self.inline: sqlite3.Connection | None = None
        self.ran: list[tuple[bool, int, str]] = []  # (inline, thread, statement)
        self.gate = threading.Lock()
        self.held: tuple[str, threading.Event] | None = None

    def __call__(self, conn: sqlite3.Connection, inline: bool) -> None:
        if inline:
            self.inline = conn
        conn.set_trace_callback(lambda sql: self._ran(inline, sql))

    def _ran(self, inline: bool, sql: str) -> None:
        self.ran.append((inline, threading.get_ident(), sql))
        held = self.held
        if not inline and held is not None and held[0] in sql:
            self.held = None
            held[1].wait(10)

    def sql(self, *, inline: bool) -> list[str]:
        return [sql for on_inline, _, sql in self.ran if on_inline == inline]

    def threads(self, text: str) -> set[tuple[bool, int]]:
        """(inline, thread) of every statement containing `text`."""
        return {(inline, thread) for inline, thread, sql in self.ran if text in sql}


@pytest.fixture
def connections() -> Connections:
    return Connections()


@pytest.fixture
async def opened(
    tmp_path: Path, disk: DiskSpy, connections: Connections
) -> AsyncIterator[SQLiteStore]:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = SQLiteStore(
        url, sync_file=disk, on_connect=connections, inline_lock=connections.gate
    )
    yield await store.open()
    await store.close()


async def _leased_run(store: SQLiteStore, run_id: str) -> int:
    await store.create_run(run_record(run_id))
    lease = await store.acquire_lease(run_id, owner="me", now_ms=T0, ttl_ms=60_000)
    assert lease is not None
    return lease.fence


async def test_a_journal_loads_on_the_calling_thread_when_the_inline_connection_is_free(
    opened: SQLiteStore, connections: Connections
) -> None:
    store = opened
    fence = await _leased_run(store, "r")
    for seq in (1, 2):
        await store.commit_step(step_record("r", seq), fence=fence)
    here = threading.get_ident()
    connections.ran.clear()
    assert [s.seq for s in await store.load_journal("r")] == [1, 2]
    assert connections.threads("FROM resumable_steps") == {(True, here)}
    # another caller holds the inline connection: the store thread loads it
    connections.ran.clear()
    with connections.gate:
        assert [s.seq for s in await store.load_journal("r")] == [1, 2]
    (where,) = connections.threads("FROM resumable_steps")
    assert where[0] is False
    assert where[1] != here
    assert [s.seq for s in await store.load_journal("r")] == [1, 2]


POINT_READS: list[tuple[str, Callable[[SQLiteStore], Awaitable[object]]]] = [
    ("resumable_runs", lambda store: store.get_run("r")),
    ("resumable_inputs", lambda store: store.get_inputs("r")),
    ("resumable_chunks", lambda store: store.get_chunks(["0" * 64])),
    ("resumable_snapshots", lambda store: store.load_snapshot("t")),
    ("resumable_snapshots", lambda store: store.list_snapshots("t", limit=3)),
]


@pytest.mark.parametrize(
    ("table", "read"),
    POINT_READS,
    ids=["get_run", "get_inputs", "get_chunks", "load_snapshot", "list_snapshots"],
)
async def test_reads_of_one_run_or_thread_take_the_inline_connection(
    opened: SQLiteStore,
    connections: Connections,
    table: str,
    read: Callable[[SQLiteStore], Awaitable[object]],
) -> None:
    """A saver's get_tuple on LangGraph's thread pays no wake-up of the store thread."""
    store = opened
    await store.get_run("warm-up")  # opens the inline connection
    connections.ran.clear()
    await read(store)
    await store.list_runs(RunQuery())  # a scan of every run: on the store thread
    statements = connections.sql(inline=True)
    assert (
        [sql for sql in statements if "FROM" in sql]
        == [sql for sql in statements if f"FROM {table}" in sql]
        != []
    )


async def _busy_thread(
    store: SQLiteStore, connections: Connections
) -> tuple[asyncio.Future[Any], threading.Event]:
    """Keep the store thread in a read until the event is set (then await the read).

    Writes queued meanwhile wait behind it, and commit together after it.
    """
    release = threading.Event()
    connections.held = ("FROM resumable_runs", release)
    busy = asyncio.ensure_future(store.list_runs(RunQuery()))  # on the store thread
    await asyncio.sleep(0.05)
    return busy, release


async def test_a_journal_load_sees_a_write_still_queued_on_the_store_thread(
    opened: SQLiteStore,
    connections: Connections,
) -> None:
    store = opened
    fence = await _leased_run(store, "r")
    busy, release = await _busy_thread(store, connections)
    with connections.gate:  # so that the write cannot commit inline
        write = asyncio.ensure_future(
            store.commit_step(step_record("r", 1), fence=fence)
        )
        await asyncio.sleep(0)
    load = asyncio.ensure_future(store.load_journal("r"))
    await asyncio.sleep(0.05)
    assert not load.done()  # an inline read now would miss the queued write
    release.set()
    await asyncio.gather(busy, write)
    assert [s.seq for s in await load] == [1]


async def test_lease_writes_commit_without_an_fsync_and_step_commits_with_one(
    opened: SQLiteStore, disk: DiskSpy, connections: Connections
) -> None:
    store = opened
    fence = await _leased_run(store, "r")
    events = disk.events
    events.clear()
    for on_thread in (False, True):  # inline, then on the store thread
        with connections.gate if on_thread else contextlib.nullcontext():
            await store.renew_lease("r", fence=fence, now_ms=T0, ttl_ms=60_000)
            assert events == ["WAL synced"] * on_thread
            await store.commit_step(step_record("r", 1 + on_thread), fence=fence)
            assert events == ["WAL synced"] * (1 + on_thread)

    with sqlite3.connect(store.path) as other:  # from now on, step writes fail
        other.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON resumable_steps"
            " BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END"
        )
    for on_thread in (False, True):  # a write that fails syncs nothing
        held = connections.gate if on_thread else contextlib.nullcontext()
        with held, pytest.raises(CheckpointWriteError, match="disk I/O error"):
            await store.commit_step(step_record("r", 3 + on_thread), fence=fence)
    assert events == ["WAL synced"] * 2
    assert [step.seq for step in await store.load_journal("r")] == [1, 2]


async def test_a_durable_write_syncs_the_wal_after_its_commit_with_the_write_lock_free(
    opened: SQLiteStore, disk: DiskSpy, connections: Connections
) -> None:
    """The next writer, of this process or another, commits while the disk works."""
    store = opened
    await store.save_snapshot(snapshot_record("t", "0001", ()))  # opens inline
    committed: list[list[str]] = []

    def commit_elsewhere() -> None:
        other = sqlite3.connect(store.path, timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # raises while a writer holds the lock
            rows = other.execute("SELECT checkpoint_id FROM resumable_snapshots")
            committed.append(sorted(row[0] for row in rows))
            other.execute("ROLLBACK")
        finally:
            other.close()

    disk.before = commit_elsewhere
    await store.save_snapshot(snapshot_record("t", "0002", ()))
    with connections.gate:  # the same on the store thread
        await store.save_snapshot(snapshot_record("t", "0003", ()))
    assert committed == [["0001", "0002"], ["0001", "0002", "0003"]]


async def test_a_failed_wal_fsync_on_the_store_thread_fails_the_durable_writes_alone(
    opened: SQLiteStore, disk: DiskSpy, connections: Connections
) -> None:
    """A lease write committed beside them stands: it never waited for the disk."""
    store = opened
    fence = await _leased_run(store, "r")
    busy, release = await _busy_thread(store, connections)
    disk.error = OSError(5, "Input/output error")
    with connections.gate:  # both queue, and commit in one batch
        renew = asyncio.ensure_future(
            store.renew_lease("r", fence=fence, now_ms=T0 + 1, ttl_ms=60_000)
        )
        step = asyncio.ensure_future(
            store.commit_step(step_record("r", 1), fence=fence)
        )
        await asyncio.sleep(0)
        release.set()
        await busy
        with pytest.raises(StoreError, match=r"may not be on disk.*check the disk"):
            await step
        await renew
    run = await store.get_run("r")
    assert run is not None
    assert run.lease_expires_at_ms == T0 + 1 + 60_000
    assert [s.seq for s in await store.load_journal("r")] == [1]  # committed


async def test_a_pack_swap_commits_without_an_fsync_and_snapshots_with_one(
    opened: SQLiteStore, disk: DiskSpy, connections: Connections
) -> None:
    store = opened
    events = disk.events
    events.clear()
    await store.save_snapshot(snapshot_record("t", "0001", ()))
    await store.save_snapshot(snapshot_record("t", "0002", ()))
    assert events == ["WAL synced"] * 2
    old = await store.list_snapshots("t")
    pack = snapshot_record("t", "0001", (), namespace=":pack:", label="0002")
    assert await store.swap_snapshots("t", old, by=pack, durable=False)
    assert events == ["WAL synced"] * 2
    await store.save_snapshot(snapshot_record("t", "0003", ()))
    assert events == ["WAL synced"] * 3
    with connections.gate:  # the same on the store thread
        old = await store.list_snapshots("t")
        pack = snapshot_record("t", "0003", (), namespace=":pack:", label="0003")
        assert await store.swap_snapshots("t", old, by=pack, durable=False)
    assert events == ["WAL synced"] * 3
    assert [r.checkpoint_id for r in await store.list_snapshots("t")] == []
    # a swap that deletes rows (delete_states) is as durable as any write
    assert await store.swap_snapshots("t", [pack], by=None)
    assert events == ["WAL synced"] * 4


async def test_a_failed_wal_fsync_is_a_store_error_naming_what_to_do(
    opened: SQLiteStore, disk: DiskSpy
) -> None:
    disk.error = OSError(5, "Input/output error")
    with pytest.raises(StoreError, match=r"may not be on disk.*check the disk"):
        await opened.save_snapshot(snapshot_record("t", "0001", ()))  # inline


async def test_a_store_without_fsyncs_never_syncs_its_wal(tmp_path: Path) -> None:
    path = tmp_path / "n.db"
    disk = DiskSpy(path)
    url = f"sqlite:///{path}?durability=normal"
    store = await SQLiteStore(url, sync_file=disk).open()
    try:
        await store.save_snapshot(snapshot_record("t", "0001", ()))
        assert disk.events == []
    finally:
        await store.close()


def _wal_frames(path: Path) -> int:
    """Frames in use in the WAL of `path` (a passive checkpoint from outside reports it)."""
    conn = sqlite3.connect(path)
    try:
        _, frames, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(frames)
    finally:
        conn.close()


async def _with_steps(
    url: str, count: int, connections: Connections | None = None
) -> tuple[SQLiteStore, int]:
    """A store at `url` holding run "r" (leased: its fence) and `count` 1 KB steps."""
    store = await SQLiteStore(url, on_connect=connections).open()
    fence = await _leased_run(store, "r")
    for seq in range(1, count + 1):  # ~2.7 pages each
        await store.commit_step(step_record("r", seq, output=b"x" * 1000), fence=fence)
    return store, fence


async def test_with_durability_full_each_commit_keeps_the_wal_small(
    tmp_path: Path,
) -> None:
    """Full: an inline commit checkpoints at 100 pages (see _WAL_PAGES_FULL); the
    store thread's commits, on SQLite's default of 1000, would leave more."""
    path = tmp_path / "full.db"
    store, _ = await _with_steps(f"sqlite:///{path}", 480)
    assert _wal_frames(path) <= 100 + 10
    await store.close()


async def test_with_durability_normal_the_store_thread_checkpoints_the_wal(
    tmp_path: Path,
) -> None:
    """Normal: no inline commit pays a checkpoint's fsync; every 2500th queues one."""
    path = tmp_path / "normal.db"
    connections = Connections()
    url = f"sqlite:///{path}?durability=normal"
    store, fence = await _with_steps(url, 300, connections)
    assert _wal_frames(path) > 300  # grown: no commit checkpointed it

    async def checkpoints() -> int:
        await store.list_runs(RunQuery(limit=1))  # behind any checkpoint queued
        on_thread = connections.sql(inline=False)
        return sum("wal_checkpoint(RESTART)" in sql for sql in on_thread)

    assert await checkpoints() == 0
    commits = 302  # the run's, its lease's and its 300 steps'
    seq = 300
    # a commit that finds the write lock busy (a checkpoint running) goes to the
    # store thread, uncounted: the checkpoints may come late, never early
    while commits < 3 * CHECKPOINT_EVERY:
        seq, commits = seq + 1, commits + 1
        await store.commit_step(step_record("r", seq), fence=fence)
        if commits in (CHECKPOINT_EVERY - 1, 2 * CHECKPOINT_EVERY - 1):
            assert await checkpoints() <= commits // CHECKPOINT_EVERY  # never early
        done = commits > 2 * CHECKPOINT_EVERY and commits % 50 == 0
        if done and await checkpoints() == 2:
            break
    assert await checkpoints() == 2
    assert _wal_frames(path) < 3 * CHECKPOINT_EVERY  # restarted, not grown
    await store.close()


async def test_with_durability_full_a_lone_run_commits_inline_and_concurrent_runs_queue(
    opened: SQLiteStore, connections: Connections
) -> None:
    store = opened
    fences = {run: await _leased_run(store, run) for run in ("a", "b")}
    connections.ran.clear()

    def committed(statements: list[str]) -> list[int]:
        return [
            seq
            for seq in range(1, 10)
            for sql in statements
            if "INTO resumable_steps" in sql and f"'step{seq}'" in sql
        ]

    async def commit(run: str, seq: int) -> None:
        await store.commit_step(step_record(run, seq), fence=fences[run])

    for seq in (1, 2, 3):  # "b" leased last: its steps follow its own writes
        await commit("b", seq)
        await store.put_chunks({f"{seq:064x}": b"chunk"})  # a write of no run
    assert committed(connections.sql(inline=True)) == [1, 2, 3]
    assert committed(connections.sql(inline=False)) == []
    connections.ran.clear()
    # interleaved runs: after the first, each write follows another run's
    await asyncio.gather(commit("b", 4), commit("a", 5), commit("b", 6), commit("a", 7))
    assert committed(connections.sql(inline=True)) == [4]
    assert committed(connections.sql(inline=False)) == [5, 6, 7]


async def test_with_durability_full_concurrent_runs_share_commits(
    tmp_path: Path,
) -> None:
    """Regression: an inline commit holds the loop through its fsync, so no write of
    another run found one queued and 50 runs paid one fsync per step (~200 us)."""
    connections = Connections()
    store = SQLiteStore(f"sqlite:///{tmp_path / 'store.db'}", on_connect=connections)
    engine = Engine(store)

    @step
    async def produce(i: int) -> int:
        return i

    @workflow(name="test.sqlite.concurrent")
    async def steps(n: int) -> int:
        return sum([await produce(i) for i in range(n)])

    await engine.run(steps, 1, run_id="warm-up")
    connections.ran.clear()
    results = await asyncio.gather(
        *(engine.run(steps, 10, run_id=f"r{i}") for i in range(20))
    )
    assert results == [45] * 20
    commits = connections.sql(inline=False)
    step_inserts = sum("INTO resumable_steps" in sql for sql in commits)
    transactions = sum(sql == "COMMIT" for sql in commits)
    assert step_inserts > 100  # most of the 200 went to the store thread ...
    assert transactions < step_inserts / 2  # ... and shared its commits
    await engine.close()


async def test_listing_one_namespace_reads_its_rows_alone(
    opened: SQLiteStore, connections: Connections
) -> None:
    """A namespace's rows are a range of the primary key, read newest first: the
    thread's other namespaces (a LangGraph subgraph's, its packs) cost nothing."""
    store = opened
    for namespace in range(40):
        for seq in range(20):
            record = snapshot_record("t", f"{seq:04d}", (), namespace=f"ns{namespace}")
            await store.save_snapshot(record)
    inline = connections.inline
    assert inline is not None
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0  # go on

    inline.set_progress_handler(count, 1)  # every SQLite VM instruction
    try:
        (latest,) = await store.list_snapshots("t", namespace="ns7", limit=1)
        read_latest, steps[0] = steps[0], 0
        (earlier,) = await store.list_snapshots(
            "t", namespace="ns7", before="0010", limit=1
        )
        read_earlier = steps[0]
    finally:
        inline.set_progress_handler(None, 0)
    assert (latest.namespace, latest.checkpoint_id) == ("ns7", "0019")
    assert (earlier.namespace, earlier.checkpoint_id) == ("ns7", "0009")
    # ~35 each; a scan of the thread's 800 rows and a sort: over 4000
    assert read_latest < 500
    assert read_earlier < 500
