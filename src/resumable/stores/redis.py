"""RedisStore: the Store protocol on Redis, each fenced or multi-key write one Lua script.

URL: `redis://[[user]:password@]host[:port][/db][?prefix=myapp:&<redis-py options>]`
(or `rediss://`, `unix://`). `prefix` (default `resumable:`) namespaces the keys; it
is removed before the URL reaches redis-py, which reads every other option.

Every key starts with the hash tag `{prefix}`, so a store's keys share one cluster
slot and a script may touch any of them. Below, `<x>` is an id encoded as UTF-8
(with lone surrogates kept), so any string is stored and found literally:

    run:<id>                  hash  the run's fields (a missing field is None)
    steps:<id>                hash  seq -> packed StepRecord
    inputs:<id>               hash  key -> packed (value, sent_at_ms)
    runs, wf:<name>, parent:<id>, forks:<id>, queue:<name>, st:<status>
                              zsets run ids by created_at_ms, for list_runs
    rdy:<workflow>            zset  claimable now, by created_at_ms
    timers                    zset  running runs by lease expiry, sleeping and
                                    waiting ones by wake_at_ms; due ones become claimable
    qactive:<queue>           zset  the queue's leased runs by lease expiry
    qstarts:<queue>           zset  the queue's starts in the rate window, by time
    chunks, chunkrefs         hashes  hash -> data, hash -> how many snapshots use it
    orphans                   set   chunks that no snapshot referenced (GC worklist)
    cps:<n>:<thread><ns>      zset  checkpoint ids (n = the thread id's byte length)
    cp:<n>:<thread><ns>       hash  checkpoint id -> packed SnapshotRecord
    nss:<thread>              set   the thread's namespaces
    threads                   zset  thread ids by their newest snapshot's
                                    created_at_ms, for list_threads (schema 2)
    counts                    hash  runs per status and queue, for count_runs
                                    (schema 2); field: status, a newline, then
                                    "-" (no queue) or "q" + the queue's name
    meta                      hash  schema_version

Lua scripts (`resumable.stores.redis_scripts`) keep the indexes in step with the
runs; the run hash is the truth and the scripts re-check it before acting. A claim
promotes at most 1000 due timers and, like the SQL stores, looks at the oldest
`claims.candidate_window(limit)` claimable runs per workflow.

A dropped connection (a killed client, a restarted server) is reopened and the
command sent again by redis-py (3 retries, jittered backoff from 50 ms); past that
the call fails with CheckpointWriteError or StoreError and the engine retries it.
Resending is harmless for fenced writes, which are idempotent. If a reply is lost
after the server ran the command, a resent `send_input` or `reopen_run` reports
False although the first attempt took effect, and a resent `claim_runs` may lease
runs nobody executes until their lease expires.

The server must persist (`appendonly yes`): opening the store logs a warning on the
"resumable" logger when it does not, since a restart would lose every run.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import socket
from collections import Counter
from collections.abc import AsyncGenerator, Collection, Iterator, Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any, Final, cast
from urllib.parse import parse_qsl, urlencode, urlsplit

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import NoScriptError, RedisError

from resumable.errors import (
    CheckpointWriteError,
    ChunksMissing,
    LeaseLost,
    ResumableError,
    RunNotFound,
    SchemaVersionError,
    StoreError,
)
from resumable.stores import _redis_payloads, _rules, claims, redact
from resumable.stores._records import converter, schema_version_of
from resumable.stores._redis_packing import escape_glob as _escape_glob
from resumable.stores._redis_packing import pack as _pack
from resumable.stores._redis_packing import to_bytes as _b
from resumable.stores._redis_packing import to_str as _s
from resumable.stores._redis_packing import unpack as _unpack
from resumable.stores.protocol import (
    NO_CHUNKS,
    RUN_STATUSES,
    ArchiveStub,
    DeleteResult,
    InputRecord,
    Lease,
    Payload,
    PayloadKind,
    QueuePolicy,
    RunQuery,
    RunRecord,
    RunStatus,
    RunUpdate,
    SnapshotRecord,
    StepRecord,
    StepStatus,
    ThreadRecord,
    check_pack,
)

if TYPE_CHECKING:
    from redis.asyncio.client import PubSub
    from redis.commands.core import AsyncScript

_log = logging.getLogger("resumable")

DEFAULT_PREFIX: Final = "resumable:"
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
    "replace_snapshots",
    "list_snapshots",
    "delete_thread",
    "count_all_runs",
)
_PLAIN_SCRIPTS: Final = (
    "commit_step",
    "archive_journal",
    "restore_journal",
    "load_snapshot",
    "delete_unreferenced_chunks",
)
_PAGE_MAX: Final = 500
_HMGET_SLICE: Final = 1000
_PUT_BATCH_BYTES: Final = 4 << 20
_RUN_BYTES_FIELDS: Final = ("input", "output")
_RUN_TEXT_FIELDS: Final = ("parent_id", "forked_from", "queue", "lease_owner")
_RUN_INT_FIELDS: Final = ("fork_seq", "wake_at_ms", "expires_at_ms")


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


def _num(value: int) -> bytes:
    return str(int(value)).encode()


def _text(item: bytes | None) -> str | None:
    return None if item is None else _s(item)


def _int(item: bytes | None) -> int:
    return int(item or b"0")


def _pairs(flat: Sequence[bytes]) -> dict[bytes, bytes]:
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


@functools.cache
def _script_sources() -> dict[str, str]:
    folder = resources.files("resumable.stores.redis_scripts")
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
    rest = urlencode([(k, v) for k, v in ours if k != "prefix"])
    return parts._replace(query=rest).geturl(), prefix


class _Keys:
    """Key names; the same scheme `lib.lua` builds from the base it is given."""

    def __init__(self, prefix: str) -> None:
        self.base = b"{" + _b(prefix) + b"}"
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

    def of(self, kind: bytes, name: str) -> bytes:
        return self.base + kind + _b(name)

    def run(self, run_id: str) -> bytes:
        return self.of(b"run:", run_id)

    def steps(self, run_id: str) -> bytes:
        return self.of(b"steps:", run_id)

    def inputs(self, run_id: str) -> bytes:
        return self.of(b"inputs:", run_id)

    def stub(self, run_id: str) -> bytes:
        return self.of(b"archived:", run_id)

    def snapshots(self, thread_id: str, namespace: str) -> tuple[bytes, bytes]:
        """The (checkpoint ids, records) keys of one thread's namespace."""
        thread = _b(thread_id)
        suffix = str(len(thread)).encode() + b":" + thread + _b(namespace)
        return self.base + b"cps:" + suffix, self.base + b"cp:" + suffix


class RedisStore:
    """The Store protocol on one Redis server, or a cluster (a store's keys share a slot)."""

    def __init__(
        self, url: str = f"redis://127.0.0.1:6379/0?prefix={DEFAULT_PREFIX}"
    ) -> None:
        self.url = redact(url)
        self._redis_url, self.prefix = parse_url(url)
        self._keys = _Keys(self.prefix)
        self._redis: Redis | None = None
        self._scripts: dict[str, AsyncScript] = {}
        self._is_open = False
        self._pubsub: PubSub | None = None
        self._waiting = asyncio.Lock()
        self._client()  # no I/O: surfaces a malformed URL here, not on first use

    # --- lifecycle --------------------------------------------------------------
    async def open(self) -> RedisStore:
        """Connect, check the schema version and warn if the server does not persist.

        Idempotent; every other method opens the store on first use.
        """
        await self._open()
        return self

    async def _open(self, *, run_id: str | None = None, seq: int | None = None) -> None:
        if self._is_open:
            return
        client = self._client()
        # opened by a run's write, a failure to connect is that write's failure
        with self._boundary("open", run_id=run_id, seq=seq):
            try:
                await client.hsetnx(self._keys.meta, "schema_version", SCHEMA_VERSION)
            except TypeError as exc:  # redis-py checks option names on first connect
                raise StoreError(
                    store=self.url, detail=f"bad URL option: {exc}"
                ) from exc
            found = schema_version_of(
                await client.hget(self._keys.meta, "schema_version"), store=self.url
            )
        if found > SCHEMA_VERSION:
            raise SchemaVersionError(
                store=self.url, found=found, supported=SCHEMA_VERSION
            )
        await self._check_persistence(client)
        self._is_open = True
        if found == 1:  # open already, as the migration reads through the store
            try:
                await self._index_threads(client)
            except BaseException:
                self._is_open = False
                raise

    async def _index_threads(self, client: Redis) -> None:
        """Migrate schema 1 to 2: build the threads zset and the run counts."""
        nss = self._keys.base + b"nss:"
        with self._boundary("migrate to schema 2"):
            async for key in client.scan_iter(match=_escape_glob(nss) + b"*"):
                thread_id = _s(_as_bytes(key)[len(nss) :])
                snapshots = await self.list_snapshots(thread_id, namespace=None)
                if snapshots:
                    newest = max(snap.created_at_ms for snap in snapshots)
                    await client.zadd(
                        self._keys.threads, {_b(thread_id): newest}, gt=True
                    )
        await self._script(
            "count_all_runs",
            [self._keys.meta],
            [self._keys.base, *(_b(status) for status in RUN_STATUSES)],
        )

    def _client(self) -> Redis:
        if self._redis is None:
            try:
                self._redis = Redis.from_url(
                    self._redis_url,
                    # a dropped connection is reopened and the command sent again, so
                    # a server restart or a killed connection costs one call at most
                    retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), 3),
                    socket_connect_timeout=5.0,
                    # no per-command timeout: on Python 3.11 redis-py enforces it with
                    # asyncio.wait_for, a task per command (~20 us, a fifth of a step);
                    # a dead peer is found by TCP keepalive within ~25 s instead
                    socket_timeout=None,
                    socket_keepalive=True,
                    socket_keepalive_options=_KEEPALIVE,
                )
            except ValueError as exc:
                raise StoreError(store=self.url, detail=f"bad URL: {exc}") from exc
            self._scripts = {
                name: self._redis.register_script(source)
                for name, source in _script_sources().items()
            }
        return self._redis

    async def _check_persistence(self, client: Redis) -> None:
        try:
            appendonly = _config_value(await client.config_get("appendonly"))
            save = _config_value(await client.config_get("save"))
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

    # --- maintenance ------------------------------------------------------------
    async def scan_payloads(
        self, kind: PayloadKind, *, after: tuple[str | int, ...] | None, limit: int
    ) -> list[Payload]:
        return await _redis_payloads.scan_payloads(self, kind, after=after, limit=limit)

    async def replace_payload(self, payload: Payload, *, data: bytes) -> bool:
        return await _redis_payloads.replace_payload(self, payload, data=data)

    async def close(self) -> None:
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
        client = await self._ready()
        pattern = _escape_glob(self._keys.base) + b"*"
        with self._boundary("drop"):
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
            client = await self._ready()
            pubsub = client.pubsub()
            try:
                await pubsub.subscribe(self._keys.channel)
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

    async def _ready(self) -> Redis:
        await self._open()
        return self._client()

    @contextlib.contextmanager
    def _boundary(
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

    async def _script(
        self,
        name: str,
        keys: Sequence[bytes],
        args: Sequence[bytes],
        *,
        run_id: str | None = None,
        seq: int | None = None,
    ) -> Any:
        if not self._is_open:
            await self._open(run_id=run_id, seq=seq)
        script = self._scripts[name]
        # EVALSHA directly: this is every fenced write's path, and redis-py's Script
        # wrapper costs more per call than the script runs on the server
        try:
            try:
                return await self._client().evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:  # the server lost its script cache: load and run
                return await script(keys=list(keys), args=list(args))
        except (RedisError, OSError) as exc:
            raise self._driver_error(name.replace("_", " "), exc, run_id, seq) from exc

    # --- runs -------------------------------------------------------------------
    async def create_run(self, run: RunRecord) -> RunRecord:
        fields: list[bytes] = []
        for name, value in _run_fields(run):
            fields += [name.encode(), value]
        result = await self._script(
            "create_run",
            [self._keys.run(run.run_id)],
            [self._keys.base, _b(run.run_id), *fields],
            run_id=run.run_id,
        )
        if isinstance(result, list):
            return _run_from_hash(run.run_id, _pairs(result))
        return run

    async def get_run(self, run_id: str) -> RunRecord | None:
        client = await self._ready()
        with self._boundary("get run"):
            found = await client.hgetall(self._keys.run(run_id))
        return _run_from_hash(run_id, _bytes_dict(found)) if found else None

    async def list_runs(self, query: RunQuery) -> list[RunRecord]:
        if query.limit <= 0:
            return []
        client = await self._ready()
        page = min(max(query.limit * 2, 32), _PAGE_MAX)
        found: list[RunRecord] = []
        seen: set[bytes] = set()
        batch: list[bytes] = []
        scan = self._newest_first(client, self._index_keys(query), page, query.after)
        # the narrowest index drives the scan; the other filters apply in Python
        with self._boundary("list runs"):
            async with contextlib.aclosing(scan):
                async for member in scan:
                    if member in seen:  # a run whose status changed mid-scan
                        continue
                    seen.add(member)
                    batch.append(member)
                    if len(batch) >= page:
                        found += await self._matching(client, batch, query)
                        batch = []
                        if len(found) >= query.limit:
                            break
            if batch and len(found) < query.limit:
                found += await self._matching(client, batch, query)
        found.sort(key=lambda run: (run.created_at_ms, run.run_id), reverse=True)
        return found[: query.limit]

    async def count_runs(self, query: RunQuery) -> dict[tuple[str, str | None], int]:
        if not _is_counted(query):
            return await self.count_runs_by_reading(query)
        client = await self._ready()
        with self._boundary("count runs"):
            found = _bytes_dict(await client.hgetall(self._keys.counts))
        counts: dict[tuple[str, str | None], int] = {}
        for field, value in found.items():
            status, _, queue = _s(field).partition("\n")
            key = (status, None if queue == "-" else queue[1:])
            n = int(value)
            wanted = not query.status or status in query.status
            if n > 0 and wanted and query.queue in (None, key[1]):
                counts[key] = n
        return counts

    async def count_runs_by_reading(
        self, query: RunQuery
    ) -> dict[tuple[str, str | None], int]:
        """`count_runs` by reading every run the query's narrowest index holds.

        The plain version of the counts the scripts keep (for the filters those
        cannot answer: workflow, parent, fork, version, prefix, time).
        """
        client = await self._ready()
        counts: Counter[tuple[str, str | None]] = Counter()
        batch: list[bytes] = []
        scan = self._newest_first(client, self._index_keys(query), _PAGE_MAX, None)
        # no count index: every run the narrowest index holds is read and matched
        with self._boundary("count runs"):
            async with contextlib.aclosing(scan):
                async for member in scan:
                    batch.append(member)
                    if len(batch) >= _PAGE_MAX:
                        counts.update(
                            (run.status, run.queue)
                            for run in await self._matching(client, batch, query)
                        )
                        batch = []
            counts.update(
                (run.status, run.queue)
                for run in await self._matching(client, batch, query)
            )
        return dict(counts)

    def _index_keys(self, query: RunQuery) -> list[bytes]:
        keys = self._keys
        for kind, value in (
            (b"parent:", query.parent_id),
            (b"forks:", query.forked_from),
            (b"queue:", query.queue),
            (b"wf:", query.workflow),
        ):
            if value is not None:
                return [keys.of(kind, value)]
        if query.status:
            return [keys.of(b"st:", status) for status in sorted(set(query.status))]
        return [keys.runs]

    async def _newest_first(
        self,
        client: Redis,
        keys: list[bytes],
        page: int,
        after: tuple[int, str] | None,
    ) -> AsyncGenerator[bytes, None]:
        """Members of a few zsets merged by (score, member), highest first.

        With `after`, only those listed after that (created_at_ms, run_id).
        """
        cursors = [_Cursor(key, after) for key in keys]
        for cursor in cursors:
            await cursor.fill(client, page)
        while True:
            live = [cursor for cursor in cursors if cursor.rows]
            if not live:
                return
            best = max(live, key=lambda cursor: cursor.rows[-1])
            yield best.rows.pop()[1]
            if not best.rows and not best.done:
                await best.fill(client, page)

    async def _matching(
        self, client: Redis, members: list[bytes], query: RunQuery
    ) -> list[RunRecord]:
        if query.run_id_prefix is not None:  # by id alone: no run read for the rest
            prefix = _b(query.run_id_prefix)
            members = [member for member in members if member.startswith(prefix)]
        if not members:
            return []
        async with client.pipeline(transaction=False) as pipe:
            for member in members:
                pipe.hgetall(self._keys.base + b"run:" + member)
            hashes = await pipe.execute()
        runs = (
            _run_from_hash(_s(member), _bytes_dict(found))
            for member, found in zip(members, hashes, strict=True)
            if found
        )
        return [run for run in runs if _rules.matches(run, query)]

    async def acquire_lease(
        self,
        run_id: str,
        *,
        owner: str,
        now_ms: int,
        ttl_ms: int,
        take_over: str | None = None,
    ) -> Lease | None:
        expires = now_ms + ttl_ms
        result = await self._script(
            "acquire_lease",
            [self._keys.run(run_id)],
            [
                self._keys.base,
                _b(run_id),
                _b(owner),
                _num(now_ms),
                _num(expires),
                b"1" if take_over is not None else b"0",
                _b(take_over or ""),
            ],
            run_id=run_id,
        )
        if result == -1:
            raise RunNotFound(run_id=run_id)
        if result == 0:
            return None
        fence, taken_from = result
        return Lease(
            run_id=run_id,
            owner=owner,
            fence=int(fence),
            expires_at_ms=expires,
            taken_from=None if taken_from is None else _s(taken_from),
        )

    async def renew_lease(
        self, run_id: str, *, fence: int, now_ms: int, ttl_ms: int
    ) -> None:
        renewed = await self._script(
            "renew_lease",
            [self._keys.run(run_id)],
            [self._keys.base, _b(run_id), _num(fence), _num(now_ms + ttl_ms)],
            run_id=run_id,
        )
        if not renewed:
            raise LeaseLost(run_id=run_id, fence=fence)

    async def update_run(self, run_id: str, *, fence: int, update: RunUpdate) -> None:
        updated = await self._script(
            "update_run",
            [self._keys.run(run_id)],
            [
                self._keys.base,
                _b(run_id),
                _num(fence),
                _b(update.status),
                _num(update.now_ms),
                b"0" if update.output is None else b"1",
                update.output or b"",
                b"" if update.wake_at_ms is None else _num(update.wake_at_ms),
                b"" if update.expires_at_ms is None else _num(update.expires_at_ms),
            ],
            run_id=run_id,
        )
        if not updated:
            raise LeaseLost(run_id=run_id, fence=fence)

    async def cancel_run(self, run_id: str, *, now_ms: int) -> RunRecord:
        flat = await self._script(
            "cancel_run",
            [self._keys.run(run_id)],
            [self._keys.base, _b(run_id), _num(now_ms)],
            run_id=run_id,
        )
        if not flat:
            raise RunNotFound(run_id=run_id)
        return _run_from_hash(run_id, _pairs(flat))

    async def reopen_run(self, run_id: str, *, now_ms: int) -> bool:
        result = await self._script(
            "reopen_run",
            [self._keys.run(run_id)],
            [self._keys.base, _b(run_id), _num(now_ms)],
            run_id=run_id,
        )
        if result == -1:
            raise RunNotFound(run_id=run_id)
        return bool(result)

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
        names = sorted(set(workflows))
        if limit <= 0 or not names:
            return []
        expires = now_ms + ttl_ms
        args = [
            self._keys.base,
            _b(owner),
            _num(now_ms),
            _num(expires),
            _num(limit),
            _num(
                claims.candidate_window(
                    limit, skips_versions_after_reading=versions is not None
                )
            ),
            _num(len(names)),
            *(_b(name) for name in names),
            _num(len(queues)),
        ]
        for queue, policy in queues.items():
            since_ms = claims.rate_window_start_ms(policy, now_ms)
            args += [
                _b(queue),
                b"" if policy.concurrency is None else _num(policy.concurrency),
                b"" if policy.rate is None else _num(policy.rate),
                b"" if since_ms is None else _num(since_ms),
            ]
        if versions is None:
            args.append(_num(-1))
        else:
            args += [_num(len(set(versions))), *(_b(v) for v in sorted(set(versions)))]
        flat = await self._script("claim_runs", [self._keys.timers], args)
        return [
            Lease(
                run_id=_s(flat[i]),
                owner=owner,
                fence=int(flat[i + 1]),
                expires_at_ms=expires,
                taken_from=None if flat[i + 2] is None else _s(flat[i + 2]),
            )
            for i in range(0, len(flat), 3)
        ]

    async def delete_runs(self, run_ids: Collection[str]) -> DeleteResult:
        ids = list(run_ids)
        if not ids:
            return DeleteResult()
        result = await self._script(
            "delete_runs",
            [self._keys.runs],
            [self._keys.base, *(_b(run_id) for run_id in ids)],
        )
        deleted = tuple(_s(run_id) for run_id in result[3:])
        return DeleteResult(
            runs=len(deleted),
            steps=int(result[0]),
            inputs=int(result[1]),
            run_ids=deleted,
            bytes=int(result[2]),
        )

    # --- journal ----------------------------------------------------------------
    async def load_journal(
        self, run_id: str, *, up_to_seq: int | None = None
    ) -> list[StepRecord]:
        client = await self._ready()
        with self._boundary("load journal"):
            found = _bytes_dict(await client.hgetall(self._keys.steps(run_id)))
        steps = [_step_from_packed(run_id, seq, data) for seq, data in found.items()]
        steps.sort(key=lambda step: step.seq)
        return [s for s in steps if up_to_seq is None or s.seq <= up_to_seq]

    async def commit_step(self, step: StepRecord, *, fence: int) -> None:
        committed = await self._script(
            "commit_step",
            [self._keys.run(step.run_id), self._keys.steps(step.run_id)],
            [_num(fence), _num(step.seq), _step_packed(step)],
            run_id=step.run_id,
            seq=step.seq,
        )
        if not committed:
            raise LeaseLost(run_id=step.run_id, seq=step.seq, fence=fence)

    # --- archive (SupportsArchive) ------------------------------------------------
    async def archive_journal(self, stub: ArchiveStub) -> bool:
        keys = self._keys
        run_id = stub.run_id
        done = await self._script(
            "archive_journal",
            [
                keys.run(run_id),
                keys.steps(run_id),
                keys.inputs(run_id),
                keys.stub(run_id),
                keys.stubs,
            ],
            [
                _num(stub.fence),
                _num(stub.steps),
                _num(stub.inputs),
                _stub_packed(stub),
                _b(run_id),
            ],
            run_id=run_id,
        )
        return bool(done)

    async def load_archive_stub(self, run_id: str) -> ArchiveStub | None:
        client = await self._ready()
        with self._boundary("load archive stub"):
            packed = await client.get(self._keys.stub(run_id))
        return None if packed is None else _stub_from_packed(run_id, _as_bytes(packed))

    async def restore_journal(
        self,
        stub: ArchiveStub,
        steps: Sequence[StepRecord],
        inputs: Sequence[InputRecord],
    ) -> bool:
        keys, run_id = self._keys, stub.run_id
        args = [_stub_packed(stub), _b(run_id), _num(len(steps))]
        for step in steps:
            args += [_num(step.seq), _step_packed(step)]
        for record in inputs:
            args += [_b(record.key), _pack([record.value, _num(record.sent_at_ms)])]
        done = await self._script(
            "restore_journal",
            [keys.stub(run_id), keys.steps(run_id), keys.inputs(run_id), keys.stubs],
            args,
            run_id=run_id,
        )
        return bool(done)

    async def list_archive_stubs(
        self, *, after: str | None, limit: int
    ) -> list[ArchiveStub]:
        client = await self._ready()
        low = b"-" if after is None else b"(" + _b(after)
        with self._boundary("list archive stubs"):
            ids = await client.zrangebylex(self._keys.stubs, low, b"+", 0, limit)
            found = (
                await client.mget([self._keys.stub(_s(_as_bytes(i))) for i in ids])
                if ids
                else []
            )
        return [
            _stub_from_packed(_s(_as_bytes(i)), _as_bytes(packed))
            for i, packed in zip(ids, found, strict=True)
            if packed is not None
        ]

    # --- inputs -----------------------------------------------------------------
    async def send_input(self, record: InputRecord) -> bool:
        result = await self._script(
            "send_input",
            [self._keys.run(record.run_id), self._keys.inputs(record.run_id)],
            [
                self._keys.base,
                _b(record.run_id),
                _b(record.key),
                _pack([record.value, _num(record.sent_at_ms)]),
                _num(record.sent_at_ms),
            ],
            run_id=record.run_id,
        )
        if result == -1:
            raise RunNotFound(run_id=record.run_id)
        return bool(result)

    async def get_inputs(self, run_id: str) -> dict[str, bytes]:
        client = await self._ready()
        with self._boundary("get inputs"):
            found = _bytes_dict(await client.hgetall(self._keys.inputs(run_id)))
        return _inputs_from_hash(found)

    async def list_inputs(self, run_id: str) -> list[InputRecord]:
        client = await self._ready()
        with self._boundary("list inputs"):
            found = _bytes_dict(await client.hgetall(self._keys.inputs(run_id)))
        records = []
        for key, packed in found.items():
            value, sent_at_ms = _unpack(packed)[:2]
            records.append(
                InputRecord(
                    run_id=run_id,
                    key=_s(key),
                    value=value or b"",
                    sent_at_ms=int(sent_at_ms or 0),
                )
            )
        return sorted(records, key=lambda rec: (rec.sent_at_ms, rec.key))

    # --- snapshots --------------------------------------------------------------
    async def put_chunks(self, chunks: Mapping[str, bytes]) -> None:
        keys = [self._keys.chunks, self._keys.chunkrefs, self._keys.orphans]
        args: list[bytes] = [self._keys.base]
        size = 0
        for digest, data in chunks.items():
            args += [_b(digest), data]
            size += len(data)
            if size >= _PUT_BATCH_BYTES:  # chunks are independent: batches may split
                await self._script("put_chunks", keys, args)
                args, size = [self._keys.base], 0
        if len(args) > 1:
            await self._script("put_chunks", keys, args)

    async def get_chunks(self, hashes: Collection[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(hashes))
        if not wanted:
            return {}
        client = await self._ready()
        found: dict[str, bytes] = {}
        with self._boundary("get chunks"):
            for start in range(0, len(wanted), _HMGET_SLICE):
                part = wanted[start : start + _HMGET_SLICE]
                values = await client.hmget(self._keys.chunks, [_b(h) for h in part])
                found.update(
                    (digest, _as_bytes(value))
                    for digest, value in zip(part, values, strict=True)
                    if value is not None
                )
        return found

    async def save_snapshot(
        self, snapshot: SnapshotRecord, *, chunks: Mapping[str, bytes] = NO_CHUNKS
    ) -> None:
        ids_key, records_key = self._keys.snapshots(
            snapshot.thread_id, snapshot.namespace
        )
        missing = await self._script(
            "save_snapshot",
            [
                ids_key,
                records_key,
                self._keys.of(b"nss:", snapshot.thread_id),
                self._keys.chunks,
                self._keys.chunkrefs,
                self._keys.orphans,
                self._keys.threads,
            ],
            [
                self._keys.base,
                _b(snapshot.checkpoint_id),
                _snapshot_packed(snapshot),
                _b(snapshot.namespace),
                str(len(snapshot.chunk_refs)).encode(),
                *(_b(ref) for ref in snapshot.chunk_refs),
                _b(snapshot.thread_id),
                _num(snapshot.created_at_ms),
                *itertools.chain.from_iterable(
                    (_b(digest), data) for digest, data in chunks.items()
                ),
            ],
        )
        if missing:
            raise ChunksMissing(
                store=self.url,
                thread_id=snapshot.thread_id,
                hashes=tuple(_s(ref) for ref in missing),
            )

    async def load_snapshot(
        self, thread_id: str, *, namespace: str = "", checkpoint_id: str | None = None
    ) -> SnapshotRecord | None:
        result = await self._script(
            "load_snapshot",
            list(self._keys.snapshots(thread_id, namespace)),
            [
                b"0" if checkpoint_id is None else b"1",
                _b(checkpoint_id or ""),
            ],
        )
        if not result:
            return None
        return _snapshot_from_packed(thread_id, namespace, _s(result[0]), result[1])

    async def list_snapshots(
        self,
        thread_id: str,
        *,
        namespace: str | None = "",
        before: str | None = None,
        limit: int | None = None,
    ) -> list[SnapshotRecord]:
        flat = await self._script(
            "list_snapshots",
            [self._keys.of(b"nss:", thread_id)],
            [
                self._keys.base,
                _b(thread_id),
                b"1" if namespace is None else b"0",
                _b(namespace or ""),
                b"0" if before is None else b"1",
                _b(before or ""),
                _num(-1 if limit is None else limit),
            ],
        )
        found = [
            _snapshot_from_packed(thread_id, _s(flat[i]), _s(flat[i + 1]), flat[i + 2])
            for i in range(0, len(flat), 3)
        ]
        found.sort(key=lambda snap: (snap.checkpoint_id, snap.namespace), reverse=True)
        return found if limit is None else found[:limit]

    async def replace_snapshots(
        self,
        thread_id: str,
        namespace: str,
        checkpoint_ids: Collection[str],
        *,
        by: SnapshotRecord,
    ) -> bool:
        check_pack(thread_id, by)
        replaced = await self._script(
            "replace_snapshots",
            [
                *self._keys.snapshots(thread_id, namespace),
                *self._keys.snapshots(by.thread_id, by.namespace),
                self._keys.of(b"nss:", by.thread_id),
                self._keys.threads,
            ],
            [
                self._keys.base,
                _b(by.checkpoint_id),
                _snapshot_packed(by),
                _b(by.namespace),
                str(len(by.chunk_refs)).encode(),
                *(_b(ref) for ref in by.chunk_refs),
                _b(by.thread_id),
                _num(by.created_at_ms),
                *(_b(checkpoint_id) for checkpoint_id in set(checkpoint_ids)),
            ],
        )
        return bool(replaced)

    async def delete_thread(self, thread_id: str) -> int:
        deleted = await self._script(
            "delete_thread",
            [self._keys.of(b"nss:", thread_id), self._keys.threads],
            [self._keys.base, _b(thread_id)],
        )
        return int(deleted)

    async def list_threads(
        self,
        *,
        prefix: str | None = None,
        after: tuple[int, str] | None = None,
        limit: int = 100,
    ) -> list[ThreadRecord]:
        client = await self._ready()
        cursor = _Cursor(self._keys.threads, after)
        wanted = None if prefix is None else _b(prefix)
        found: list[ThreadRecord] = []
        # a prefix is matched while paging: the zset is ordered by time, not by id
        with self._boundary("list threads"):
            while len(found) < limit:
                if not cursor.rows:
                    await cursor.fill(client, _PAGE_MAX)
                    if not cursor.rows:
                        break
                score, member = cursor.rows.pop()
                if wanted is None or member.startswith(wanted):
                    found.append(
                        ThreadRecord(thread_id=_s(member), updated_at_ms=int(score))
                    )
        return found

    async def delete_unreferenced_chunks(self, limit: int) -> int:
        if limit <= 0:
            return 0
        deleted = await self._script(
            "delete_unreferenced_chunks",
            [self._keys.chunks, self._keys.chunkrefs, self._keys.orphans],
            [_num(limit)],
        )
        return int(deleted)


def _is_counted(query: RunQuery) -> bool:
    """Whether the kept counts answer the query: filtered by status and queue only."""
    return (
        query.workflow is None
        and query.parent_id is None
        and query.forked_from is None
        and query.updated_before_ms is None
        and query.version is None
        and query.run_id_prefix is None
        and query.created_since_ms is None
        and query.created_before_ms is None
    )


class _Cursor:
    """Pages through one zset from its highest (score, member) down."""

    def __init__(self, key: bytes, after: tuple[int, str] | None = None) -> None:
        self.key = key
        self.offset = 0
        self.done = False
        self.rows: list[tuple[float, bytes]] = []  # lowest first: pop() is the next
        self.top: float | str = "+inf" if after is None else after[0]
        self.after = None if after is None else (float(after[0]), _b(after[1]))

    async def fill(self, client: Redis, page: int) -> None:
        self.rows = []
        while not self.rows and not self.done:
            found = cast(
                "list[tuple[bytes, float]]",
                await client.zrevrangebyscore(
                    self.key,
                    self.top,
                    "-inf",
                    start=self.offset,
                    num=page,
                    withscores=True,
                ),
            )
            self.offset += len(found)
            self.done = len(found) < page
            rows = [(float(score), _as_bytes(member)) for member, score in found]
            # runs created in the same ms as `after` and listed before it
            self.rows = [row for row in rows if self.after is None or row < self.after]
        self.rows.reverse()


# --- records <-> Redis values ------------------------------------------------------
def _run_fields(run: RunRecord) -> list[tuple[str, bytes]]:
    values: list[tuple[str, str | bytes | int | None]] = [
        ("workflow", run.workflow),
        ("status", run.status),
        ("input", run.input),
        ("output", run.output),
        ("created_at_ms", run.created_at_ms),
        ("updated_at_ms", run.updated_at_ms),
        ("parent_id", run.parent_id),
        ("forked_from", run.forked_from),
        ("fork_seq", run.fork_seq),
        ("queue", run.queue),
        ("lease_owner", run.lease_owner),
        ("lease_expires_at_ms", run.lease_expires_at_ms),
        ("fence", run.fence),
        ("wake_at_ms", run.wake_at_ms),
        ("expires_at_ms", run.expires_at_ms),
        ("version", run.version),
    ]
    encoded: list[tuple[str, bytes]] = []
    for name, value in values:
        if value is None:
            continue
        if isinstance(value, bytes):
            encoded.append((name, value))
        elif isinstance(value, str):
            encoded.append((name, _b(value)))
        else:
            encoded.append((name, _num(value)))
    return encoded


@converter("run", lambda run_id, found: f"run {run_id!r}")
def _run_from_hash(run_id: str, found: Mapping[bytes, bytes]) -> RunRecord:
    def text(name: str) -> str | None:
        return _text(found.get(name.encode()))

    def number(name: str) -> int | None:
        value = found.get(name.encode())
        return None if value is None else int(value)

    return RunRecord(
        run_id=run_id,
        workflow=text("workflow") or "",
        status=cast("RunStatus", text("status")),
        input=found.get(b"input", b""),
        output=found.get(b"output"),
        created_at_ms=number("created_at_ms") or 0,
        updated_at_ms=number("updated_at_ms") or 0,
        parent_id=text("parent_id"),
        forked_from=text("forked_from"),
        fork_seq=number("fork_seq"),
        queue=text("queue"),
        lease_owner=text("lease_owner"),
        lease_expires_at_ms=number("lease_expires_at_ms") or 0,
        fence=number("fence") or 0,
        wake_at_ms=number("wake_at_ms"),
        expires_at_ms=number("expires_at_ms"),
        version=text("version"),
    )


def _step_packed(step: StepRecord) -> bytes:
    return _pack(
        [
            _b(step.name),
            _b(step.fingerprint),
            _b(step.status),
            step.output,
            _num(step.attempts),
            _num(step.started_at_ms),
            _num(step.finished_at_ms),
            step.usage,
        ]
    )


def _stub_packed(stub: ArchiveStub) -> bytes:
    return _pack(
        [
            _b(stub.key),
            _num(stub.size),
            _num(stub.steps),
            _num(stub.inputs),
            _num(stub.fence),
            _num(stub.archived_at_ms),
            "\n".join(stub.refers_to).encode(),
        ]
    )


@converter("archive stub", lambda run_id, packed: f"run {run_id!r} archive stub")
def _stub_from_packed(run_id: str, packed: bytes) -> ArchiveStub:
    key, size, steps, inputs, fence, archived, refers_to = _unpack(packed)
    return ArchiveStub(
        run_id=run_id,
        key=_s(key or b""),
        size=_int(size),
        steps=_int(steps),
        inputs=_int(inputs),
        fence=_int(fence),
        archived_at_ms=_int(archived),
        refers_to=tuple(_s(refers_to or b"").split("\n")) if refers_to else (),
    )


@converter("input")
def _inputs_from_hash(found: Mapping[Any, Any]) -> dict[str, bytes]:
    return {_s(key): _unpack(packed)[0] or b"" for key, packed in found.items()}


@converter(
    "step",
    lambda run_id, seq, data: (
        f"run {run_id!r} step #{_s(seq) if isinstance(seq, bytes) else seq}"
    ),
)
def _step_from_packed(run_id: str, seq: bytes | int, data: bytes) -> StepRecord:
    name, fingerprint, status, output, attempts, started, finished, usage = _unpack(
        data
    )
    return StepRecord(
        run_id=run_id,
        seq=int(seq),
        name=_text(name) or "",
        fingerprint=_text(fingerprint) or "",
        status=cast("StepStatus", _text(status)),
        output=output,
        attempts=_int(attempts),
        started_at_ms=_int(started),
        finished_at_ms=_int(finished),
        usage=usage,
    )


def _snapshot_packed(snapshot: SnapshotRecord) -> bytes:
    # refs come last: lib.lua's snapshot_refs() skips the first five items
    return _pack(
        [
            None if snapshot.parent_id is None else _b(snapshot.parent_id),
            snapshot.manifest,
            _num(snapshot.created_at_ms),
            None if snapshot.label is None else _b(snapshot.label),
            snapshot.metadata,
            *(_b(ref) for ref in snapshot.chunk_refs),
        ]
    )


@converter(
    "snapshot",
    lambda thread_id, namespace, checkpoint_id, data: (
        f"thread {thread_id!r} checkpoint {checkpoint_id!r}"
    ),
)
def _snapshot_from_packed(
    thread_id: str, namespace: str, checkpoint_id: str, data: bytes
) -> SnapshotRecord:
    parent, manifest, created, label, metadata, *refs = _unpack(data)
    return SnapshotRecord(
        thread_id=thread_id,
        checkpoint_id=checkpoint_id,
        parent_id=_text(parent),
        manifest=manifest or b"",
        chunk_refs=tuple(_s(ref or b"") for ref in refs),
        created_at_ms=_int(created),
        namespace=namespace,
        label=_text(label),
        metadata=metadata,
    )


def _bytes_dict(found: Mapping[Any, Any]) -> dict[bytes, bytes]:
    return {_as_bytes(key): _as_bytes(value) for key, value in found.items()}


def _as_bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else _b(value)


def _config_value(found: Mapping[Any, Any]) -> str | None:
    value = next(iter(found.values()), None)
    return None if value is None else _s(_as_bytes(value))
