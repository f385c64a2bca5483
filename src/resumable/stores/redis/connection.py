"""RedisStore's connection: URL options, the pool, the key names, the scripts, errors.

`parse_url`, `parse_pool` and `parse_mode` read the URL (our options removed before
redis-py sees it); `WaitingPool` waits for a free connection instead of failing;
`Keys` names every key from the prefix, as `lib.lua` does from the same base.
`RedisClient` owns the redis-py client and the Lua scripts of `scripts/`
(registered once, run by EVALSHA), opens the store (schema version, persistence
check), turns driver errors into ours (`boundary`, `script`) and listens for work
(`wait_for_work`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import socket
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit

from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import (
    MaxConnectionsError,
    NoScriptError,
    RedisError,
    ResponseError,
)

from resumable.errors import (
    CheckpointWriteError,
    ResumableError,
    SchemaVersionError,
    StoreError,
)
from resumable.stores._records import schema_version_of
from resumable.stores.loopend import LoopEnd
from resumable.stores.redis.codec import as_bytes, escape_glob, to_bytes, to_str
from resumable.stores.urls import redact

if TYPE_CHECKING:
    from redis.asyncio.client import PubSub
    from redis.commands.core import AsyncScript

_log = logging.getLogger("resumable")

DEFAULT_PREFIX: Final = "resumable:"
_OWN_OPTIONS: Final = ("prefix", "pool_max", "pool_timeout_s", "mode")
MODES: Final = ("rwc", "rw", "ro")
POOL_MAX: Final = 100  # redis-py's own default
POOL_TIMEOUT_S: Final = 10.0  # as PostgreSQL's pool

# the store URLs whose server's persistence this process checked: a warning worth once, not
# on every engine or command (process-wide on purpose, as logging's own state is)
_PERSISTENCE_CHECKED: set[str] = set()
SCHEMA_VERSION: Final = 2  # 2: the threads zset
_LIB: Final = "lib.lua"
_SCRIPTS_WITH_LIB: Final = (
    "create_run",
    "acquire_lease",
    "renew_lease",
    "update_run",
    "cancel_run",
    "reopen_run",
    "claim_runs",
    "delete_runs",
    "send_input",
    "put_chunks",
    "save_snapshot",
    "swap_snapshots",
    "list_snapshots",
    "delete_thread",
    "delete_snapshots",
    "count_all_runs",
    "archive_snapshots",
    "restore_snapshots",
)
_READING_SCRIPTS: Final = frozenset({"list_snapshots", "load_snapshot"})
"""The scripts that write nothing: the only ones a store opened `mode=ro` runs."""
_PLAIN_SCRIPTS: Final = (
    "commit_step",
    "archive_journal",
    "restore_journal",
    "load_snapshot",
    "delete_unreferenced_chunks",
    "save_schedule",
    "set_schedule_paused",
    "mark_schedule_ticked",
    "append_feed",
)
# idle 10 s, then a probe every 5 s, dead after 3 unanswered (where the OS has them)
_KEEPALIVE: Final = {
    option: value
    for option, value in (
        (getattr(socket, "TCP_KEEPIDLE", None), 10),
        (getattr(socket, "TCP_KEEPINTVL", None), 5),
        (getattr(socket, "TCP_KEEPCNT", None), 3),
    )
    if option is not None
}


@functools.cache
def _script_sources() -> dict[str, str]:
    folder = resources.files("resumable.stores.redis.scripts")
    lib = (folder / _LIB).read_text("utf-8")
    sources = {
        name: lib + "\n" + (folder / f"{name}.lua").read_text("utf-8")
        for name in _SCRIPTS_WITH_LIB
    }
    sources.update(
        (name, (folder / f"{name}.lua").read_text("utf-8")) for name in _PLAIN_SCRIPTS
    )
    return sources


def parse_url(url: str) -> tuple[str, str]:
    """The URL redis-py should see (our options removed), and the key prefix."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise StoreError(store=redact(url), detail="not a redis:// URL")
    ours = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    prefixes = [v for k, v in ours if k == "prefix"]
    prefix = prefixes[-1] if prefixes else DEFAULT_PREFIX
    if not prefix or "{" in prefix or "}" in prefix:
        raise StoreError(
            store=redact(url),
            detail="prefix must be non-empty and free of '{' and '}' "
            "(it becomes the keys' cluster hash tag)",
        )
    rest = urlencode([(k, v) for k, v in ours if k not in _OWN_OPTIONS])
    return parts._replace(query=rest).geturl(), prefix


def parse_pool(url: str) -> tuple[int, float]:
    """The URL's `pool_max` and `pool_timeout_s` (as on PostgreSQL), or their defaults.

    The pool waits for a free connection rather than failing the call when all
    `pool_max` are busy (hundreds of runs in one engine): at most `pool_timeout_s`,
    and never past the engine's `store_retry_s` for a run's write.
    """
    query = dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
    try:
        pool_max = int(query.get("pool_max", str(POOL_MAX)))
        pool_timeout_s = float(query.get("pool_timeout_s", str(POOL_TIMEOUT_S)))
    except ValueError:
        raise StoreError(
            store=redact(url), detail="pool_max and pool_timeout_s must be numbers"
        ) from None
    if pool_max < 1 or not pool_timeout_s > 0:
        raise StoreError(
            store=redact(url), detail="pool_max and pool_timeout_s must be positive"
        )
    return pool_max, pool_timeout_s


def parse_mode(url: str) -> str:
    """The URL's `mode` (`rwc` by default), as SQLite's and PostgreSQL's.

    `rwc` creates the store (its schema version key) and migrates it; `rw` needs a
    store under the prefix already (and migrates it); `ro`, for the commands that
    only look, needs one at this version and writes nothing on opening.
    """
    query = dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
    mode = query.get("mode", "rwc").lower()
    if mode not in MODES:
        raise StoreError(store=redact(url), detail="mode must be 'rwc', 'rw' or 'ro'")
    return mode


class Keys:
    """Key names; the same scheme `lib.lua` builds from the base it is given."""

    def __init__(self, prefix: str) -> None:
        self.base = b"{" + to_bytes(prefix) + b"}"
        self.runs = self.base + b"runs"
        self.timers = self.base + b"timers"
        self.chunks = self.base + b"chunks"
        self.chunkrefs = self.base + b"chunkrefs"
        self.orphans = self.base + b"orphans"
        self.threads = self.base + b"threads"
        self.counts = self.base + b"counts"
        self.stubs = self.base + b"archived"
        self.meta = self.base + b"meta"
        self.channel = self.base + b"work"
        self.schedules = self.base + b"schedules"

    def of(self, kind: bytes, name: str) -> bytes:
        """The key of family `kind` (e.g. `b"wf:"`) for `name`."""
        return self.base + kind + to_bytes(name)

    def run(self, run_id: str) -> bytes:
        """The run's hash."""
        return self.of(b"run:", run_id)

    def steps(self, run_id: str) -> bytes:
        """The run's journal: seq -> packed step."""
        return self.of(b"steps:", run_id)

    def inputs(self, run_id: str) -> bytes:
        """The run's inputs: key -> packed (value, sent_at_ms)."""
        return self.of(b"inputs:", run_id)

    def schedule(self, name: str) -> bytes:
        """The schedule's hash: its definition, paused, last_tick_ms."""
        return self.of(b"schedule:", name)

    def stub(self, run_id: str) -> bytes:
        """The packed archive stub of an archived run's journal."""
        return self.of(b"archived:", run_id)

    def snapshots(self, thread_id: str, namespace: str) -> tuple[bytes, bytes]:
        """The (checkpoint ids, records) keys of one thread's namespace."""
        thread = to_bytes(thread_id)
        suffix = str(len(thread)).encode() + b":" + thread + to_bytes(namespace)
        return self.base + b"cps:" + suffix, self.base + b"cp:" + suffix


class WaitingPool(ConnectionPool):
    """redis-py's pool, except that a call waits for a connection when all are busy.

    redis-py's own pool raises MaxConnectionsError at once (hundreds of runs in one
    engine), and its BlockingConnectionPool takes a lock and a timer on every call,
    a fifth of a step's commit; this one costs nothing until the pool is full. The
    waiters are served in turn as connections come back, for up to `wait_s`.
    """

    def __init__(self, *, wait_s: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.wait_s = wait_s
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        """A free connection, waiting up to `wait_s` for one when all are busy."""
        deadline: float | None = None
        while True:
            try:
                return await super().get_connection(*args, **kwargs)  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
            except MaxConnectionsError:
                loop = asyncio.get_running_loop()
                deadline = deadline or loop.time() + self.wait_s
                if loop.time() >= deadline:
                    raise
                turn = loop.create_future()
                self._waiters.append(turn)
                try:
                    async with asyncio.timeout_at(deadline):
                        await turn
                except BaseException as exc:
                    if turn.done() and not turn.cancelled():
                        self._next_turn()  # given a turn as it gave up: pass it on
                    if isinstance(exc, TimeoutError):
                        raise MaxConnectionsError(
                            f"no free connection in {self.wait_s} s "
                            f"(pool_max={self.max_connections})"
                        ) from None
                    raise

    async def release(self, connection: Any) -> None:
        """Give the connection back, and the next waiter its turn."""
        await super().release(connection)
        if self._waiters:
            self._next_turn()

    def _next_turn(self) -> None:
        """Wake the longest waiter still waiting (a cancelled one is skipped)."""
        while self._waiters:
            turn = self._waiters.popleft()
            if not turn.done():
                turn.set_result(None)
                return


class RedisClient:
    """The connection of one RedisStore (see the module doc)."""

    def __init__(
        self, url: str, *, migrate_from_1: Callable[[Redis], Awaitable[None]]
    ) -> None:
        self.url = redact(url)
        self._redis_url, self.prefix = parse_url(url)
        self._pool_max, self._pool_timeout_s = parse_pool(url)
        self._mode = parse_mode(url)
        self.keys = Keys(self.prefix)
        self._migrate_from_1 = migrate_from_1
        self._redis: Redis | None = None
        self._scripts: dict[str, AsyncScript] = {}
        self._is_open = False
        self._pubsub: PubSub | None = None
        self._waiting = asyncio.Lock()
        self._loop_end = LoopEnd()  # the client is closed with the loop it runs on
        self.client()  # no I/O: surfaces a malformed URL here, not on first use

    async def open(self, *, run_id: str | None = None, seq: int | None = None) -> None:
        """Connect and check the schema version."""
        if self._loop_end.is_stale():  # its loop closed without shutting down
            self._redis, self._pubsub, self._is_open = None, None, False
        if self._is_open:
            return
        await self._loop_end.arm(self.close)
        client = self.client()
        # opened by a run's write, a failure to connect is that write's failure
        with self.boundary("open", run_id=run_id, seq=seq):
            try:
                if self._mode == "rwc":
                    await client.hsetnx(
                        self.keys.meta, "schema_version", SCHEMA_VERSION
                    )
                stored = await client.hget(self.keys.meta, "schema_version")
            except TypeError as exc:  # redis-py checks option names on first connect
                raise StoreError(
                    store=self.url, detail=f"bad URL option: {exc}"
                ) from exc
            except ResponseError as exc:
                wrong = _configuration_error(self.url, exc)
                if wrong is None:
                    raise
                raise wrong from exc
        found = self._checked_version(stored)
        self._is_open = True
        if found == 1:  # open already, as the migration reads through the store
            try:
                await self._migrate_from_1(client)
            except BaseException:
                self._is_open = False
                raise

    def check_writable(self, what: str) -> None:
        """Refuse a write (`what`) to a store opened `mode=ro`, before it is sent."""
        if self._mode == "ro":
            raise StoreError(
                store=self.url,
                detail=f"opened read-only (mode=ro), so it takes no writes ({what}); "
                "open it without mode=ro to change it",
            )

    def _checked_version(self, stored: object) -> int:
        """The stored schema version, if this version may open it in this mode."""
        if stored is None and self._mode != "rwc":
            raise StoreError(
                store=self.url,
                detail=f"no resumable store under prefix {self.prefix!r}; a writing "
                f"command (e.g. `resumable worker`) creates it",
            )
        found = schema_version_of(stored, store=self.url)
        if found > SCHEMA_VERSION:
            raise SchemaVersionError(
                store=self.url, found=found, supported=SCHEMA_VERSION
            )
        if found < SCHEMA_VERSION and self._mode == "ro":
            raise StoreError(
                store=self.url,
                detail=f"prefix {self.prefix!r} has schema version {found}, this "
                f"version reads {SCHEMA_VERSION}: it needs a migration, which a "
                f"read-only open does not make; open it once with a writing command "
                f"(e.g. `resumable gc --dry-run`) to migrate it",
            )
        return found

    def client(self) -> Redis:
        """The redis-py client (created on first use, no I/O)."""
        if self._redis is None:
            try:
                pool = WaitingPool.from_url(
                    self._redis_url,
                    max_connections=self._pool_max,
                    wait_s=self._pool_timeout_s,
                    # a dropped connection is reopened and the command sent again, so
                    # a server restart or a killed connection costs one call at most
                    retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), 3),
                    socket_connect_timeout=5.0,
                    # no per-command timeout: on Python 3.11 redis-py enforces it with
                    # asyncio.wait_for, a task per command (a large share of a step);
                    # a dead peer is found by TCP keepalive within ~25 s instead
                    socket_timeout=None,
                    socket_keepalive=True,
                    socket_keepalive_options=_KEEPALIVE,
                )
                self._redis = Redis.from_pool(pool)
            except ValueError as exc:
                raise StoreError(store=self.url, detail=f"bad URL: {exc}") from exc
            self._scripts = {
                name: self._redis.register_script(source)
                for name, source in _script_sources().items()
            }
        return self._redis

    async def warn_if_unpersisted(self) -> None:
        """Warn if the server does not persist: once per store URL in a process.

        Called where runs are written (created, claimed), so a command that only
        reads never warns, and a process opening many engines warns once.
        """
        if self.url in _PERSISTENCE_CHECKED:
            return
        _PERSISTENCE_CHECKED.add(self.url)
        await self._check_persistence(self.client())

    async def _check_persistence(self, client: Redis) -> None:
        try:
            appendonly = config_value(await client.config_get("appendonly"))
            save = config_value(await client.config_get("save"))
        except RedisError as exc:  # CONFIG is often disabled on managed Redis
            _log.debug(
                "%s: cannot read CONFIG (%s); persistence not checked", self.url, exc
            )
            return
        if appendonly == "no" and save == "":
            _log.warning(
                "%s: this Redis server does not persist its data (appendonly no, no "
                "save points): a Redis restart loses every run, journal and snapshot "
                "stored there. Set `appendonly yes` in redis.conf (or CONFIG SET "
                "appendonly yes) before relying on it for durable runs",
                self.url,
            )

    async def close(self) -> None:
        """Close the client and the wake-up subscription."""
        await self._loop_end.disarm()
        self._waiting = asyncio.Lock()  # a lock is bound to the loop that used it
        client, self._redis = self._redis, None
        pubsub, self._pubsub = self._pubsub, None
        self._is_open = False
        self._scripts = {}
        if pubsub is not None:
            with contextlib.suppress(RedisError, OSError):
                await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py leaves PubSub.aclose unannotated
        if client is not None:
            with contextlib.suppress(RedisError, OSError):
                await client.aclose()

    async def drop(self) -> None:
        """Delete every key under this store's prefix (tests, and tearing down)."""
        client = await self.ready()
        pattern = escape_glob(self.keys.base) + b"*"
        with self.boundary("drop"):
            batch: list[bytes] = []
            async for key in client.scan_iter(match=pattern, count=1000):
                batch.append(key)
                if len(batch) >= 1000:
                    await client.unlink(*batch)
                    batch = []
            if batch:
                await client.unlink(*batch)

    async def wait_for_work(self, timeout_s: float) -> None:
        """Return when a run may have become claimable, or after `timeout_s`.

        Listens on the `{prefix}work` channel, which the scripts publish to when a
        run is queued, woken, reopened or cancelled. Any failure just sleeps.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            async with asyncio.timeout(timeout_s + 0.5), self._waiting:
                pubsub = await self._subscribed()
                while (
                    await pubsub.get_message(
                        ignore_subscribe_messages=True,
                        timeout=max(deadline - loop.time(), 0.0),
                    )
                    is None
                ):
                    if loop.time() >= deadline:
                        return
                # several notices may be queued; one wake-up covers them all
                while await pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=0
                ):
                    pass
        except TimeoutError:
            return
        except (RedisError, OSError, ResumableError):
            await self._drop_pubsub()
            await asyncio.sleep(max(deadline - loop.time(), 0.0))

    async def _subscribed(self) -> PubSub:
        if self._pubsub is None:
            client = await self.ready()
            pubsub = client.pubsub()
            try:
                await pubsub.subscribe(self.keys.channel)
            except BaseException:
                await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py leaves PubSub.aclose unannotated
                raise
            self._pubsub = pubsub
        return self._pubsub

    async def _drop_pubsub(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            with contextlib.suppress(RedisError, OSError):
                await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py leaves PubSub.aclose unannotated

    async def ready(self) -> Redis:
        """The client, once the store is open."""
        await self.open()
        return self.client()

    @contextlib.contextmanager
    def boundary(
        self, what: str, *, run_id: str | None = None, seq: int | None = None
    ) -> Iterator[None]:
        """Turn driver errors into ours: a run's writes fail as CheckpointWriteError."""
        try:
            yield
        except (RedisError, OSError) as exc:
            raise self._driver_error(what, exc, run_id, seq) from exc

    def _driver_error(
        self, what: str, exc: BaseException, run_id: str | None, seq: int | None
    ) -> Exception:
        detail = f"redis {what}: {type(exc).__name__}: {exc}"
        if run_id is not None:
            return CheckpointWriteError(run_id=run_id, seq=seq, detail=detail)
        return StoreError(store=self.url, detail=detail)

    async def script(
        self,
        name: str,
        keys: Sequence[bytes],
        args: Sequence[bytes],
        *,
        run_id: str | None = None,
        seq: int | None = None,
    ) -> Any:
        """Run the Lua script `name` (opening the store first), our errors on failure."""
        if name not in _READING_SCRIPTS:
            self.check_writable(name.replace("_", " "))
        if not self._is_open:
            await self.open(run_id=run_id, seq=seq)
        script = self._scripts[name]
        # EVALSHA directly: this is every fenced write's path, and redis-py's Script
        # wrapper costs more per call than the script runs on the server
        try:
            try:
                return await self.client().evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:  # the server lost its script cache: load and run
                return await script(keys=list(keys), args=list(args))
        except (RedisError, OSError) as exc:
            raise self._driver_error(name.replace("_", " "), exc, run_id, seq) from exc


def _configuration_error(url: str, exc: ResponseError) -> StoreError | None:
    """A refusal to connect that no waiting will mend: the URL must change."""
    if "DB index is out of range" in str(exc):
        database = urlsplit(url).path.lstrip("/") or "0"
        return StoreError(
            store=url,
            detail=f"the server has no database {database} (it has 16, numbered "
            f"0 to 15, unless its `databases` setting says otherwise): fix the "
            f"database number at the end of the URL",
        )
    return None


def config_value(found: Mapping[Any, Any]) -> str | None:
    """The value of a one-setting CONFIG GET reply."""
    value = next(iter(found.values()), None)
    return None if value is None else to_str(as_bytes(value))
