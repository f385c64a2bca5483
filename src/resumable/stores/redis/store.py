"""RedisStore: the Store protocol on Redis, each method a call into its concept's module.

The modules hold the work (`runs`, `claims`, `snapshots`, `archive`, `payloads`),
each function taking the store's `RedisClient`; see the package docstring for the
URL, the keys and the scripts.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from redis.asyncio import Redis

from resumable.stores.feeds import FeedEntry
from resumable.stores.protocol import (
    NO_CHUNKS,
    DeleteResult,
    InputRecord,
    Lease,
    Payload,
    PayloadKind,
    QueuePolicy,
    RunQuery,
    RunRecord,
    RunUpdate,
    ScheduleRecord,
    SnapshotRecord,
    StepRecord,
    ThreadRecord,
)
from resumable.stores.redis import (
    archive,
    cache,
    claims,
    feeds,
    payloads,
    runs,
    schedules,
    snapshots,
)
from resumable.stores.redis.connection import DEFAULT_PREFIX, RedisClient
from resumable.stores.step_cache import CacheEntry
from resumable.stores.stubs import ArchiveStub, ThreadStub

__all__ = ["RedisStore"]


class RedisStore:
    """The Store protocol on one Redis server, or a cluster (a store's keys share a slot)."""

    def __init__(
        self, url: str = f"redis://127.0.0.1:6379/0?prefix={DEFAULT_PREFIX}"
    ) -> None:
        self._conn = RedisClient(url, migrate_from_1=self._migrate_from_1)
        self.url, self.prefix = self._conn.url, self._conn.prefix

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

    async def _migrate_from_1(self, client: Redis) -> None:
        """Migrate schema 1 to 2: build the threads zset and the run counts."""
        await snapshots.index_threads(self._conn, client)
        await runs.count_all_runs(self._conn)

    # --- maintenance ------------------------------------------------------------
    async def scan_payloads(
        self, kind: PayloadKind, *, after: tuple[str | int, ...] | None, limit: int
    ) -> list[Payload]:
        return await payloads.scan_payloads(self._conn, kind, after=after, limit=limit)

    async def replace_payload(self, payload: Payload, *, data: bytes) -> bool:
        return await payloads.replace_payload(self._conn, payload, data=data)

    async def delete_runs(self, run_ids: Collection[str]) -> DeleteResult:
        return await runs.delete_runs(self._conn, run_ids)

    # --- schedules (KeepsSchedules) ----------------------------------------------
    async def save_schedule(self, record: ScheduleRecord) -> ScheduleRecord:
        return await schedules.save_schedule(self._conn, record)

    async def list_schedules(self) -> list[ScheduleRecord]:
        return await schedules.list_schedules(self._conn)

    async def set_schedule_paused(
        self, name: str, *, paused: bool, through_ms: int | None, now_ms: int
    ) -> ScheduleRecord | None:
        return await schedules.set_schedule_paused(
            self._conn, name, paused=paused, through_ms=through_ms, now_ms=now_ms
        )

    async def mark_schedule_ticked(
        self, name: str, *, tick_ms: int, now_ms: int
    ) -> bool:
        return await schedules.mark_schedule_ticked(
            self._conn, name, tick_ms=tick_ms, now_ms=now_ms
        )

    # --- runs -------------------------------------------------------------------
    async def create_run(self, run: RunRecord) -> RunRecord:
        return await runs.create_run(self._conn, run)

    async def get_run(self, run_id: str) -> RunRecord | None:
        return await runs.get_run(self._conn, run_id)

    async def list_runs(self, query: RunQuery) -> list[RunRecord]:
        return await runs.list_runs(self._conn, query)

    async def count_runs(self, query: RunQuery) -> dict[tuple[str, str | None], int]:
        return await runs.count_runs(self._conn, query)

    async def count_runs_by_reading(
        self, query: RunQuery
    ) -> dict[tuple[str, str | None], int]:
        """`count_runs` by reading every run the query's narrowest index holds.

        The plain version of the counts the scripts keep (for the filters those
        cannot answer: workflow, parent, fork, version, prefix, time).
        """
        return await runs.count_runs_by_reading(self._conn, query)

    async def acquire_lease(
        self,
        run_id: str,
        *,
        owner: str,
        now_ms: int,
        ttl_ms: int,
        take_over: str | None = None,
    ) -> Lease | None:
        return await runs.acquire_lease(
            self._conn,
            run_id,
            owner=owner,
            now_ms=now_ms,
            ttl_ms=ttl_ms,
            take_over=take_over,
        )

    async def renew_lease(
        self, run_id: str, *, fence: int, now_ms: int, ttl_ms: int
    ) -> None:
        await runs.renew_lease(
            self._conn, run_id, fence=fence, now_ms=now_ms, ttl_ms=ttl_ms
        )

    async def update_run(self, run_id: str, *, fence: int, update: RunUpdate) -> None:
        await runs.update_run(self._conn, run_id, fence=fence, update=update)

    async def cancel_run(self, run_id: str, *, now_ms: int) -> RunRecord:
        return await runs.cancel_run(self._conn, run_id, now_ms=now_ms)

    async def reopen_run(self, run_id: str, *, now_ms: int) -> bool:
        return await runs.reopen_run(self._conn, run_id, now_ms=now_ms)

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
        return await claims.claim_runs(
            self._conn,
            owner=owner,
            now_ms=now_ms,
            ttl_ms=ttl_ms,
            limit=limit,
            workflows=workflows,
            queues=queues,
            versions=versions,
        )

    # --- feeds (KeepsFeeds, in feeds.py) -----------------------------------------
    async def append_feed(
        self,
        run_id: str,
        channel: str,
        payloads: Sequence[bytes],
        *,
        now_ms: int,
        once_key: str | None = None,
    ) -> int | None:
        return await feeds.append_feed(
            self._conn, run_id, channel, payloads, now_ms=now_ms, once_key=once_key
        )

    async def read_feed(
        self, run_id: str, channel: str, *, after: int, limit: int
    ) -> list[FeedEntry]:
        return await feeds.read_feed(
            self._conn, run_id, channel, after=after, limit=limit
        )

    # --- journal ----------------------------------------------------------------
    async def load_journal(
        self, run_id: str, *, up_to_seq: int | None = None
    ) -> list[StepRecord]:
        return await runs.load_journal(self._conn, run_id, up_to_seq=up_to_seq)

    async def commit_step(self, step: StepRecord, *, fence: int) -> None:
        await runs.commit_step(self._conn, step, fence=fence)

    # --- step cache (SupportsStepCache, in cache) --------------------------------
    async def put_cache_entries(self, entries: Sequence[CacheEntry]) -> None:
        await cache.put_cache_entries(self._conn, entries)

    async def lookup_cache(
        self, key: str, *, now_ms: int
    ) -> tuple[CacheEntry, StepRecord] | None:
        return await cache.lookup_cache(self._conn, key, now_ms=now_ms)

    async def clear_cache(
        self, *, step: str | None = None, workflow: str | None = None
    ) -> int:
        return await cache.clear_cache(self._conn, step=step, workflow=workflow)

    # --- inputs -----------------------------------------------------------------
    async def send_input(self, record: InputRecord) -> bool:
        return await runs.send_input(self._conn, record)

    async def get_inputs(self, run_id: str) -> dict[str, bytes]:
        return await runs.get_inputs(self._conn, run_id)

    async def list_inputs(self, run_id: str) -> list[InputRecord]:
        return await runs.list_inputs(self._conn, run_id)

    # --- snapshots --------------------------------------------------------------
    async def put_chunks(self, chunks: Mapping[str, bytes]) -> None:
        await snapshots.put_chunks(self._conn, chunks)

    async def get_chunks(self, hashes: Collection[str]) -> dict[str, bytes]:
        return await snapshots.get_chunks(self._conn, hashes)

    async def save_snapshot(
        self, snapshot: SnapshotRecord, *, chunks: Mapping[str, bytes] = NO_CHUNKS
    ) -> None:
        await snapshots.save_snapshot(self._conn, snapshot, chunks=chunks)

    async def load_snapshot(
        self, thread_id: str, *, namespace: str = "", checkpoint_id: str | None = None
    ) -> SnapshotRecord | None:
        return await snapshots.load_snapshot(
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
        return await snapshots.list_snapshots(
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
        return await snapshots.swap_snapshots(
            self._conn, thread_id, old, by=by, chunks=chunks
        )

    async def delete_snapshots(
        self, thread_id: str, keys: Collection[tuple[str, str]]
    ) -> int:
        return await snapshots.delete_snapshots(self._conn, thread_id, keys)

    async def delete_thread(self, thread_id: str) -> int:
        return await snapshots.delete_thread(self._conn, thread_id)

    async def list_threads(
        self,
        *,
        prefix: str | None = None,
        after: tuple[int, str] | None = None,
        limit: int = 100,
    ) -> list[ThreadRecord]:
        return await snapshots.list_threads(
            self._conn, prefix=prefix, after=after, limit=limit
        )

    async def delete_unreferenced_chunks(self, limit: int) -> int:
        return await snapshots.delete_unreferenced_chunks(self._conn, limit)

    # --- archive (SupportsArchive, SupportsThreadArchive) -----------------------
    async def archive_journal(self, stub: ArchiveStub) -> bool:
        return await archive.archive_journal(self._conn, stub)

    async def load_archive_stub(self, run_id: str) -> ArchiveStub | None:
        return await archive.load_archive_stub(self._conn, run_id)

    async def restore_journal(
        self,
        stub: ArchiveStub,
        steps: Sequence[StepRecord],
        inputs: Sequence[InputRecord],
    ) -> bool:
        return await archive.restore_journal(self._conn, stub, steps, inputs)

    async def list_archive_stubs(
        self, *, after: str | None, limit: int
    ) -> list[ArchiveStub]:
        return await archive.list_archive_stubs(self._conn, after=after, limit=limit)

    async def archive_snapshots(
        self,
        stub: ThreadStub,
        *,
        moved: Collection[tuple[str, str]],
        chunks: Collection[str],
        replaces: str | None,
    ) -> bool:
        return await archive.archive_snapshots(
            self._conn, stub, moved=moved, chunks=chunks, replaces=replaces
        )

    async def load_thread_stub(self, thread_id: str) -> ThreadStub | None:
        return await archive.load_thread_stub(self._conn, thread_id)

    async def restore_snapshots(
        self,
        stub: ThreadStub,
        snapshots: Sequence[SnapshotRecord],
        chunks: Mapping[str, bytes],
    ) -> bool:
        return await archive.restore_snapshots(self._conn, stub, snapshots, chunks)

    async def list_thread_stubs(
        self, *, after: str | None, limit: int
    ) -> list[ThreadStub]:
        return await archive.list_thread_stubs(self._conn, after=after, limit=limit)
