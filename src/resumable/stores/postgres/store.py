"""PostgresStore: many workers on many machines sharing one PostgreSQL database.

The Store protocol's facade: each method builds its parameters, runs the statements
of its concept module on a connection from `connection.Connections`, and maps the
rows back to records. Every method is one short transaction on a connection
borrowed from the pool, and no connection is held while user code runs. Nothing
depends on session state: statements name the schema explicitly (no `SET
search_path`), locks are transaction-scoped (`pg_advisory_xact_lock`) and nothing is
prepared server-side, so the store works behind a transaction-mode pooler such as
PgBouncer. `wait_for_work` is the exception (see `connection.WorkListener`).
Concurrent `commit_step` calls share transactions (group commit, `runs.StepCommits`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, Sequence

from resumable.errors import CheckpointWriteError, LeaseLost, RunNotFound
from resumable.stores import _sql
from resumable.stores._records import checked_thread
from resumable.stores.feeds import FeedEntry
from resumable.stores.packing import check_swap
from resumable.stores.postgres import migrations
from resumable.stores.postgres.archive import (
    ArchiveStatements,
    archive_journal_txn,
    archive_snapshots_txn,
    restore_journal_txn,
    restore_snapshots_txn,
    run_stub_from_row,
    thread_stub_from_row,
)
from resumable.stores.postgres.cache import (
    CacheStatements,
    clear_params,
    entry_from_row,
    entry_params,
)
from resumable.stores.postgres.claims import ClaimStatements, claim_runs_txn
from resumable.stores.postgres.connection import Connections, parse_url
from resumable.stores.postgres.feeds import FeedStatements, append_feed_txn
from resumable.stores.postgres.payloads import payload_statements, payloads_from_rows
from resumable.stores.postgres.runs import (
    RunStatements,
    StepCommits,
    acquire_params,
    lease_from_acquired,
    run_filters,
)
from resumable.stores.postgres.schedules import Schedules
from resumable.stores.postgres.snapshots import (
    SnapshotStatements,
    refuse_missing,
    snapshot_from_row,
    snapshot_params,
    swap_params,
)
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
from resumable.stores.step_cache import CacheEntry
from resumable.stores.stubs import ArchiveStub, ThreadStub
from resumable.stores.urls import redact

# identifiers are stored escaped (%, NUL, lone surrogates), as in every SQL store
_t = _sql.to_text


class PostgresStore:
    """The Store protocol on PostgreSQL, safe for many workers and processes."""

    def __init__(self, url: str) -> None:
        self.url = redact(url)
        self._options = parse_url(url)
        self.schema = self._options.schema
        self._runs = RunStatements(self.schema)
        self._snapshots = SnapshotStatements(self.schema)
        self._claims = ClaimStatements(self.schema)
        self._archive = ArchiveStatements(self.schema)
        self._cache = CacheStatements(self.schema)
        self._feeds = FeedStatements(self.schema)
        self._payloads = payload_statements(self.schema)
        self._db = Connections(
            self._options,
            url=self.url,
            prepare=functools.partial(migrations.prepare, self._options, url=self.url),
            drain=lambda: self._commits.wait_idle(),  # noqa: PLW0108 - _commits is made below
        )
        self._schedules = Schedules(self.schema, self._db)
        self._commits = StepCommits(
            url=self.url,
            statements=self._runs,
            pool=lambda: self._db.pool,
            on_failure=self._db.on_failure,
            abandoned=self._db.abandoned,
        )

    # --- lifecycle --------------------------------------------------------------
    async def open(self) -> PostgresStore:
        """Connect, create or migrate the schema, and start the pool (idempotent)."""
        await self._db.open()
        return self

    async def close(self) -> None:
        await self._db.close()

    async def drop(self) -> None:
        """Delete the store's schema and everything in it (for tests)."""
        await self._commits.wait_idle()
        await migrations.drop_schema(self._options, url=self.url)

    # --- runs -------------------------------------------------------------------
    async def create_run(self, run: RunRecord) -> RunRecord:
        params: dict[str, object] = dict(
            zip(_sql.RUN_COLUMNS, _sql.run_values(run), strict=True)
        )
        params["schema"] = self.schema
        rows = await self._db.write(self._runs.create_run, params, run_id=run.run_id)
        if rows:
            return _sql.run_from_row(rows[0])
        # it existed: read it in a fresh snapshot (the INSERT may have waited for
        # another transaction creating it, whose row its own snapshot cannot see)
        existing = await self.get_run(run.run_id)
        if existing is None:  # deleted in between; the caller may try again
            raise CheckpointWriteError(
                run_id=run.run_id, seq=None, detail="the run was deleted meanwhile"
            )
        return existing

    async def get_run(self, run_id: str) -> RunRecord | None:
        rows = await self._db.read(self._runs.select_run, (_t(run_id),))
        return _sql.run_from_row(rows[0]) if rows else None

    async def list_runs(self, query: RunQuery) -> list[RunRecord]:
        after_ms, after_id = query.after or (None, None)
        params = run_filters(query) | {
            "after_ms": after_ms,
            "after_id": _sql.maybe_text(after_id),
            "limit": query.limit,
        }
        return [
            _sql.run_from_row(row)
            for row in await self._db.read(self._runs.list_runs, params)
        ]

    async def count_runs(self, query: RunQuery) -> dict[tuple[str, str | None], int]:
        rows = await self._db.read(self._runs.count_runs, run_filters(query))
        return {
            (row["status"], _sql.maybe_from_text(row["queue"])): row["n"]
            for row in rows
        }

    async def acquire_lease(
        self,
        run_id: str,
        *,
        owner: str,
        now_ms: int,
        ttl_ms: int,
        take_over: str | None = None,
    ) -> Lease | None:
        params = acquire_params(run_id, owner, now_ms, ttl_ms, take_over)
        (row,) = await self._db.write(self._runs.acquire, params, run_id=run_id)
        return lease_from_acquired(
            row, run_id=run_id, owner=owner, expires_at_ms=now_ms + ttl_ms
        )

    async def renew_lease(
        self, run_id: str, *, fence: int, now_ms: int, ttl_ms: int
    ) -> None:
        params = (now_ms + ttl_ms, _t(run_id), fence)
        if not await self._db.write_count(self._runs.renew, params, run_id=run_id):
            raise LeaseLost(run_id=run_id, fence=fence)

    async def update_run(self, run_id: str, *, fence: int, update: RunUpdate) -> None:
        params = _sql.update_values(run_id, fence, update)
        if not await self._db.write_count(self._runs.update_run, params, run_id=run_id):
            raise LeaseLost(run_id=run_id, fence=fence)

    async def cancel_run(self, run_id: str, *, now_ms: int) -> RunRecord:
        params = {"run_id": _t(run_id), "now_ms": now_ms, "schema": self.schema}
        rows = await self._db.write(self._runs.cancel, params, run_id=run_id)
        if rows:
            return _sql.run_from_row(rows[0])
        run = await self.get_run(run_id)  # finished already, or missing
        if run is None:
            raise RunNotFound(run_id=run_id)
        return run

    async def reopen_run(self, run_id: str, *, now_ms: int) -> bool:
        params = {"run_id": _t(run_id), "now_ms": now_ms, "schema": self.schema}
        (row,) = await self._db.write(self._runs.reopen, params, run_id=run_id)
        if not row["found"]:
            raise RunNotFound(run_id=run_id)
        return bool(row["reopened"])

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
        if limit <= 0 or not workflows:
            return []
        async with self._db.connection() as conn, conn.transaction():
            return await claim_runs_txn(
                conn,
                self._claims,
                owner=owner,
                now_ms=now_ms,
                ttl_ms=ttl_ms,
                limit=limit,
                workflows=workflows,
                queues=queues,
                versions=versions,
            )

    async def delete_runs(self, run_ids: Collection[str]) -> DeleteResult:
        ids = [_t(run_id) for run_id in run_ids]
        if not ids:
            return DeleteResult()
        async with self._db.connection() as conn:
            cur = await conn.execute(self._runs.delete_runs, (ids,))
            row = await cur.fetchone()
        if row is None or not row["run_ids"]:
            return DeleteResult()
        return DeleteResult(
            runs=len(row["run_ids"]),
            steps=row["steps"],
            inputs=row["inputs"],
            run_ids=tuple(_sql.from_text(run_id) for run_id in row["run_ids"]),
            bytes=int(row["size"]),
        )

    # --- feeds (KeepsFeeds, statements in feeds.py) ------------------------------
    async def append_feed(
        self,
        run_id: str,
        channel: str,
        payloads: Sequence[bytes],
        *,
        now_ms: int,
        once_key: str | None = None,
    ) -> int | None:
        async with self._db.connection(run_id=run_id) as conn, conn.transaction():
            return await append_feed_txn(
                conn,
                self._feeds,
                run_id=run_id,
                channel=channel,
                payloads=payloads,
                now_ms=now_ms,
                once_key=once_key,
            )

    async def read_feed(
        self, run_id: str, channel: str, *, after: int, limit: int
    ) -> list[FeedEntry]:
        params = (_t(run_id), _t(channel), after, limit)
        rows = await self._db.read(self._feeds.read, params)
        return _sql.feed_entries(run_id, channel, rows)

    # --- journal ----------------------------------------------------------------
    async def load_journal(
        self, run_id: str, *, up_to_seq: int | None = None
    ) -> list[StepRecord]:
        params = (_t(run_id), up_to_seq if up_to_seq is not None else 2**63 - 1)
        return [
            _sql.step_from_row(row)
            for row in await self._db.read(self._runs.load_journal, params)
        ]

    async def commit_step(self, step: StepRecord, *, fence: int) -> None:
        if self._db.pool is None:
            await self._db.open(run_id=step.run_id, seq=step.seq)
        await self._commits.commit(step, fence)

    def add_commit_listener(self, listener: Callable[[int], None]) -> None:
        """Call `listener(size)` after each group of step commits is written."""
        self._commits.add_listener(listener)

    # --- inputs -----------------------------------------------------------------
    async def send_input(self, record: InputRecord) -> bool:
        params = {
            "run_id": _t(record.run_id),
            "key": _t(record.key),
            "value": record.value,
            "sent_at_ms": record.sent_at_ms,
            "schema": self.schema,
        }
        (row,) = await self._db.write(
            self._runs.send_input, params, run_id=record.run_id
        )
        if not row["found"]:
            raise RunNotFound(run_id=record.run_id)
        return bool(row["sent"])

    # --- step cache (SupportsStepCache, statements in cache.py) -----------------
    async def put_cache_entries(self, entries: Sequence[CacheEntry]) -> None:
        if not entries:
            return
        async with (
            self._db.connection() as conn,
            conn.transaction(),
            conn.cursor() as cursor,
        ):
            await cursor.executemany(
                self._cache.put, [entry_params(entry) for entry in entries]
            )

    async def lookup_cache(
        self, key: str, *, now_ms: int
    ) -> tuple[CacheEntry, StepRecord] | None:
        rows = await self._db.read(self._cache.lookup, (key, now_ms))
        if not rows:
            return None
        return entry_from_row(rows[0]), _sql.step_from_row(rows[0])

    async def clear_cache(
        self, *, step: str | None = None, workflow: str | None = None
    ) -> int:
        return await self._db.write_count(
            self._cache.clear, clear_params(step, workflow)
        )

    # --- schedules (KeepsSchedules, statements in schedules.py) -----------------
    async def save_schedule(self, record: ScheduleRecord) -> ScheduleRecord:
        return await self._schedules.save(record)

    async def list_schedules(self) -> list[ScheduleRecord]:
        return await self._schedules.list()

    async def set_schedule_paused(
        self, name: str, *, paused: bool, through_ms: int | None, now_ms: int
    ) -> ScheduleRecord | None:
        return await self._schedules.set_paused(
            name, paused=paused, through_ms=through_ms, now_ms=now_ms
        )

    async def mark_schedule_ticked(
        self, name: str, *, tick_ms: int, now_ms: int
    ) -> bool:
        return await self._schedules.mark_ticked(name, tick_ms=tick_ms, now_ms=now_ms)

    # --- archive (SupportsArchive, transactions in archive.py) -----------------
    async def archive_journal(self, stub: ArchiveStub) -> bool:
        async with self._db.connection() as conn:
            done = False
            async with conn.transaction():
                done = await archive_journal_txn(conn, self._archive, stub)
            return done

    async def load_archive_stub(self, run_id: str) -> ArchiveStub | None:
        rows = await self._db.read(self._archive.load_run_stub, (_t(run_id),))
        return run_stub_from_row(rows[0]) if rows else None

    async def restore_journal(
        self,
        stub: ArchiveStub,
        steps: Sequence[StepRecord],
        inputs: Sequence[InputRecord],
    ) -> bool:
        async with self._db.connection() as conn, conn.transaction():
            return await restore_journal_txn(conn, self._archive, stub, steps, inputs)

    async def list_archive_stubs(
        self, *, after: str | None, limit: int
    ) -> list[ArchiveStub]:
        params = {"after": None if after is None else _t(after), "limit": limit}
        rows = await self._db.read(self._archive.list_run_stubs, params)
        return [run_stub_from_row(row) for row in rows]

    async def get_inputs(self, run_id: str) -> dict[str, bytes]:
        rows = await self._db.read(self._runs.get_inputs, (_t(run_id),))
        return {_sql.from_text(row["key"]): _sql.blob(row["value"]) for row in rows}

    async def list_inputs(self, run_id: str) -> list[InputRecord]:
        rows = await self._db.read(self._runs.list_inputs, (_t(run_id),))
        return [
            InputRecord(
                run_id=run_id,
                key=_sql.from_text(row["key"]),
                value=_sql.blob(row["value"]),
                sent_at_ms=row["sent_at_ms"],
            )
            for row in rows
        ]

    # --- snapshots --------------------------------------------------------------
    async def put_chunks(self, chunks: Mapping[str, bytes]) -> None:
        if not chunks:
            return
        async with self._db.connection() as conn:
            await conn.execute(
                self._snapshots.put_chunks, (list(chunks), list(chunks.values()))
            )

    async def get_chunks(self, hashes: Collection[str]) -> dict[str, bytes]:
        wanted = list(hashes)
        if not wanted:
            return {}
        rows = await self._db.read(self._snapshots.get_chunks, (wanted,))
        return {row["hash"]: _sql.blob(row["data"]) for row in rows}

    async def save_snapshot(
        self, snapshot: SnapshotRecord, *, chunks: Mapping[str, bytes] = NO_CHUNKS
    ) -> None:
        params = {
            "hashes": list(chunks),
            "chunks": list(chunks.values()),
            **snapshot_params(snapshot),
        }
        async with self._db.connection() as conn:
            cursor = await conn.execute(self._snapshots.save_snapshot, params)
            row = await cursor.fetchone()
        refuse_missing(row, store=self.url, thread_id=snapshot.thread_id)

    async def load_snapshot(
        self, thread_id: str, *, namespace: str = "", checkpoint_id: str | None = None
    ) -> SnapshotRecord | None:
        params = {
            "thread_id": _t(thread_id),
            "namespace": _t(namespace),
            "checkpoint_id": _sql.maybe_text(checkpoint_id),
        }
        rows = await self._db.read(self._snapshots.load_snapshot, params)
        return snapshot_from_row(rows[0]) if rows else None

    async def list_snapshots(
        self,
        thread_id: str,
        *,
        namespace: str | None = "",
        before: str | None = None,
        limit: int | None = None,
    ) -> list[SnapshotRecord]:
        params = {
            "thread_id": _t(thread_id),
            "namespace": _sql.maybe_text(namespace),
            "before": _sql.maybe_text(before),
            "limit": limit,
        }
        rows = await self._db.read(self._snapshots.list_snapshots, params)
        return [snapshot_from_row(row) for row in rows]

    async def swap_snapshots(
        self,
        thread_id: str,
        old: Sequence[SnapshotRecord],
        *,
        by: SnapshotRecord | None,
        chunks: Mapping[str, bytes] = NO_CHUNKS,
        durable: bool = True,
    ) -> bool:
        check_swap(thread_id, old, by)
        params = swap_params(thread_id, old, by, chunks)
        async with self._db.connection() as conn:
            cursor = await conn.execute(self._snapshots.swap_snapshots, params)
            row = await cursor.fetchone()
        if row is None or not row["ok"]:
            return False
        refuse_missing(row, store=self.url, thread_id=thread_id)
        return True

    async def delete_snapshots(
        self, thread_id: str, keys: Collection[tuple[str, str]]
    ) -> int:
        unique = sorted(set(keys))
        params = {
            "thread_id": _t(thread_id),
            "namespaces": [_t(namespace) for namespace, _ in unique],
            "ids": [_t(checkpoint_id) for _, checkpoint_id in unique],
        }
        return await self._db.write_count(self._snapshots.delete_snapshots, params)

    async def delete_thread(self, thread_id: str) -> int:
        params = {"thread_id": _t(thread_id)}
        return await self._db.write_count(self._snapshots.delete_thread, params)

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
        rows = await self._db.read(self._snapshots.list_threads, params)
        return [
            checked_thread(row["thread_id"], row["updated_at_ms"], _sql.from_text)
            for row in rows
        ]

    async def delete_unreferenced_chunks(self, limit: int) -> int:
        async with self._db.connection() as conn, conn.transaction():
            cur = await conn.execute(self._snapshots.unreferenced_candidates, (limit,))
            candidates = [row["hash"] for row in await cur.fetchall()]
            if not candidates:
                return 0
            await conn.execute(self._snapshots.lock_references)
            cur = await conn.execute(self._snapshots.delete_unreferenced, (candidates,))
            return cur.rowcount

    # --- thread archive (SupportsThreadArchive, transactions in archive.py) ------
    async def archive_snapshots(
        self,
        stub: ThreadStub,
        *,
        moved: Collection[tuple[str, str]],
        chunks: Collection[str],
        replaces: str | None,
    ) -> bool:
        done = False
        async with self._db.connection() as conn:
            async with conn.transaction():
                done = await archive_snapshots_txn(
                    conn,
                    self._archive,
                    stub,
                    moved=list(moved),
                    chunks=list(chunks),
                    replaces=replaces,
                )
            return done

    async def load_thread_stub(self, thread_id: str) -> ThreadStub | None:
        async with self._db.connection() as conn:
            cur = await conn.execute(self._archive.load_thread_stub, (_t(thread_id),))
            row = await cur.fetchone()
        return None if row is None else thread_stub_from_row(row)

    async def restore_snapshots(
        self,
        stub: ThreadStub,
        snapshots: Sequence[SnapshotRecord],
        chunks: Mapping[str, bytes],
    ) -> bool:
        async with self._db.connection() as conn, conn.transaction():
            return await restore_snapshots_txn(
                conn, self._archive, stub, snapshots, chunks
            )

    async def list_thread_stubs(
        self, *, after: str | None, limit: int
    ) -> list[ThreadStub]:
        params = {"after": None if after is None else _t(after), "limit": limit}
        async with self._db.connection() as conn:
            cur = await conn.execute(self._archive.list_thread_stubs, params)
            rows = await cur.fetchall()
        return [thread_stub_from_row(row) for row in rows]

    # --- maintenance ------------------------------------------------------------
    async def scan_payloads(
        self, kind: PayloadKind, *, after: tuple[str | int, ...] | None, limit: int
    ) -> list[Payload]:
        first, following, _ = self._payloads[kind]
        ids = _sql.PAYLOAD_COLUMNS[kind][1]
        if after is None:
            rows = await self._db.read(first, (limit,))
        else:
            parts = tuple(_sql.key_to_sql(part) for part in after[: len(ids)])
            rows = await self._db.read(following, (*parts, limit))
        return payloads_from_rows(kind, rows)

    async def replace_payload(self, payload: Payload, *, data: bytes) -> bool:
        replace = self._payloads[payload.kind][2]
        ids = _sql.PAYLOAD_COLUMNS[payload.kind][1]
        parts = tuple(_sql.key_to_sql(part) for part in payload.key[: len(ids)])
        changed = await self._db.write_count(
            replace, (data, *parts, payload.data), run_id=str(payload.key[0])
        )
        return changed == 1

    async def wait_for_work(self, timeout_s: float) -> None:
        """Wait until another process announces work in this schema, or `timeout_s`.

        Creating a queued run, sending input to a waiting one, reopening and
        cancelling announce work (see `connection.WorkListener`).
        """
        await self._db.work.wait_for_work(timeout_s)
