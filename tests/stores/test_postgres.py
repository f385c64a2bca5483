"""PostgresStore beyond the contract: migrations, fencing races, group commit,
wake-ups, odd identifiers and a server restart (claims: test_postgres_claims.py)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

from conftest import postgres_url as _url
from conftest import service_url
from resumable import Engine, step, workflow
from resumable.errors import (
    CheckpointWriteError,
    CorruptCheckpointError,
    LeaseLost,
    SchemaVersionError,
    StoreError,
)
from resumable.stores import create_store
from resumable.stores.postgres import PostgresStore, parse_url
from resumable.stores.postgres.migrations import latest_version
from resumable.stores.protocol import (
    InputRecord,
    QueuePolicy,
    RunQuery,
    SnapshotRecord,
    StepRecord,
)
from resumable.testing import T0, run_record, step_record

pytestmark = pytest.mark.postgres

Factory = Callable[..., PostgresStore]


@pytest.fixture
def base_url() -> str:
    """The test server (skip, or fail in CI, without one)."""
    return service_url("postgres")


@pytest.fixture
def new_store(new_postgres_store: Factory) -> Factory:
    """Makes stores; every schema they name is dropped and every store closed after."""
    return new_postgres_store


# --- URL and lifecycle ----------------------------------------------------------------
def test_url_options_are_stripped_before_libpq_sees_them() -> None:
    options = parse_url(
        "postgresql://u:secret@h:5433/db?sslmode=disable&schema=app&pool_max=3"
        "&pool_timeout_s=2.5&application_name=x"
    )
    assert options.conninfo == (
        "postgresql://u:secret@h:5433/db?sslmode=disable&application_name=x"
    )
    assert (options.schema, options.pool_max, options.pool_timeout_s) == ("app", 3, 2.5)
    assert parse_url("postgres://h/db").schema == "resumable"
    spaced = parse_url("postgresql://h/db?options=-c%20search_path%3Dx&schema=s")
    assert spaced.conninfo == "postgresql://h/db?options=-c%20search_path%3Dx"
    with pytest.raises(StoreError):
        parse_url("postgresql://h/db?pool_max=many")


def test_a_schema_name_postgres_would_truncate_is_refused() -> None:
    assert parse_url(f"postgresql://h/db?schema={'s' * 63}").schema == "s" * 63
    with pytest.raises(StoreError, match="at most 63 bytes"):
        parse_url(f"postgresql://h/db?schema={'s' * 64}")
    with pytest.raises(StoreError, match="at most 63 bytes"):
        parse_url(f"postgresql://h/db?schema={'é' * 32}")  # 64 bytes in UTF-8


async def test_store_is_made_without_io_and_fails_cleanly_when_unreachable() -> None:
    store = create_store("postgresql://u:secret@127.0.0.1:1/db?connect_timeout=2")
    assert isinstance(store, PostgresStore)
    assert store.url == "postgresql://u:***@127.0.0.1:1/db?connect_timeout=2"
    with pytest.raises(StoreError) as caught:
        await store.get_run("r")
    assert "secret" not in str(caught.value)
    assert not isinstance(caught.value, psycopg.Error)
    await store.close()
    await store.close()


async def test_pool_size_comes_from_the_url(new_store: Factory, base_url: str) -> None:
    await new_store().drop()  # dropping a store never opened is fine
    name = f"pool-{uuid.uuid4().hex[:8]}"
    store = await new_store(pool_max=3, application_name=name).open()
    assert await store.open() is store
    table = sql.SQL("{}.resumable_runs").format(sql.Identifier(store.schema))
    async with await psycopg.AsyncConnection.connect(base_url) as admin:
        await admin.execute(
            sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(table)
        )
        # six reads wait for the lock; the pool lends at most three connections
        reads = [asyncio.ensure_future(store.get_run(f"r{i}")) for i in range(6)]
        waiting = 0
        for _ in range(100):
            await asyncio.sleep(0.05)
            cur = await admin.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE application_name = %s AND wait_event_type = 'Lock'",
                (name,),
            )
            row = await cur.fetchone()
            assert row is not None
            waiting = row[0]
            if waiting >= 3:
                break
        await asyncio.sleep(0.2)  # time for a fourth, were there one
        cur = await admin.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE application_name = %s AND wait_event_type = 'Lock'",
            (name,),
        )
        assert await cur.fetchone() == (3,)
        await admin.rollback()  # releases the lock
    assert await asyncio.gather(*reads) == [None] * 6


# --- migrations -----------------------------------------------------------------------
_OPEN_ONE = """
import asyncio, sys
from resumable.stores.postgres import PostgresStore
async def main():
    store = PostgresStore(sys.argv[1])
    await store.open()
    await store.close()
asyncio.run(main())
"""


async def test_processes_starting_together_migrate_once(
    new_store: Factory, base_url: str
) -> None:
    store = new_store()  # owns the schema's cleanup; opened last
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _OPEN_ONE,
            _url(base_url, store.schema),
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(5)
    ]
    results = [await p.communicate() for p in processes]
    assert [p.returncode for p in processes] == [0] * 5, results
    await store.open()
    async with await psycopg.AsyncConnection.connect(base_url) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (store.schema,)
        )
        assert await cur.fetchone() == (13,)  # twelve tables and resumable_meta
    assert await store.get_run("none") is None


async def test_tasks_opening_one_store_together_share_one_open(
    new_store: Factory,
) -> None:
    store = new_store()
    opened = await asyncio.gather(*(store.open() for _ in range(5)))
    assert all(o is store for o in opened)


async def test_a_role_without_ddl_rights_opens_a_migrated_schema(
    new_store: Factory, base_url: str
) -> None:
    owner = await new_store().open()
    role = f"app_{uuid.uuid4().hex[:8]}"
    admin = await psycopg.AsyncConnection.connect(base_url, autocommit=True)
    try:
        try:
            await admin.execute(
                sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role))
            )
        except psycopg.Error:
            pytest.skip("the test user cannot create roles")
        grants = (
            "GRANT USAGE ON SCHEMA {schema} TO {role}",
            "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}",
        )
        for grant in grants:
            await admin.execute(
                sql.SQL(grant).format(
                    schema=sql.Identifier(owner.schema), role=sql.Identifier(role)
                )
            )
        parts = urlsplit(_url(base_url, owner.schema))
        app_url = parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port or 5432}")
        app = PostgresStore(app_url.geturl())
        try:
            await app.open()
        except StoreError as exc:
            if "authentication" in str(exc):
                pytest.skip("the server does not trust a new role")
            raise
        try:
            await app.create_run(run_record("r"))
            lease = await app.acquire_lease("r", owner="w", now_ms=T0, ttl_ms=1000)
            assert lease is not None
            await app.commit_step(step_record("r", 1), fence=lease.fence)
            assert len(await app.load_journal("r")) == 1
        finally:
            await app.close()
    finally:
        await admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        await admin.execute(
            sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role))
        )
        await admin.close()


async def test_a_newer_schema_is_refused(new_store: Factory, base_url: str) -> None:
    first = await new_store().open()
    async with await psycopg.AsyncConnection.connect(base_url) as conn:
        await conn.execute(
            sql.SQL(
                "UPDATE {schema}.resumable_meta SET value = %s WHERE key = 'schema_version'"
            ).format(schema=sql.Identifier(first.schema)),
            (str(latest_version() + 1),),
        )
    later = new_store(first.schema)
    with pytest.raises(SchemaVersionError) as caught:
        await later.open()
    assert caught.value.found == latest_version() + 1


# --- fencing and group commit ------------------------------------------------------------
async def _commit_until_lost(
    store: PostgresStore,
    *,
    run_id: str,
    fence: int,
    seqs: range,
    stop: asyncio.Event,
    outcomes: dict[int, str],
) -> None:
    """Commit seq after seq with one fence, as a zombie executor would."""
    for seq in seqs:
        if stop.is_set():
            return
        try:
            await store.commit_step(step_record(run_id, seq), fence=fence)
        except LeaseLost:
            outcomes[seq] = "lost"
            return
        outcomes[seq] = "ok"


async def _race_takeover(
    zombie: PostgresStore, successor: PostgresStore, run_id: str
) -> None:
    await zombie.create_run(run_record(run_id))
    old = await zombie.acquire_lease(run_id, owner="zombie", now_ms=T0, ttl_ms=60_000)
    assert old is not None
    stop = asyncio.Event()
    outcomes: dict[int, str] = {}
    writers = [
        asyncio.create_task(
            _commit_until_lost(
                zombie,
                run_id=run_id,
                fence=old.fence,
                seqs=range(i, 100_000, 20),
                stop=stop,
                outcomes=outcomes,
            )
        )
        for i in range(1, 21)
    ]
    await asyncio.sleep(0.05)
    new = await successor.acquire_lease(
        run_id, owner="successor", now_ms=T0, ttl_ms=60_000, take_over="zombie"
    )
    assert new is not None
    assert new.fence == old.fence + 1
    # whatever the old owner got in committed before the takeover did
    at_takeover = {s.seq for s in await successor.load_journal(run_id)}
    await asyncio.sleep(0.05)
    stop.set()
    await asyncio.gather(*writers)
    stored = {s.seq for s in await successor.load_journal(run_id)}
    assert stored == at_takeover, "a write with the old fence landed after the takeover"
    assert {seq for seq, o in outcomes.items() if o == "ok"} <= stored
    assert not {seq for seq, o in outcomes.items() if o == "lost"} & stored
    assert "lost" in outcomes.values()


async def test_a_takeover_racing_commits_leaves_no_stale_write_behind(
    new_store: Factory,
) -> None:
    zombie = await new_store().open()
    successor = await new_store(zombie.schema).open()  # another process: its own pool
    for attempt in range(10):
        await _race_takeover(zombie, successor, f"race-{attempt}")


async def _blocked_backend(conn: psycopg.AsyncConnection[Any], schema: str) -> int:
    """The pid of the server process whose statement waits on `schema`'s runs table."""
    for _ in range(100):
        cur = await conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE %s",
            (f"%{schema}%resumable_runs%",),
        )
        row = await cur.fetchone()
        if row is not None:
            return int(row[0])
        await asyncio.sleep(0.05)
    raise AssertionError("the store's read never waited on the lock")


async def test_close_waits_for_a_cancelled_statement_to_end_on_the_server(
    new_store: Factory, base_url: str
) -> None:
    # A caller cancelled mid-statement stops waiting at once, and psycopg cancels
    # the statement on the server in a task of its own. Were that task still
    # going when the loop ends, asyncio.run would interrupt it again and psycopg
    # would print "query cancellation interrupted ...: closing connection" on the
    # user's terminal (seen at the end of examples/approval.py under load).
    store = await new_store().open()
    await store.create_run(run_record("r"))
    async with (
        await psycopg.AsyncConnection.connect(base_url) as locker,
        await psycopg.AsyncConnection.connect(base_url, autocommit=True) as watcher,
    ):
        table = sql.Identifier(store.schema, "resumable_runs")
        await locker.execute(
            sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(table)
        )
        reading = asyncio.ensure_future(store.get_run("r"))
        pid = await _blocked_backend(watcher, store.schema)
        os.kill(pid, signal.SIGSTOP)  # the server cannot act on the cancel meanwhile
        try:
            reading.cancel()
            with pytest.raises(asyncio.CancelledError):
                await reading
            closing = asyncio.ensure_future(store.close())
            await asyncio.sleep(0.5)
            assert not closing.done(), "close() returned with the cancel in flight"
        finally:
            os.kill(pid, signal.SIGCONT)
        await locker.rollback()
    await asyncio.wait_for(closing, timeout=10)
    current = asyncio.current_task()
    assert [t for t in asyncio.all_tasks() if t is not current and not t.done()] == []


def _count_commit_transactions(store: PostgresStore) -> list[int]:
    """The size of each step-commit transaction the store writes from now on."""
    sizes: list[int] = []
    store.add_commit_listener(sizes.append)
    return sizes


async def test_concurrent_commits_share_transactions_and_are_durable_on_return(
    new_store: Factory, base_url: str
) -> None:
    store = await new_store().open()
    fences = {}
    for i in range(20):
        await store.create_run(run_record(f"r{i}"))
        lease = await store.acquire_lease(f"r{i}", owner="w", now_ms=T0, ttl_ms=60_000)
        assert lease is not None
        fences[f"r{i}"] = lease.fence
    transactions = _count_commit_transactions(store)
    await asyncio.gather(
        *(
            store.commit_step(step_record(run_id, seq), fence=fence)
            for run_id, fence in fences.items()
            for seq in range(1, 11)
        )
    )
    used = len(transactions)
    assert used <= 20, f"200 concurrent commits took {used} transactions"
    assert sum(transactions) == 200
    async with await psycopg.AsyncConnection.connect(base_url) as conn:
        cur = await conn.execute(
            sql.SQL("SELECT count(*) FROM {}.resumable_steps").format(
                sql.Identifier(store.schema)
            )
        )
        assert await cur.fetchone() == (200,)


async def test_sequential_commits_take_one_transaction_each(new_store: Factory) -> None:
    store = await new_store().open()
    await store.create_run(run_record("r"))
    lease = await store.acquire_lease("r", owner="w", now_ms=T0, ttl_ms=60_000)
    assert lease is not None
    transactions = _count_commit_transactions(store)
    started = time.perf_counter()
    for seq in range(1, 51):
        await store.commit_step(step_record("r", seq), fence=lease.fence)
    assert transactions == [1] * 50
    assert time.perf_counter() - started < 5  # no timer in the way of a lone commit


async def test_a_batch_mixing_fences_refuses_only_the_stale_ones(
    new_store: Factory,
) -> None:
    store = await new_store().open()
    await store.create_run(run_record("mine"))
    await store.create_run(run_record("lost"))
    mine = await store.acquire_lease("mine", owner="w", now_ms=T0, ttl_ms=60_000)
    lost = await store.acquire_lease("lost", owner="w", now_ms=T0, ttl_ms=60_000)
    assert mine is not None
    assert lost is not None
    await store.cancel_run("lost", now_ms=T0)
    results = await asyncio.gather(
        *(
            store.commit_step(step_record("mine", s), fence=mine.fence)
            for s in range(1, 6)
        ),
        *(
            store.commit_step(step_record("lost", s), fence=lost.fence)
            for s in range(1, 6)
        ),
        return_exceptions=True,
    )
    assert results[:5] == [None] * 5
    assert all(isinstance(r, LeaseLost) for r in results[5:])
    assert len(await store.load_journal("mine")) == 5
    assert await store.load_journal("lost") == []


async def test_one_unstorable_record_does_not_fail_its_batch_mates(
    new_store: Factory,
) -> None:
    store = await new_store().open()
    await store.create_run(run_record("r"))
    lease = await store.acquire_lease("r", owner="w", now_ms=T0, ttl_ms=60_000)
    assert lease is not None
    too_many = step_record("r", 3, attempts=2**40)  # > INTEGER
    results = await asyncio.gather(
        store.commit_step(step_record("r", 1, name="s"), fence=lease.fence),
        store.commit_step(step_record("r", 2, name="nul\x00byte"), fence=lease.fence),
        store.commit_step(too_many, fence=lease.fence),
        store.commit_step(step_record("r", 4, name="lone \udc80"), fence=lease.fence),
        return_exceptions=True,
    )
    assert results[0] is None
    assert results[1] is None
    assert results[3] is None
    error = results[2]
    assert isinstance(error, CheckpointWriteError)
    assert (error.run_id, error.seq) == ("r", 3)
    assert isinstance(error.__cause__, psycopg.DataError)
    journal = await store.load_journal("r")
    assert [(s.seq, s.name) for s in journal] == [
        (1, "s"),
        (2, "nul\x00byte"),
        (4, "lone \udc80"),
    ]
    assert await store.get_run("nul\x00") is None


# --- snapshots -----------------------------------------------------------------------
async def test_a_snapshot_listing_more_chunks_than_are_stored_is_corrupt(
    new_store: Factory, base_url: str
) -> None:
    store = await new_store().open()
    await store.put_chunks({"a": b"A", "b": b"B"})
    await store.save_snapshot(
        SnapshotRecord(
            thread_id="t1",
            checkpoint_id="0001",
            parent_id=None,
            manifest=b"m",
            chunk_refs=("a", "b"),
            created_at_ms=T0,
        )
    )
    refs = sql.SQL("{}.resumable_snapshot_chunks").format(sql.Identifier(store.schema))
    async with await psycopg.AsyncConnection.connect(base_url, autocommit=True) as db:
        await db.execute(
            sql.SQL("INSERT INTO {} VALUES ('t1', '', '0001', 'c')").format(refs)
        )
    expected = "thread 't1' checkpoint '0001'.*3 chunks listed, more than the 2"
    with pytest.raises(CorruptCheckpointError, match=expected):
        await store.load_snapshot("t1")
    with pytest.raises(CorruptCheckpointError, match=expected):
        await store.list_snapshots("t1")
    await store.put_chunks({"c": b"C"})  # now it could list them all
    loaded = await store.load_snapshot("t1")
    assert loaded is not None
    assert loaded.chunk_refs == ("a", "b", "c")


# --- wake-ups ------------------------------------------------------------------------
async def test_wait_for_work_wakes_on_work_in_its_own_schema(
    new_store: Factory,
) -> None:
    worker = await new_store().open()
    other = await new_store().open()
    producer = await new_store(worker.schema).open()
    await worker.wait_for_work(0.01)  # starts listening

    waiting = asyncio.create_task(worker.wait_for_work(20))
    await asyncio.sleep(0.2)
    await other.create_run(run_record("elsewhere"))  # another schema: not for us
    await asyncio.sleep(0.2)
    assert not waiting.done()
    started = time.perf_counter()
    await producer.create_run(run_record("queued-here"))
    await asyncio.wait_for(waiting, 5)
    assert time.perf_counter() - started < 5

    await producer.create_run(run_record("between-waits"))  # kept for the next wait
    started = time.perf_counter()
    await worker.wait_for_work(20)
    assert time.perf_counter() - started < 5

    await producer.create_run(run_record("wait", status="waiting"))
    waiting = asyncio.create_task(worker.wait_for_work(20))
    await asyncio.sleep(0.1)
    await producer.send_input(
        InputRecord(run_id="wait", key="k", value=b"v", sent_at_ms=T0)
    )
    await asyncio.wait_for(waiting, 5)


async def test_wait_for_work_falls_back_to_sleeping() -> None:
    store = PostgresStore("postgresql://nobody@127.0.0.1:1/db?connect_timeout=1")
    started = time.perf_counter()
    await store.wait_for_work(0.3)
    assert 0.25 <= time.perf_counter() - started < 3
    await store.close()


# --- identifiers ------------------------------------------------------------------------
WEIRD = [
    "'; DROP TABLE resumable_runs; --",
    'Robert"); DROP SCHEMA public CASCADE; --',
    "%s %(x)s {schema} $1 ?",
    "back\\slash\\' quote",
    "跑步/セッション-🚀",
    "  padded  ",
    "",
]


async def test_odd_identifiers_are_stored_and_found_literally(
    new_store: Factory,
) -> None:
    store = await new_store(schema="we\"ird '; sch-ema 🚀").open()
    for i, name in enumerate(WEIRD):
        run = run_record(
            name, workflow=name, queue=name, parent_id=name, created_at_ms=T0 + i
        )
        assert await store.create_run(run) == run
        assert await store.get_run(name) == run
        assert [r.run_id for r in await store.list_runs(RunQuery(workflow=name))] == [
            name
        ]
        assert [r.run_id for r in await store.list_runs(RunQuery(queue=name))] == [name]
        leases = await store.claim_runs(
            owner=name,
            now_ms=T0,
            ttl_ms=60_000,
            limit=1,
            workflows=[name],
            queues={name: QueuePolicy(concurrency=1, rate=1)},
        )
        assert [lease.run_id for lease in leases] == [name]
        await store.commit_step(step_record(name, 1, name=name), fence=leases[0].fence)
        assert [s.name for s in await store.load_journal(name)] == [name]
        assert await store.send_input(
            InputRecord(run_id=name, key=name, value=b"v", sent_at_ms=T0)
        )
        assert await store.get_inputs(name) == {name: b"v"}
        await store.put_chunks({name: name.encode()})
        await store.save_snapshot(
            SnapshotRecord(
                thread_id=name,
                checkpoint_id=name,
                parent_id=name,
                manifest=b"m",
                chunk_refs=(name,),
                created_at_ms=T0,
                namespace=name,
                label=name,
            )
        )
        snapshot = await store.load_snapshot(name, namespace=name, checkpoint_id=name)
        assert snapshot is not None
        assert (snapshot.thread_id, snapshot.label, snapshot.chunk_refs) == (
            name,
            name,
            (name,),
        )
    assert len(await store.list_runs(RunQuery(limit=100))) == len(WEIRD)


# --- a server restart -----------------------------------------------------------------------
def _cluster() -> str | None:
    """The local cluster's version, if this test may restart it."""
    if shutil.which("pg_ctlcluster") is None or not Path("/etc/postgresql").is_dir():
        return None
    versions = sorted(p.name for p in Path("/etc/postgresql").iterdir())
    return versions[-1] if versions else None


def _pg_ctl(version: str, action: str) -> None:
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", action],
        check=True,
        capture_output=True,
        timeout=60,
    )


def _ensure_running(version: str, url: str) -> None:
    try:
        psycopg.connect(url, connect_timeout=2).close()
    except psycopg.OperationalError:
        _pg_ctl(version, "start")


class _CountingFailures:
    """Delegates to a store, counting the commits it failed (the engine retries them)."""

    def __init__(self, inner: PostgresStore) -> None:
        self._inner = inner
        self.failed_commits = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def commit_step(self, step: StepRecord, *, fence: int) -> None:
        try:
            await self._inner.commit_step(step, fence=fence)
        except (CheckpointWriteError, StoreError):
            self.failed_commits += 1
            raise


@pytest.mark.slow
@pytest.mark.restarts_server
@pytest.mark.timeout(120)
async def test_a_run_survives_a_server_restart_mid_run(
    new_store: Factory, base_url: str
) -> None:
    version = _cluster()
    is_local = "127.0.0.1" in base_url or "localhost" in base_url
    if version is None or not is_local:
        pytest.skip("needs a local cluster this test may restart (pg_ctlcluster)")
    store = await new_store().open()
    restarted: list[asyncio.Task[None]] = []
    calls: list[int] = []

    @step
    async def work(i: int) -> int:
        calls.append(i)
        if i == 20:  # restart while the next steps are being committed
            restarted.append(
                asyncio.create_task(asyncio.to_thread(_pg_ctl, version, "restart"))
            )
        await asyncio.sleep(0.01)
        return i

    @workflow
    async def steady(n: int) -> int:
        return sum([await work(i) for i in range(n)])

    counting = _CountingFailures(store)
    engine = Engine(counting, store_retry_s=60, lease_ttl_s=60)
    try:
        assert await engine.run(steady, 120, run_id="through-restart") == sum(
            range(120)
        )
        await restarted[0]
        assert counting.failed_commits > 0, "the restart should have broken some writes"
        assert calls == list(range(120))  # every step ran once: none was lost or rerun
        assert [s.seq for s in await store.load_journal("through-restart")] == list(
            range(1, 121)
        )
        assert (await engine.get("through-restart")).status == "succeeded"
    finally:
        for task in restarted:
            await asyncio.wait([task])
        await asyncio.to_thread(_ensure_running, version, base_url)
