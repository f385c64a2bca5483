"""SQLiteStore: the Store protocol on one SQLite file (see `resumable.stores.sqlite`).

Each method is one transaction: a function of `runs`, `claims`, `snapshots` or
`archive`, run by the connection's `SQLiteThread.call`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from functools import partial

from resumable.stores import _sql
from resumable.stores.feeds import FeedEntry
from resumable.stores.packing import check_swap
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
from resumable.stores.sqlite import archive as _archive
from resumable.stores.sqlite import cache as _cache
from resumable.stores.sqlite import claims as _claims
from resumable.stores.sqlite import feeds as _feeds
from resumable.stores.sqlite import runs as _runs
from resumable.stores.sqlite import schedules as _schedules
from resumable.stores.sqlite import snapshots as _snapshots
from resumable.stores.sqlite.connection import (
    DEFAULT_PATH,
    Conn,
    SQLiteThread,
    fdatasync,
    parse_url,
)
from resumable.stores.step_cache import CacheEntry
from resumable.stores.stubs import ArchiveStub, ThreadStub

_t = _sql.to_text


class SQLiteStore:
    """The Store protocol on one SQLite file, in WAL mode.

    Args:
        url: `sqlite:///path.db`, with the options the module doc lists.
        sync_file: Puts what was written to a file on disk, given its descriptor
            (`os.fdatasync`); tests pass one that records or fails.
        on_connect: Called with each connection the store opens, once configured,
            and whether it is the inline one (used on callers' threads) rather than
            the store thread's; tests and diagnostics trace or inspect them there.
        inline_lock: Guards the inline connection. While someone else holds it,
            every call goes to the store thread; tests hold it to exercise that path.

    Each method is one transaction, run by `SQLiteThread.call` (the connections,
    the store thread); the transactions are functions in `runs`, `claims`,
    `snapshots` and `archive`.
    """

    any_loop = True  # see capabilities.RunsOnAnyLoop
    local_writes = True  # see capabilities.LocalWrites

    def __init__(
        self,
        url: str = f"sqlite:///{DEFAULT_PATH}",
        *,
        sync_file: Callable[[int], None] = fdatasync,
        on_connect: Callable[[Conn, bool], None] | None = None,
        inline_lock: threading.Lock | None = None,
    ) -> None:
        self.url = url
        options = parse_url(url)
        self.path, self.durability = options.path, options.durability
        self._db = SQLiteThread(
            url,
            options.path,
            options.durability,
            busy_timeout_ms=options.busy_timeout_ms,
            mmap_mb=options.mmap_mb,
            mode=options.mode,
            sync_file=sync_file,
            on_connect=on_connect,
            inline_lock=inline_lock,
        )
        self._call = self._db.call
        self._present = _snapshots.PresentChunks()

    # --- lifecycle --------------------------------------------------------------
    async def open(self) -> SQLiteStore:
        """Start the store's thread, create the file and migrate its schema (idempotent).

        With `mode=rw` the file must exist; with `mode=ro` it must exist, and is
        only checked to hold a schema this version reads.
        """
        await self._db.open()
        return self

    async def close(self) -> None:
        await self._db.close()

    # --- runs -------------------------------------------------------------------
    async def create_run(self, run: RunRecord) -> RunRecord:
        return await self._call(
            partial(_runs.create_run_txn, run=run), write=True, run_id=run.run_id
        )

    async def get_run(self, run_id: str) -> RunRecord | None:
        return await self._call(
            partial(_runs.get_run_txn, run_id=run_id), write=False, inline=True
        )

    async def list_runs(self, query: RunQuery) -> list[RunRecord]:
        sql, params = _runs.list_runs_query(query)
        return await self._call(
            partial(_runs.select_runs_txn, sql=sql, params=params), write=False
        )

    async def count_runs(self, query: RunQuery) -> dict[tuple[str, str | None], int]:
        return await self._call(partial(_runs.count_runs_txn, query=query), write=False)

    async def acquire_lease(
        self,
        run_id: str,
        *,
        owner: str,
        now_ms: int,
        ttl_ms: int,
        take_over: str | None = None,
    ) -> Lease | None:
        acquire = partial(
            _claims.acquire_txn,
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
        renew = partial(
            _runs.renew_lease_txn,
            run_id=run_id,
            fence=fence,
            now_ms=now_ms,
            ttl_ms=ttl_ms,
        )
        await self._call(renew, write=True, run_id=run_id, durable=False)

    async def update_run(self, run_id: str, *, fence: int, update: RunUpdate) -> None:
        apply = partial(_runs.update_run_txn, run_id=run_id, fence=fence, update=update)
        await self._call(apply, write=True, run_id=run_id)

    async def cancel_run(self, run_id: str, *, now_ms: int) -> RunRecord:
        return await self._call(
            partial(_runs.cancel_run_txn, run_id=run_id, now_ms=now_ms),
            write=True,
            run_id=run_id,
        )

    async def reopen_run(self, run_id: str, *, now_ms: int) -> bool:
        return await self._call(
            partial(_runs.reopen_run_txn, run_id=run_id, now_ms=now_ms),
            write=True,
            run_id=run_id,
        )

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
        claim = partial(
            _claims.claim_txn,
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
        if not ids:
            return DeleteResult()
        return await self._call(partial(_runs.delete_runs_txn, ids=ids), write=True)

    # --- feeds (KeepsFeeds, transactions in feeds) --------------------------------
    async def append_feed(
        self,
        run_id: str,
        channel: str,
        payloads: Sequence[bytes],
        *,
        now_ms: int,
        once_key: str | None = None,
    ) -> int | None:
        append = partial(
            _feeds.append_feed_txn,
            run_id=run_id,
            channel=channel,
            payloads=payloads,
            now_ms=now_ms,
            once_key=once_key,
        )
        return await self._call(append, write=True, run_id=run_id)

    async def read_feed(
        self, run_id: str, channel: str, *, after: int, limit: int
    ) -> list[FeedEntry]:
        read = partial(
            _feeds.read_feed_txn,
            run_id=run_id,
            channel=channel,
            after=after,
            limit=limit,
        )
        return await self._call(read, write=False, inline=True)

    # --- journal ----------------------------------------------------------------
    async def load_journal(
        self, run_id: str, *, up_to_seq: int | None = None
    ) -> list[StepRecord]:
        load = partial(_runs.load_journal_txn, run_id=run_id, up_to_seq=up_to_seq)
        return await self._call(load, write=False, inline=True)

    async def commit_step(self, step: StepRecord, *, fence: int) -> None:
        params = _runs.commit_step_params(step, fence)
        commit = partial(_runs.commit_step_txn, params=params, step=step, fence=fence)
        await self._call(commit, write=True, run_id=step.run_id, seq=step.seq)

    # --- step cache (SupportsStepCache, transactions in cache) -------------------
    async def put_cache_entries(self, entries: Sequence[CacheEntry]) -> None:
        put = partial(_cache.put_cache_entries_txn, entries=entries)
        await self._call(put, write=True)

    async def lookup_cache(
        self, key: str, *, now_ms: int
    ) -> tuple[CacheEntry, StepRecord] | None:
        lookup = partial(_cache.lookup_cache_txn, key=key, now_ms=now_ms)
        return await self._call(lookup, write=False, inline=True)

    async def clear_cache(
        self, *, step: str | None = None, workflow: str | None = None
    ) -> int:
        clear = partial(_cache.clear_cache_txn, step=step, workflow=workflow)
        return await self._call(clear, write=True)

    # --- archive (SupportsArchive, transactions in archive) ----------------------
    async def archive_journal(self, stub: ArchiveStub) -> bool:
        return await self._call(
            lambda conn: _archive.archive_journal_txn(conn, stub),
            write=True,
            run_id=stub.run_id,
        )

    async def load_archive_stub(self, run_id: str) -> ArchiveStub | None:
        return await self._call(
            lambda conn: _archive.load_run_stub_txn(conn, run_id),
            write=False,
            inline=True,
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
            lambda conn: _archive.list_run_stubs_txn(conn, after, limit), write=False
        )

    # --- thread archive (SupportsThreadArchive, in archive) ----------------------
    async def archive_snapshots(
        self,
        stub: ThreadStub,
        *,
        moved: Collection[tuple[str, str]],
        chunks: Collection[str],
        replaces: str | None,
    ) -> bool:
        archive = partial(
            _archive.archive_snapshots_txn,
            present=self._present,
            stub=stub,
            moved=list(moved),
            chunks=list(chunks),
            replaces=replaces,
        )
        return await self._call(archive, write=True)

    async def load_thread_stub(self, thread_id: str) -> ThreadStub | None:
        load = partial(_archive.load_thread_stub_txn, thread_id=thread_id)
        return await self._call(load, write=False, inline=True)

    async def restore_snapshots(
        self,
        stub: ThreadStub,
        snapshots: Sequence[SnapshotRecord],
        chunks: Mapping[str, bytes],
    ) -> bool:
        restore = partial(
            _archive.restore_snapshots_txn,
            stub=stub,
            snapshots=list(snapshots),
            chunks=dict(chunks),
        )
        return await self._call(restore, write=True)

    async def list_thread_stubs(
        self, *, after: str | None, limit: int
    ) -> list[ThreadStub]:
        listing = partial(_archive.list_thread_stubs_txn, after=after, limit=limit)
        return await self._call(listing, write=False)

    # --- inputs -----------------------------------------------------------------
    async def send_input(self, record: InputRecord) -> bool:
        return await self._call(
            partial(_runs.send_input_txn, record=record),
            write=True,
            run_id=record.run_id,
        )

    async def get_inputs(self, run_id: str) -> dict[str, bytes]:
        return await self._call(
            partial(_runs.get_inputs_txn, run_id=run_id), write=False, inline=True
        )

    async def list_inputs(self, run_id: str) -> list[InputRecord]:
        return await self._call(
            partial(_runs.list_inputs_txn, run_id=run_id), write=False, inline=True
        )

    # --- schedules (KeepsSchedules, transactions in schedules.py) ---------------
    async def save_schedule(self, record: ScheduleRecord) -> ScheduleRecord:
        return await self._call(
            partial(_schedules.save_schedule_txn, record=record), write=True
        )

    async def list_schedules(self) -> list[ScheduleRecord]:
        return await self._call(_schedules.list_schedules_txn, write=False)

    async def set_schedule_paused(
        self, name: str, *, paused: bool, through_ms: int | None, now_ms: int
    ) -> ScheduleRecord | None:
        change = partial(
            _schedules.set_paused_txn,
            name=name,
            paused=paused,
            through_ms=through_ms,
            now_ms=now_ms,
        )
        return await self._call(change, write=True)

    async def mark_schedule_ticked(
        self, name: str, *, tick_ms: int, now_ms: int
    ) -> bool:
        return await self._call(
            partial(
                _schedules.mark_ticked_txn, name=name, tick_ms=tick_ms, now_ms=now_ms
            ),
            write=True,
        )

    # --- snapshots --------------------------------------------------------------
    async def put_chunks(self, chunks: Mapping[str, bytes]) -> None:
        rows = list(chunks.items())
        if rows:
            await self._call(partial(_snapshots.put_chunks_txn, rows=rows), write=True)

    async def get_chunks(self, hashes: Collection[str]) -> dict[str, bytes]:
        wanted = list(hashes)
        if not wanted:
            return {}
        get = partial(_snapshots.get_chunks_txn, hashes=wanted)
        return await self._call(get, write=False, inline=True)

    async def save_snapshot(
        self, snapshot: SnapshotRecord, *, chunks: Mapping[str, bytes] = NO_CHUNKS
    ) -> None:
        save = partial(
            _snapshots.save_snapshot_txn,
            url=self.url,
            present=self._present,
            snapshot=snapshot,
            new_chunks=list(chunks.items()),
            older=[ref for ref in snapshot.chunk_refs if ref not in chunks],
        )
        token = await self._call(save, write=True)
        self._present.add(token, snapshot.chunk_refs)

    async def load_snapshot(
        self, thread_id: str, *, namespace: str = "", checkpoint_id: str | None = None
    ) -> SnapshotRecord | None:
        load = partial(
            _snapshots.load_snapshot_txn,
            thread_id=thread_id,
            namespace=namespace,
            checkpoint_id=checkpoint_id,
        )
        return await self._call(load, write=False, inline=True)

    async def list_snapshots(
        self,
        thread_id: str,
        *,
        namespace: str | None = "",
        before: str | None = None,
        limit: int | None = None,
    ) -> list[SnapshotRecord]:
        query, params = _snapshots.list_snapshots_query(
            thread_id, namespace, before, limit
        )
        select = partial(_snapshots.select_snapshots_txn, query=query, params=params)
        return await self._call(select, write=False, inline=True)

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
        swap = partial(
            _snapshots.swap_snapshots_txn,
            url=self.url,
            present=self._present,
            thread_id=thread_id,
            old=list(old),
            by=by,
            new_chunks=list(chunks.items()),
        )
        # packing: no fsync, see the module doc (a lost swap leaves the rows as
        # they were)
        token = await self._call(swap, write=True, durable=durable)
        if token is None:
            return False
        if by is not None:
            self._present.add(token, by.chunk_refs)
        return True

    async def delete_snapshots(
        self, thread_id: str, keys: Collection[tuple[str, str]]
    ) -> int:
        delete = partial(
            _snapshots.delete_snapshots_txn, thread_id=thread_id, keys=sorted(set(keys))
        )
        return await self._call(delete, write=True)

    async def delete_thread(self, thread_id: str) -> int:
        return await self._call(
            partial(_archive.delete_thread_txn, thread_id=thread_id), write=True
        )

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
        params: dict[str, object] = {
            "prefix": _sql.maybe_text(prefix),
            "after_ms": None if after is None else after[0],
            "after_id": None if after is None else _t(after[1]),
            "limit": max(limit, 0),
        }
        return await self._call(
            partial(_snapshots.list_threads_txn, params=params), write=False
        )

    async def delete_unreferenced_chunks(self, limit: int) -> int:
        delete = partial(
            _snapshots.delete_unreferenced_chunks_txn,
            present=self._present,
            limit=limit,
        )
        return await self._call(delete, write=True)
