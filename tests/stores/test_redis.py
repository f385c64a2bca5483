"""RedisStore beyond the contract: URLs, warnings, failures, odd ids, concurrency."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import random
import shutil
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from redis import Redis as SyncRedis
from redis.asyncio import Redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from resumable import Engine, step, workflow
from resumable.errors import (
    CheckpointWriteError,
    CorruptCheckpointError,
    LeaseLost,
    RunNotFound,
    SchemaVersionError,
    StoreError,
)
from resumable.stores import MemoryStore, create_store
from resumable.stores.protocol import (
    InputRecord,
    Lease,
    QueuePolicy,
    RunQuery,
    RunStatus,
    RunUpdate,
    SnapshotRecord,
    StepRecord,
)
from resumable.stores.redis import RedisStore, parse_url
from resumable.stores.redis.snapshots import snapshot_packed
from resumable.testing import T0, run_record, step_record

pytestmark = pytest.mark.redis

# the command CI starts its Redis with; a restart test must bring it back exactly so
REDIS_START = [
    "redis-server",
    "--daemonize",
    "yes",
    "--bind",
    "127.0.0.1",
    "-::1",
    "--port",
    "6379",
    "--save",
    "",
    "--appendonly",
    "no",
    "--dir",
    "/var/lib/redis",
    "--logfile",
    "/var/log/redis/ci.log",
]
UPDATE_STATUSES: list[RunStatus] = [
    "running",
    "succeeded",
    "failed",
    "sleeping",
    "waiting",
    "queued",
]
WEIRD_IDS = [
    "",
    "it's",
    'say "hi"',
    "'; DROP TABLE resumable_runs; --",
    "]]..redis.call('FLUSHALL')..[[",
    "') return redis.call('FLUSHDB') --",
    "*",
    "run:*",
    "?x[a-z]\\",
    "{other}tag",
    "}",
    "a\x00b\x00",
    "\ud800",
    "lone \udfff tail",
    "日本語 🚀 é",
    "line\nbreak\ttab",
]


def _url(base: str, prefix: str) -> str:
    separator = "&" if "?" in base else "?"
    return f"{base}{separator}prefix={prefix}"


def _base_url() -> str:
    """The test server (as tests/conftest.py's service_url: skip, or fail in CI)."""
    url = os.environ.get("RESUMABLE_TEST_REDIS_URL")
    if not url:
        reason = "RESUMABLE_TEST_REDIS_URL is not set: no redis server to test against"
        if os.environ.get("RESUMABLE_REQUIRE_SERVICES") == "1":
            pytest.fail(f"{reason} (RESUMABLE_REQUIRE_SERVICES=1)")
        pytest.skip(reason)
    return url


async def _config(admin: Redis, name: str) -> str:
    value: object = next(iter((await admin.config_get(name)).values()), "")
    return value.decode() if isinstance(value, bytes) else str(value)


def _fresh_prefix() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def store() -> AsyncIterator[RedisStore]:
    store = RedisStore(_url(_base_url(), _fresh_prefix()))
    try:
        yield store
    finally:
        with contextlib.suppress(StoreError):
            await store.drop()
        await store.close()


@pytest.fixture
async def admin() -> AsyncIterator[Redis]:
    """A plain client on the test server, for what the store must not do itself."""
    client = Redis.from_url(_base_url())
    try:
        yield client
    finally:
        await client.aclose()


# --- URL and opening ---------------------------------------------------------------
def test_the_store_package_named_redis_never_shadows_the_redis_driver() -> None:
    import redis
    import redis.asyncio

    from resumable.stores.redis import connection, runs, snapshots, store

    assert redis.__name__ == "redis"
    assert "resumable" not in Path(redis.__file__).parts
    # each module that names the driver gets redis-py's client, not a module of ours
    for module in (connection, runs, snapshots, store):
        assert module.Redis is redis.asyncio.Redis, module.__name__
    assert issubclass(connection.WaitingPool, redis.asyncio.ConnectionPool)


def test_url_keeps_redis_options_strips_the_prefix_and_hides_the_password() -> None:
    store = RedisStore(
        "redis://user:s3cret@db.example:6380/2?prefix=app:&socket_timeout=5"
    )
    assert (
        store.url == "redis://user:***@db.example:6380/2?prefix=app:&socket_timeout=5"
    )
    assert store.prefix == "app:"
    assert parse_url("redis://h/0?socket_timeout=5&prefix=p") == (
        "redis://h/0?socket_timeout=5",
        "p",
    )
    assert parse_url("redis://h/0")[1] == "resumable:"
    assert isinstance(create_store("redis://h/0"), RedisStore)


@pytest.mark.parametrize("prefix", ["", "a{b", "x}"])
def test_prefix_that_would_break_the_hash_tag_is_refused(prefix: str) -> None:
    with pytest.raises(StoreError, match="prefix"):
        RedisStore(f"redis://127.0.0.1/0?prefix={prefix}")


async def test_open_is_idempotent_and_refuses_a_newer_schema(
    store: RedisStore, admin: Redis
) -> None:
    assert await store.open() is store
    assert await store.open() is store
    await admin.hset(b"{" + store.prefix.encode() + b"}meta", "schema_version", 99)
    newer = RedisStore(_url(_base_url(), store.prefix))
    with pytest.raises(SchemaVersionError):
        await newer.open()
    await newer.close()


async def test_a_database_the_server_does_not_have_is_a_configuration_error() -> None:
    parts = urlsplit(_base_url())
    missing = parts._replace(path="/99").geturl()

    @step
    async def one() -> int:
        return 1

    @workflow
    async def flow() -> int:
        return await one()

    async with Engine(missing, store_retry_s=30) as engine:
        started = time.monotonic()
        with pytest.raises(StoreError, match="no database 99") as caught:
            await engine.run(flow, run_id="r")
        assert time.monotonic() - started < 10  # not retried as an outage
        assert "once the store is back" not in str(caught.value)
        with pytest.raises(StoreError, match="fix the database number"):
            await engine.runs()


@pytest.mark.parametrize(
    ("member", "score"),
    [(b"thread-\xff\xfe", 1_700_000_000_000.0), (b"thread-1", 1e300)],
)
async def test_a_damaged_thread_index_entry_is_a_corrupt_checkpoint_error_naming_it(
    store: RedisStore, admin: Redis, member: bytes, score: float
) -> None:
    await admin.zadd(b"{" + store.prefix.encode() + b"}threads", {member: score})
    async with Engine(store) as engine:
        with pytest.raises(CorruptCheckpointError, match="thread") as caught:
            await engine.threads()
    assert "restore its snapshot rows" in str(caught.value)


async def test_a_non_numeric_run_count_is_a_corrupt_checkpoint_error(
    store: RedisStore, admin: Redis
) -> None:
    await store.create_run(run_record("r1"))
    counts = b"{" + store.prefix.encode() + b"}counts"
    field = next(iter(await admin.hkeys(counts)))
    await admin.hset(counts, field, b"many")
    with pytest.raises(CorruptCheckpointError, match="not a count of runs"):
        await store.count_runs(RunQuery())


async def test_storing_runs_warns_once_when_the_server_does_not_persist(
    admin: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    if (await _config(admin, "appendonly"), await _config(admin, "save")) != ("no", ""):
        pytest.skip("the test server persists; nothing to warn about")
    url = _url(_base_url(), _fresh_prefix())
    store, again = RedisStore(url), RedisStore(url)
    with caplog.at_level(logging.WARNING, logger="resumable"):
        await store.open()
        await store.list_runs(RunQuery())  # reading: nothing to warn about
        assert not caplog.records
        await store.create_run(run_record("r1"))
        await store.create_run(run_record("r2"))
        await again.create_run(run_record("r3"))  # another engine, same process
    await store.drop()
    await store.close()
    await again.close()
    warnings = [
        r
        for r in caplog.records
        if r.name == "resumable" and r.levelno == logging.WARNING
    ]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert "restart loses every run" in message
    assert "appendonly yes" in message


async def test_no_config_access_logs_at_debug_and_carries_on(
    admin: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    user, password = f"u{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    # a managed-Redis lookalike: everything allowed but CONFIG
    await admin.acl_setuser(
        user,
        enabled=True,
        passwords=[f"+{password}"],
        keys=["*"],
        channels=["*"],
        commands=["+@all", "-config"],
    )
    parts = urlsplit(_base_url())
    url = parts._replace(
        netloc=f"{user}:{password}@{parts.hostname}:{parts.port or 6379}"
    ).geturl()
    store = RedisStore(_url(url, _fresh_prefix()))
    try:
        with caplog.at_level(logging.DEBUG, logger="resumable"):
            await store.create_run(run_record("r"))
        assert (await store.get_run("r")) == run_record("r")
        records = [r for r in caplog.records if r.name == "resumable"]
        assert [r.levelno for r in records] == [logging.DEBUG]
        assert "persistence not checked" in records[0].getMessage()
        assert password not in records[0].getMessage()
        await store.drop()
    finally:
        await store.close()
        await admin.acl_deluser(user)


# --- failures ----------------------------------------------------------------------
async def test_an_unreachable_server_raises_our_errors_not_redis_errors() -> None:
    store = RedisStore("redis://127.0.0.1:1/0?prefix=nowhere&socket_connect_timeout=1")
    try:
        with pytest.raises(StoreError) as caught:
            await store.get_run("r")
        assert caught.value.store == store.url
        with pytest.raises(CheckpointWriteError) as write:
            await store.commit_step(step_record("r", 3), fence=1)
        assert (write.value.run_id, write.value.seq) == ("r", 3)
        started = time.monotonic()
        await store.wait_for_work(0.2)  # a failing wait just sleeps
        assert time.monotonic() - started >= 0.15
    finally:
        await store.close()
        await store.close()  # idempotent


async def test_unknown_url_option_is_a_store_error() -> None:
    store = RedisStore("redis://127.0.0.1:6379/0?prefix=p&no_such_option=1")
    try:
        with pytest.raises(StoreError, match="no_such_option"):
            await store.get_run("r")
    finally:
        await store.close()


async def test_store_survives_its_connections_being_killed(
    store: RedisStore, admin: Redis
) -> None:
    await store.create_run(run_record("r"))
    lease = await store.acquire_lease("r", owner="a", now_ms=T0, ttl_ms=60_000)
    assert lease is not None
    await store.commit_step(step_record("r", 1), fence=lease.fence)
    killed = await admin.client_kill_filter(_type="normal", skipme=True)
    assert killed >= 1
    await store.commit_step(step_record("r", 2), fence=lease.fence)
    await store.renew_lease("r", fence=lease.fence, now_ms=T0, ttl_ms=60_000)
    assert [s.seq for s in await store.load_journal("r")] == [1, 2]


async def test_engine_run_continues_after_a_connection_kill_mid_run(
    store: RedisStore, admin: Redis
) -> None:
    calls: list[str] = []

    @step
    async def before() -> str:
        calls.append("before")
        return "b"

    @step
    async def kill() -> str:
        calls.append("kill")
        await admin.client_kill_filter(_type="normal", skipme=True)
        return "k"

    @step
    async def after() -> str:
        calls.append("after")
        return "a"

    @workflow
    async def wf() -> str:
        return await before() + await kill() + await after()

    assert await Engine(store, store_retry_s=10).run(wf, run_id="killed") == "bka"
    assert calls == ["before", "kill", "after"]
    assert [s.seq for s in await store.load_journal("killed")] == [1, 2, 3]


def _local_server_or_skip() -> tuple[str, int]:
    parts = urlsplit(_base_url())
    host, port = parts.hostname or "", parts.port or 6379
    if host not in ("127.0.0.1", "localhost") or port != 6379:
        pytest.skip("restart tests need the local CI server at 127.0.0.1:6379")
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    return host, port


def _admin_sync() -> SyncRedis:
    # no retries: a down server must answer "down" at once, not after ~3 s of backoff
    return SyncRedis(
        host="127.0.0.1",
        port=6379,
        socket_connect_timeout=0.5,
        retry=Retry(NoBackoff(), 0),
    )


def _ping() -> bool:
    client = _admin_sync()
    try:
        return bool(client.ping())
    except OSError:
        return False
    except Exception:  # noqa: BLE001 - redis-py's ConnectionError and friends
        return False
    finally:
        client.close()


def _wait_for(up: bool, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while _ping() != up:
        if time.monotonic() > deadline:
            raise AssertionError(f"redis did not go {'up' if up else 'down'}")
        time.sleep(0.05)


def _start_server() -> None:
    subprocess.run(REDIS_START, check=True, capture_output=True)
    _wait_for(up=True)


def _shutdown_server() -> None:
    client = _admin_sync()
    with contextlib.suppress(Exception):
        client.shutdown(nosave=True)
    client.close()
    _wait_for(up=False)


class FailedCommits:
    """Delegates to a real store, noting each commit_step that failed."""

    def __init__(self, inner: RedisStore) -> None:
        self._inner = inner
        self.failures: list[CheckpointWriteError] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def commit_step(self, step: StepRecord, *, fence: int) -> None:
        try:
            await self._inner.commit_step(step, fence=fence)
        except CheckpointWriteError as exc:
            self.failures.append(exc)
            raise


@pytest.fixture
def restartable() -> Iterator[None]:
    """Allows a test to stop the server; it is running again afterwards, whatever happens."""
    _local_server_or_skip()
    try:
        yield
    finally:
        if not _ping():
            _start_server()


@pytest.mark.restarts_server
@pytest.mark.usefixtures("restartable")
async def test_restart_without_persistence_loses_runs_yet_the_store_reconnects(
    store: RedisStore,
) -> None:
    await store.create_run(run_record("before"))
    await asyncio.to_thread(_shutdown_server)
    with pytest.raises(StoreError):
        await store.get_run("before")
    with pytest.raises(CheckpointWriteError) as caught:
        await store.create_run(run_record("during"))
    assert caught.value.run_id == "during"
    await asyncio.to_thread(_start_server)
    # no persistence: the run is gone (what the warning at open is about) ...
    assert await store.get_run("before") is None
    # ... but the same store object reconnects and reloads its scripts
    await store.create_run(run_record("after"))
    lease = await store.acquire_lease("after", owner="a", now_ms=T0, ttl_ms=1000)
    assert lease is not None
    await store.commit_step(step_record("after", 1), fence=lease.fence)
    assert len(await store.load_journal("after")) == 1


@pytest.mark.restarts_server
@pytest.mark.usefixtures("restartable")
async def test_engine_retries_through_a_restart_of_a_persisting_server(
    store: RedisStore, admin: Redis
) -> None:
    dump = Path(await _config(admin, "dir")) / await _config(admin, "dbfilename")
    if dump.exists():
        pytest.skip(f"{dump} exists; not overwriting it")
    calls: list[str] = []
    restarted: list[asyncio.Task[None]] = []

    async def restart_soon() -> None:
        # longer than redis-py's own reconnect retries (~0.35 s of backoff), so the
        # next commit fails at the store and the engine's retry is what recovers it
        await asyncio.sleep(2.0)
        await asyncio.to_thread(_start_server)

    @step
    async def first() -> str:
        calls.append("first")
        return "1"

    @step
    async def outage() -> str:
        calls.append("outage")
        # persistence stand-in: snapshot to disk, then die without saving again
        await admin.save()
        await asyncio.to_thread(_shutdown_server)
        restarted.append(asyncio.create_task(restart_soon()))
        return "2"  # committed only once the server is back

    @step
    async def last() -> str:
        calls.append("last")
        return "3"

    @workflow
    async def wf() -> str:
        return await first() + await outage() + await last()

    observed = FailedCommits(store)
    try:
        engine = Engine(observed, store_retry_s=30, lease_ttl_s=60)
        assert await engine.run(wf, run_id="restart") == "123"
        await restarted[0]
    finally:
        dump.unlink(missing_ok=True)
    assert calls == ["first", "outage", "last"]
    assert observed.failures  # step 2's commit failed while the server was down ...
    assert {exc.seq for exc in observed.failures} == {2}
    # ... and the engine's retry committed it once the server was back
    assert [s.seq for s in await store.load_journal("restart")] == [1, 2, 3]
    assert (await engine.get("restart")).status == "succeeded"


# --- identifiers ---------------------------------------------------------------------
async def test_weird_identifiers_are_stored_and_found_literally(
    store: RedisStore, admin: Redis
) -> None:
    sentinel = f"sentinel-{uuid.uuid4().hex}"
    await admin.set(sentinel, b"still here")
    try:
        for i, weird in enumerate(WEIRD_IDS):
            run = run_record(
                weird,
                workflow=weird,
                queue=weird,
                parent_id=weird,
                forked_from=weird,
                created_at_ms=T0 + i,
                input=weird.encode("utf-8", "surrogatepass"),
            )
            assert await store.create_run(run) == run
            assert await store.get_run(weird) == run
            for query in (
                RunQuery(workflow=weird),
                RunQuery(parent_id=weird),
                RunQuery(forked_from=weird),
                RunQuery(queue=weird),
                RunQuery(workflow=weird, status=["queued"]),
            ):
                assert [r.run_id for r in await store.list_runs(query)] == [weird]
            leases = await store.claim_runs(
                owner=weird,
                now_ms=T0,
                ttl_ms=60_000,
                limit=5,
                workflows=[weird],
                queues={weird: QueuePolicy(concurrency=1, rate=1)},
            )
            assert [(lease.run_id, lease.owner) for lease in leases] == [(weird, weird)]
            journaled = step_record(
                weird,
                1,
                name=weird,
                output=b"\x00" + weird.encode("utf-8", "surrogatepass"),
            )
            await store.commit_step(journaled, fence=leases[0].fence)
            assert await store.load_journal(weird) == [journaled]
            assert await store.send_input(
                InputRecord(run_id=weird, key=weird, value=b"v\x00", sent_at_ms=T0)
            )
            assert await store.get_inputs(weird) == {weird: b"v\x00"}
            assert (await store.cancel_run(weird, now_ms=T0)).status == "cancelled"

            await store.put_chunks(
                {weird: b"chunk " + weird.encode("utf-8", "surrogatepass")}
            )
            snapshot = SnapshotRecord(
                thread_id=weird,
                checkpoint_id=weird,
                parent_id=weird,
                manifest=b"m",
                chunk_refs=(weird,),
                created_at_ms=T0,
                namespace=weird,
                label=weird,
                metadata=b"\xff",
            )
            await store.save_snapshot(snapshot)
            assert await store.load_snapshot(weird, namespace=weird) == snapshot
            assert (
                await store.load_snapshot(weird, namespace=weird, checkpoint_id=weird)
                == snapshot
            )
            assert await store.list_snapshots(weird, namespace=None) == [snapshot]
            assert await store.get_chunks([weird]) == {
                weird: b"chunk " + weird.encode("utf-8", "surrogatepass")
            }
        # every id found only itself: nothing was read as a pattern or as code
        assert len(await store.list_runs(RunQuery(limit=1000))) == len(WEIRD_IDS)
        for weird in WEIRD_IDS:
            assert await store.delete_thread(weird) == 1
        assert await store.delete_unreferenced_chunks(1000) == len(WEIRD_IDS)
        deleted = await store.delete_runs(WEIRD_IDS)
        assert (deleted.runs, deleted.steps, deleted.inputs) == (len(WEIRD_IDS),) * 3
        assert await admin.get(sentinel) == b"still here"
    finally:
        await admin.delete(sentinel)


async def test_drop_deletes_only_its_own_prefix_even_with_glob_characters() -> None:
    base = _base_url()
    tag = _fresh_prefix()
    globbing = RedisStore(_url(base, f"{tag}*"))
    bystander = RedisStore(_url(base, f"{tag}x"))
    try:
        await globbing.create_run(run_record("a"))
        await bystander.create_run(run_record("b"))
        await globbing.drop()
        assert await globbing.get_run("a") is None
        assert await bystander.get_run("b") is not None
    finally:
        await bystander.drop()
        await globbing.close()
        await bystander.close()


# --- indexes against the reference store ---------------------------------------------
async def test_list_runs_agrees_with_the_memory_store(store: RedisStore) -> None:
    rng = random.Random(7)  # noqa: S311 - a seeded, reproducible sequence
    memory = MemoryStore()
    statuses: list[RunStatus] = ["queued", "running", "failed", "succeeded", "waiting"]
    for i in range(260):
        run = run_record(
            f"r{i:03d}",
            created_at_ms=T0 + rng.randrange(40),  # many ties: ordered by run_id
            updated_at_ms=T0 + rng.randrange(100),
            status=rng.choice(statuses),
            workflow=rng.choice(["w1", "w2"]),
            parent_id=rng.choice([None, "p"]),
            queue=rng.choice([None, "q1", "q2"]),
        )
        await store.create_run(run)
        await memory.create_run(run)
    queries = [
        RunQuery(),
        RunQuery(limit=7),
        RunQuery(limit=1000),
        RunQuery(status=["failed"]),
        RunQuery(status=["queued", "waiting", "succeeded"], limit=150),
        RunQuery(status=["queued", "nonsense"]),
        RunQuery(workflow="w2", status=["running", "failed"], limit=30),
        RunQuery(parent_id="p", queue="q1"),
        RunQuery(queue="q2", updated_before_ms=T0 + 50, limit=500),
        RunQuery(updated_before_ms=T0 + 10, limit=1000),
        RunQuery(workflow="absent"),
        RunQuery(limit=0),
    ]
    for query in queries:
        expected = await memory.list_runs(query)
        assert await store.list_runs(query) == expected, query


async def test_run_state_machine_agrees_with_the_memory_store(  # noqa: PLR0912 - a branch per operation
    store: RedisStore,
) -> None:
    """Random operations on both stores: same answers, same runs, same claims."""
    rng = random.Random(11)  # noqa: S311 - a seeded, reproducible sequence
    memory = MemoryStore()
    policies = {
        "a": QueuePolicy(concurrency=2),
        "b": QueuePolicy(rate=3, period_ms=500),
    }
    now = T0
    ids: list[str] = []
    fences: dict[str, int] = {}

    async def both(name: str, *args: Any, **kwargs: Any) -> Any:
        outcomes = []
        for target in (memory, store):
            try:
                outcomes.append(await getattr(target, name)(*args, **kwargs))
            except (LeaseLost, RunNotFound) as exc:
                outcomes.append(type(exc).__name__)
        assert outcomes[0] == outcomes[1], (name, args, kwargs)
        return outcomes[0]

    for op in range(400):
        now += rng.choice([0, 0, 10, 100, 400])
        roll = rng.random()
        if roll < 0.2 or not ids:
            run_id = f"r{op}"
            ids.append(run_id)
            status = rng.choice(["queued", "queued", "sleeping", "waiting"])
            await both(
                "create_run",
                run_record(
                    run_id,
                    created_at_ms=now,
                    updated_at_ms=now,
                    status=status,
                    workflow=rng.choice(["w1", "w2"]),
                    queue=rng.choice([None, "a", "b"]),
                    wake_at_ms=None
                    if status == "queued"
                    else now + rng.choice([0, 200, 2000]),
                ),
            )
        elif roll < 0.4:
            leases = await both(
                "claim_runs",
                owner=rng.choice(["x", "y"]),
                now_ms=now,
                ttl_ms=rng.choice([50, 1000]),
                limit=rng.choice([1, 3, 10]),
                workflows=rng.choice([["w1"], ["w1", "w2"]]),
                queues=policies,
            )
            fences.update((lease.run_id, lease.fence) for lease in leases)
        elif roll < 0.5:
            run_id = rng.choice(ids)
            lease = await both(
                "acquire_lease",
                run_id,
                owner=rng.choice(["x", "y"]),
                now_ms=now,
                ttl_ms=300,
                take_over=rng.choice([None, "x"]),
            )
            if isinstance(lease, Lease):
                fences[run_id] = lease.fence
        elif roll < 0.7 and fences:
            run_id = rng.choice(sorted(fences))
            new_status: RunStatus = rng.choice(UPDATE_STATUSES)
            await both(
                "update_run",
                run_id,
                fence=fences[run_id] - rng.choice([0, 0, 0, 1]),
                update=RunUpdate(
                    status=new_status,
                    now_ms=now,
                    output=rng.choice([None, b"out"]),
                    wake_at_ms=rng.choice([None, now + 100]),
                ),
            )
        elif roll < 0.78 and fences:
            run_id = rng.choice(sorted(fences))
            await both(
                "renew_lease", run_id, fence=fences[run_id], now_ms=now, ttl_ms=500
            )
        elif roll < 0.84:
            await both("cancel_run", rng.choice([*ids, "missing"]), now_ms=now)
        elif roll < 0.9:
            await both("reopen_run", rng.choice([*ids, "missing"]), now_ms=now)
        elif roll < 0.96:
            run_id = rng.choice(ids)
            await both(
                "send_input",
                InputRecord(
                    run_id=run_id,
                    key=rng.choice(["k1", "k2"]),
                    value=b"v",
                    sent_at_ms=now,
                ),
            )
        else:
            await both("delete_runs", rng.sample(ids, k=min(3, len(ids))))
        if op % 50 == 49:
            for run_id in ids:
                assert await store.get_run(run_id) == await memory.get_run(run_id)
    for run_id in ids:
        assert await store.get_run(run_id) == await memory.get_run(run_id)
        assert await store.get_inputs(run_id) == await memory.get_inputs(run_id)
    assert await store.list_runs(RunQuery(limit=1000)) == await memory.list_runs(
        RunQuery(limit=1000)
    )


# --- concurrency -----------------------------------------------------------------------
async def test_concurrent_claimers_never_claim_a_run_twice(store: RedisStore) -> None:
    for i in range(200):
        await store.create_run(run_record(f"r{i:03d}", created_at_ms=T0 + i))
    for i in range(30):
        await store.create_run(
            run_record(f"q{i:02d}", queue="narrow", created_at_ms=T0 + i)
        )
    claimers = [RedisStore(_url(_base_url(), store.prefix)) for _ in range(8)]
    policy = {"narrow": QueuePolicy(concurrency=3)}

    async def claim_all(claimer: RedisStore, owner: str) -> list[str]:
        got: list[str] = []
        while leases := await claimer.claim_runs(
            owner=owner,
            now_ms=T0,
            ttl_ms=60_000,
            limit=4,
            workflows=["wf"],
            queues=policy,
        ):
            got += [lease.run_id for lease in leases]
        return got

    try:
        results = await asyncio.gather(
            *(claim_all(claimer, f"w{i}") for i, claimer in enumerate(claimers))
        )
    finally:
        for claimer in claimers:
            await claimer.close()
    claimed = [run_id for got in results for run_id in got]
    assert len(claimed) == len(set(claimed))  # no run leased twice
    assert sorted(r for r in claimed if r.startswith("r")) == [
        f"r{i:03d}" for i in range(200)
    ]
    assert len([r for r in claimed if r.startswith("q")]) == 3  # the queue's cap held
    fences = {(await store.get_run(r)).fence for r in claimed}  # type: ignore[union-attr]
    assert fences == {1}


# --- snapshots and chunks ------------------------------------------------------------------
async def test_a_chunk_lives_while_any_snapshot_references_it(
    store: RedisStore,
) -> None:
    await store.put_chunks({"shared": b"S", "mine": b"M", "loose": b"L"})
    snap = SnapshotRecord(
        thread_id="t1",
        checkpoint_id="0001",
        parent_id=None,
        manifest=b"m",
        chunk_refs=("shared", "mine"),
        created_at_ms=T0,
    )
    await store.save_snapshot(snap)
    await store.save_snapshot(
        dataclasses.replace(snap, thread_id="t2", chunk_refs=("shared",))
    )
    assert await store.delete_unreferenced_chunks(10) == 1  # only "loose"
    # replacing a checkpoint moves its references
    await store.save_snapshot(dataclasses.replace(snap, chunk_refs=("shared",)))
    assert await store.delete_unreferenced_chunks(10) == 1  # "mine"
    assert await store.delete_thread("t1") == 1
    assert await store.delete_unreferenced_chunks(10) == 0  # t2 still uses "shared"
    assert await store.delete_thread("t2") == 1
    assert await store.delete_unreferenced_chunks(10) == 1
    assert await store.get_chunks(["shared", "mine", "loose"]) == {}


async def test_a_chunk_named_twice_is_listed_and_released_once(
    store: RedisStore,
) -> None:
    await store.put_chunks({"shared": b"S"})
    snap = SnapshotRecord(
        thread_id="t1",
        checkpoint_id="0001",
        parent_id=None,
        manifest=b"m",
        chunk_refs=("shared", "shared"),
        created_at_ms=T0,
    )
    await store.save_snapshot(snap)
    # one stored chunk bounds the refs a record may list: listed once, it loads
    loaded = await store.load_snapshot("t1")
    assert loaded is not None
    assert loaded.chunk_refs == ("shared",)
    listed = await store.list_snapshots("t1")
    assert [s.chunk_refs for s in listed] == [("shared",)]
    assert await store.delete_thread("t1") == 1
    assert await store.delete_unreferenced_chunks(10) == 1  # counted once, released


async def test_a_record_listing_more_chunks_than_are_stored_is_corrupt(
    store: RedisStore, admin: Redis
) -> None:
    await store.put_chunks({"a": b"A", "b": b"B"})
    snap = SnapshotRecord(
        thread_id="t1",
        checkpoint_id="0001",
        parent_id=None,
        manifest=b"m",
        chunk_refs=("a", "b"),
        created_at_ms=T0,
    )
    await store.save_snapshot(snap)
    records = b"{" + store.prefix.encode() + b"}cp:2:t1"  # thread t1, namespace ""
    damaged = dataclasses.replace(snap, chunk_refs=("a", "b", "c"))
    await admin.hset(records, b"0001", snapshot_packed(damaged))
    with pytest.raises(CorruptCheckpointError, match="thread 't1' checkpoint '0001'"):
        await store.load_snapshot("t1")
    with pytest.raises(
        CorruptCheckpointError, match="more than 2 chunks, which the store holds"
    ):
        await store.list_snapshots("t1")
    await store.put_chunks({"c": b"C"})  # now it could list them all
    loaded = await store.load_snapshot("t1")
    assert loaded is not None
    assert loaded.chunk_refs == ("a", "b", "c")


async def test_snapshot_history_merges_namespaces_and_pages(store: RedisStore) -> None:
    for i in range(30):
        for namespace in ("", "sub"):
            await store.save_snapshot(
                SnapshotRecord(
                    thread_id="t",
                    checkpoint_id=f"{i:04d}",
                    parent_id=None if i == 0 else f"{i - 1:04d}",
                    manifest=bytes([i]),
                    chunk_refs=(),
                    created_at_ms=T0 + i,
                    namespace=namespace,
                )
            )
    everything = await store.list_snapshots("t", namespace=None)
    assert [(s.checkpoint_id, s.namespace) for s in everything[:3]] == [
        ("0029", "sub"),
        ("0029", ""),
        ("0028", "sub"),
    ]
    assert len(everything) == 60
    page = await store.list_snapshots("t", namespace=None, before="0010", limit=3)
    assert [(s.checkpoint_id, s.namespace) for s in page] == [
        ("0009", "sub"),
        ("0009", ""),
        ("0008", "sub"),
    ]
    assert [
        s.checkpoint_id
        for s in await store.list_snapshots("t", namespace="sub", limit=2)
    ] == [
        "0029",
        "0028",
    ]


# --- wake-ups ----------------------------------------------------------------------------
async def test_wait_for_work_returns_early_when_a_run_is_queued(
    store: RedisStore,
) -> None:
    started = time.monotonic()
    await store.wait_for_work(0.1)  # nothing happens: waits it out (and subscribes)
    assert time.monotonic() - started >= 0.09
    other = RedisStore(_url(_base_url(), store.prefix))
    try:
        await other.create_run(run_record("queued"))
        started = time.monotonic()
        await store.wait_for_work(10)
        assert time.monotonic() - started < 2
        await other.create_run(run_record("waiting", status="waiting"))
        await store.wait_for_work(0.05)  # nothing new: a waiting run is not work
        await other.send_input(
            InputRecord(run_id="waiting", key="k", value=b"", sent_at_ms=T0)
        )
        started = time.monotonic()
        await store.wait_for_work(10)
        assert time.monotonic() - started < 2
    finally:
        await other.close()
