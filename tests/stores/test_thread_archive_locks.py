"""PostgreSQL: archiving and restoring one thread at once wait for each other, never deadlock.

Both take the snapshot references table before the stub's row
(`stores.postgres.archive`). This test forces the interleaving in which
the other order deadlocks: a restore that holds the stub's row and waits (here for
a table a third session holds), while an archive of the same thread starts.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from conftest import service_url, store_url
from resumable.stores import create_store
from resumable.stores.postgres import PostgresStore
from resumable.stores.stubs import ThreadStub
from resumable.testing.contract.records import snapshot_record

pytestmark = pytest.mark.postgres


async def _waiting(conninfo: str, schema: str, count: int) -> None:
    """Return once `count` sessions wait for a lock in a statement naming `schema`."""
    query = (
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND position(%s in query) > 0"
    )
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        for _ in range(3000):
            row = await (await conn.execute(query, (f'"{schema}"',))).fetchone()
            if row is not None and row[0] >= count:
                return
            await asyncio.sleep(0.01)
    pytest.fail(f"{count} sessions never waited for a lock in schema {schema}")


async def test_a_restore_holding_the_stub_and_an_archive_of_its_thread_do_not_deadlock(
    tmp_path: Path,
) -> None:
    conninfo = service_url("postgres")
    store = create_store(store_url("postgres", tmp_path))
    assert isinstance(store, PostgresStore)
    try:
        await store.put_chunks({"a": b"A", "b": b"B"})
        old = snapshot_record("t", "0001", ("a",))
        await store.save_snapshot(old)
        await store.save_snapshot(snapshot_record("t", "0002", ("b",)))
        stub = ThreadStub(
            thread_id="t",
            key="threads/aa/one",
            size=1,
            snapshots=1,
            chunks=1,
            archived_at_ms=1,
            newest=(("", "0001"),),
        )
        assert await store.archive_snapshots(
            stub, moved=[("", "0001")], chunks=["a"], replaces=None
        )
        assert await store.get_chunks(["a"]) == {}
        again = ThreadStub(
            thread_id="t",
            key="threads/bb/two",
            size=1,
            snapshots=2,
            chunks=2,
            archived_at_ms=2,
            newest=(("", "0002"),),
        )
        async with await psycopg.AsyncConnection.connect(conninfo) as blocker:
            # holds back the restore's chunk insert, after it locked the stub
            await blocker.execute(
                sql.SQL("LOCK TABLE {}.resumable_chunks IN SHARE MODE").format(
                    sql.Identifier(store.schema)
                )
            )
            restore = asyncio.create_task(
                store.restore_snapshots(stub, [old], {"a": b"A"})
            )
            await _waiting(conninfo, store.schema, 1)
            archive = asyncio.create_task(
                store.archive_snapshots(
                    again, moved=[("", "0002")], chunks=["b"], replaces=stub.key
                )
            )
            await _waiting(conninfo, store.schema, 2)
            await blocker.commit()
        restored, archived = await asyncio.gather(restore, archive)
        assert restored
        assert not archived  # the stub it meant to replace is gone: nothing changed
        assert await store.load_thread_stub("t") is None
        assert [s.checkpoint_id for s in await store.list_snapshots("t")] == [
            "0002",
            "0001",
        ]
        assert await store.get_chunks(["a", "b"]) == {"a": b"A", "b": b"B"}
    finally:
        await store.drop()
        await store.close()
