"""RedisStore: the Store protocol on Redis, each fenced or multi-key write one Lua script.

URL: `redis://[[user]:password@]host[:port][/db][?prefix=myapp:&<redis-py options>]`
(or `rediss://`, `unix://`). `prefix` (default `resumable:`) namespaces the keys;
`pool_max` (default 100) and `pool_timeout_s` (default 10) size the connection pool
and bound how long a call waits for a free connection, as on PostgreSQL; `mode`
(`rwc` by default, `rw`, `ro`: `_redis_client.parse_mode`) says whether opening may
create the store, as SQLite's `mode=`. They are removed before the URL reaches
redis-py, which reads every other option.

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

from collections.abc import Collection, Mapping, Sequence

from redis.asyncio import Redis

from resumable.errors import (
    LeaseLost,
    RunNotFound,
)
from resumable.stores import _redis_listing as _listing
from resumable.stores import _redis_payloads, claims
from resumable.stores import _redis_records as _rec
from resumable.stores import _redis_snapshots as _snapshots
from resumable.stores._redis_client import (
    DEFAULT_PREFIX,
    SCHEMA_VERSION,
    RedisClient,
    parse_url,
)
from resumable.stores._redis_packing import escape_glob as _escape_glob
from resumable.stores._redis_packing import pack as _pack
from resumable.stores._redis_packing import to_bytes as _b
from resumable.stores._redis_packing import to_str as _s
from resumable.stores._redis_packing import unpack as _unpack
from resumable.stores._redis_thread_archive import ThreadArchiveMethods
from resumable.stores.protocol import (
    NO_CHUNKS,
    RUN_STATUSES,
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
)
from resumable.stores.stubs import ArchiveStub

__all__ = ["DEFAULT_PREFIX", "SCHEMA_VERSION", "RedisStore", "parse_url"]


class RedisStore(ThreadArchiveMethods):
    """The Store protocol on one Redis server, or a cluster (a store's keys share a slot)."""

    def __init__(
        self, url: str = f"redis://127.0.0.1:6379/0?prefix={DEFAULT_PREFIX}"
    ) -> None:
        self._conn = RedisClient(url, migrate_from_1=self._index_threads)
        self.url, self.prefix = self._conn.url, self._conn.prefix
        self._keys = self._conn.keys
        self._ready = self._conn.ready
        self._boundary = self._conn.boundary
        self._script = self._conn.script

    # --- lifecycle --------------------------------------------------------------
    async def open(self) -> RedisStore:
        """Connect and check the schema version.

        Idempotent; every other method opens the store on first use. The server's
        persistence is checked (and warned about) when runs are first stored.
        """
        await self._conn.open()
        return self

    async def close(self) -> None:
        await self._conn.close()

    async def drop(self) -> None:
        """Delete every key under this store's prefix (tests, and tearing down)."""
        await self._conn.drop()

    async def wait_for_work(self, timeout_s: float) -> None:
        """Return when a run may have become claimable, or after `timeout_s`."""
        await self._conn.wait_for_work(timeout_s)

    async def _index_threads(self, client: Redis) -> None:
        """Migrate schema 1 to 2: build the threads zset and the run counts."""
        nss = self._keys.base + b"nss:"
        with self._boundary("migrate to schema 2"):
            async for key in client.scan_iter(match=_escape_glob(nss) + b"*"):
                thread_id = _s(_rec.as_bytes(key)[len(nss) :])
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

    # --- maintenance ------------------------------------------------------------
    async def scan_payloads(
        self, kind: PayloadKind, *, after: tuple[str | int, ...] | None, limit: int
    ) -> list[Payload]:
        return await _redis_payloads.scan_payloads(
            self._conn, kind, after=after, limit=limit
        )

    async def replace_payload(self, payload: Payload, *, data: bytes) -> bool:
        return await _redis_payloads.replace_payload(self._conn, payload, data=data)

    # --- runs -------------------------------------------------------------------
    async def create_run(self, run: RunRecord) -> RunRecord:
        fields: list[bytes] = []
        for name, value in _rec.run_fields(run):
            fields += [name.encode(), value]
        result = await self._script(
            "create_run",
            [self._keys.run(run.run_id)],
            [self._keys.base, _b(run.run_id), *fields],
            run_id=run.run_id,
        )
        await self._conn.warn_if_unpersisted()
        if isinstance(result, list):
            return _rec.run_from_hash(run.run_id, _rec.pairs(result))
        return run

    async def get_run(self, run_id: str) -> RunRecord | None:
        client = await self._ready()
        with self._boundary("get run"):
            found = await client.hgetall(self._keys.run(run_id))
        return _rec.run_from_hash(run_id, _rec.bytes_dict(found)) if found else None

    async def list_runs(self, query: RunQuery) -> list[RunRecord]:
        return await _listing.list_runs(self._conn, query)

    async def count_runs(self, query: RunQuery) -> dict[tuple[str, str | None], int]:
        return await _listing.count_runs(self._conn, query)

    async def count_runs_by_reading(
        self, query: RunQuery
    ) -> dict[tuple[str, str | None], int]:
        """`count_runs` by reading every run the query's narrowest index holds.

        The plain version of the counts the scripts keep (for the filters those
        cannot answer: workflow, parent, fork, version, prefix, time).
        """
        return await _listing.count_runs_by_reading(self._conn, query)

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
                _rec.num(now_ms),
                _rec.num(expires),
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
            [self._keys.base, _b(run_id), _rec.num(fence), _rec.num(now_ms + ttl_ms)],
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
                _rec.num(fence),
                _b(update.status),
                _rec.num(update.now_ms),
                b"0" if update.output is None else b"1",
                update.output or b"",
                b"" if update.wake_at_ms is None else _rec.num(update.wake_at_ms),
                b"" if update.expires_at_ms is None else _rec.num(update.expires_at_ms),
            ],
            run_id=run_id,
        )
        if not updated:
            raise LeaseLost(run_id=run_id, fence=fence)

    async def cancel_run(self, run_id: str, *, now_ms: int) -> RunRecord:
        flat = await self._script(
            "cancel_run",
            [self._keys.run(run_id)],
            [self._keys.base, _b(run_id), _rec.num(now_ms)],
            run_id=run_id,
        )
        if not flat:
            raise RunNotFound(run_id=run_id)
        return _rec.run_from_hash(run_id, _rec.pairs(flat))

    async def reopen_run(self, run_id: str, *, now_ms: int) -> bool:
        result = await self._script(
            "reopen_run",
            [self._keys.run(run_id)],
            [self._keys.base, _b(run_id), _rec.num(now_ms)],
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
            _rec.num(now_ms),
            _rec.num(expires),
            _rec.num(limit),
            _rec.num(
                claims.candidate_window(
                    limit, skips_versions_after_reading=versions is not None
                )
            ),
            _rec.num(len(names)),
            *(_b(name) for name in names),
            _rec.num(len(queues)),
        ]
        for queue, policy in queues.items():
            since_ms = claims.rate_window_start_ms(policy, now_ms)
            args += [
                _b(queue),
                b"" if policy.concurrency is None else _rec.num(policy.concurrency),
                b"" if policy.rate is None else _rec.num(policy.rate),
                b"" if since_ms is None else _rec.num(since_ms),
            ]
        if versions is None:
            args.append(_rec.num(-1))
        else:
            args += [
                _rec.num(len(set(versions))),
                *(_b(v) for v in sorted(set(versions))),
            ]
        flat = await self._script("claim_runs", [self._keys.timers], args)
        await self._conn.warn_if_unpersisted()
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
            found = _rec.bytes_dict(await client.hgetall(self._keys.steps(run_id)))
        steps = [
            _rec.step_from_packed(run_id, seq, data) for seq, data in found.items()
        ]
        steps.sort(key=lambda step: step.seq)
        return [s for s in steps if up_to_seq is None or s.seq <= up_to_seq]

    async def commit_step(self, step: StepRecord, *, fence: int) -> None:
        committed = await self._script(
            "commit_step",
            [self._keys.run(step.run_id), self._keys.steps(step.run_id)],
            [_rec.num(fence), _rec.num(step.seq), _rec.step_packed(step)],
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
                _rec.num(stub.fence),
                _rec.num(stub.steps),
                _rec.num(stub.inputs),
                _rec.stub_packed(stub),
                _b(run_id),
            ],
            run_id=run_id,
        )
        return bool(done)

    async def load_archive_stub(self, run_id: str) -> ArchiveStub | None:
        client = await self._ready()
        with self._boundary("load archive stub"):
            packed = await client.get(self._keys.stub(run_id))
        return (
            None
            if packed is None
            else _rec.stub_from_packed(run_id, _rec.as_bytes(packed))
        )

    async def restore_journal(
        self,
        stub: ArchiveStub,
        steps: Sequence[StepRecord],
        inputs: Sequence[InputRecord],
    ) -> bool:
        keys, run_id = self._keys, stub.run_id
        args = [_rec.stub_packed(stub), _b(run_id), _rec.num(len(steps))]
        for step in steps:
            args += [_rec.num(step.seq), _rec.step_packed(step)]
        for record in inputs:
            args += [_b(record.key), _pack([record.value, _rec.num(record.sent_at_ms)])]
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
                await client.mget([self._keys.stub(_s(_rec.as_bytes(i))) for i in ids])
                if ids
                else []
            )
        return [
            _rec.stub_from_packed(_s(_rec.as_bytes(i)), _rec.as_bytes(packed))
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
                _pack([record.value, _rec.num(record.sent_at_ms)]),
                _rec.num(record.sent_at_ms),
            ],
            run_id=record.run_id,
        )
        if result == -1:
            raise RunNotFound(run_id=record.run_id)
        return bool(result)

    async def get_inputs(self, run_id: str) -> dict[str, bytes]:
        client = await self._ready()
        with self._boundary("get inputs"):
            found = _rec.bytes_dict(await client.hgetall(self._keys.inputs(run_id)))
        return _rec.inputs_from_hash(found)

    async def list_inputs(self, run_id: str) -> list[InputRecord]:
        client = await self._ready()
        with self._boundary("list inputs"):
            found = _rec.bytes_dict(await client.hgetall(self._keys.inputs(run_id)))
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

    # --- snapshots (transactions in _redis_snapshots) ---------------------------
    async def put_chunks(self, chunks: Mapping[str, bytes]) -> None:
        await _snapshots.put_chunks(self._conn, chunks)

    async def get_chunks(self, hashes: Collection[str]) -> dict[str, bytes]:
        return await _snapshots.get_chunks(self._conn, hashes)

    async def save_snapshot(
        self, snapshot: SnapshotRecord, *, chunks: Mapping[str, bytes] = NO_CHUNKS
    ) -> None:
        await _snapshots.save_snapshot(self._conn, snapshot, chunks=chunks)

    async def load_snapshot(
        self, thread_id: str, *, namespace: str = "", checkpoint_id: str | None = None
    ) -> SnapshotRecord | None:
        return await _snapshots.load_snapshot(
            self._conn, thread_id, namespace=namespace, checkpoint_id=checkpoint_id
        )

    async def list_snapshots(
        self,
        thread_id: str,
        *,
        namespace: str | None = "",
        before: str | None = None,
        limit: int | None = None,
    ) -> list[SnapshotRecord]:
        return await _snapshots.list_snapshots(
            self._conn, thread_id, namespace=namespace, before=before, limit=limit
        )

    async def swap_snapshots(
        self,
        thread_id: str,
        old: Sequence[SnapshotRecord],
        *,
        by: SnapshotRecord | None,
        chunks: Mapping[str, bytes] = NO_CHUNKS,
        durable: bool = True,
    ) -> bool:
        return await _snapshots.swap_snapshots(
            self._conn, thread_id, old, by=by, chunks=chunks
        )

    async def delete_snapshots(
        self, thread_id: str, keys: Collection[tuple[str, str]]
    ) -> int:
        return await _snapshots.delete_snapshots(self._conn, thread_id, keys)

    async def delete_thread(self, thread_id: str) -> int:
        return await _snapshots.delete_thread(self._conn, thread_id)

    async def list_threads(
        self,
        *,
        prefix: str | None = None,
        after: tuple[int, str] | None = None,
        limit: int = 100,
    ) -> list[ThreadRecord]:
        return await _snapshots.list_threads(
            self._conn, prefix=prefix, after=after, limit=limit
        )

    async def delete_unreferenced_chunks(self, limit: int) -> int:
        return await _snapshots.delete_unreferenced_chunks(self._conn, limit)
