"""`StoreContract`'s snapshot half: chunks, snapshots, threads, payload scans."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from resumable._contract_packing import PacksSnapshotsContract
from resumable._contract_records import (
    T0,
    needs,
    snapshot_record,
)
from resumable.errors import ChunksMissing
from resumable.stores.protocol import (
    SnapshotRecord,
    SnapshotStore,
    Store,
)
from resumable.stores.roles import pack_namespace, writes_namespace

PACKS = pack_namespace("")
WRITES = writes_namespace("")


class SnapshotStoreContract(PacksSnapshotsContract):
    """Behaviour of a store's snapshots and chunks (see `StoreContract`).

    With the tests of packing, which skip on a store without `PacksSnapshots`.
    """

    # --- snapshots ----------------------------------------------------------------
    async def test_chunks_are_content_addressed_and_idempotent(
        self, store: Store
    ) -> None:
        needs(store, SnapshotStore)
        await store.put_chunks({"h1": b"one", "h2": b"two"})
        await store.put_chunks({"h1": b"one"})
        assert await store.get_chunks(["h1", "h2", "h3"]) == {
            "h1": b"one",
            "h2": b"two",
        }
        assert await store.get_chunks([]) == {}

    async def test_a_snapshot_saves_its_new_chunks_with_it(self, store: Store) -> None:
        needs(store, SnapshotStore)
        await store.put_chunks({"old": b"kept"})
        snapshot = snapshot_record("t", "0001", ("old", "new"))
        await store.save_snapshot(snapshot, chunks={"new": b"N", "old": b"other"})
        assert await store.get_chunks(["old", "new"]) == {"old": b"kept", "new": b"N"}
        loaded = await store.load_snapshot("t")
        assert loaded is not None
        assert dataclasses.replace(loaded, chunk_refs=()) == dataclasses.replace(
            snapshot, chunk_refs=()
        )
        assert sorted(loaded.chunk_refs) == ["new", "old"]
        # referenced at once: a collection never sees them as garbage
        assert await store.delete_unreferenced_chunks(100) == 0
        await store.delete_thread("t")
        assert await store.delete_unreferenced_chunks(100) == 2

    async def test_a_snapshot_naming_a_missing_chunk_is_refused_whole(
        self, store: Store
    ) -> None:
        needs(store, SnapshotStore)
        await store.put_chunks({"kept": b"K"})
        snapshot = snapshot_record("t", "0001", ("kept", "given", "gone"))
        refused: ChunksMissing | None = None
        try:
            await store.save_snapshot(snapshot, chunks={"given": b"G"})
        except ChunksMissing as exc:
            refused = exc
        assert refused is not None, "expected ChunksMissing"
        assert (refused.thread_id, refused.hashes) == ("t", ("gone",))
        assert await store.load_snapshot("t") is None
        assert await store.get_chunks(["given"]) == {}  # nothing of it was stored

    async def test_a_chunk_collected_after_a_save_named_it_is_missing_for_the_next(
        self, store: Store
    ) -> None:
        needs(store, SnapshotStore)
        await store.save_snapshot(
            snapshot_record("t", "0001", ("x",)), chunks={"x": b"X"}
        )
        await store.save_snapshot(
            snapshot_record("t", "0002", ("x",))
        )  # x stored: fine
        await store.delete_thread("t")
        assert await store.delete_unreferenced_chunks(100) == 1
        refused: ChunksMissing | None = None
        try:
            await store.save_snapshot(snapshot_record("t", "0003", ("x",)))
        except ChunksMissing as exc:
            refused = exc
        assert refused is not None, "a save named a chunk collected after it was seen"
        assert refused.hashes == ("x",)
        assert await store.load_snapshot("t") is None

    async def test_saves_racing_a_collection_never_keep_a_missing_chunk(
        self, store: Store
    ) -> None:
        needs(store, SnapshotStore)
        for n in range(30):
            chunk = f"loose-{n}"
            await store.put_chunks({chunk: b"L"})  # unreferenced: garbage until saved
            snapshot = snapshot_record(f"race-{n}", "0001", (chunk,))
            saved, _ = await asyncio.gather(
                store.save_snapshot(snapshot),
                store.delete_unreferenced_chunks(1000),
                return_exceptions=True,
            )
            if isinstance(saved, BaseException):
                assert isinstance(saved, ChunksMissing), saved
                assert await store.load_snapshot(f"race-{n}") is None
            else:
                assert await store.get_chunks([chunk]) == {chunk: b"L"}

    async def test_threads_are_listed_newest_first_by_page_and_prefix(
        self, store: Store
    ) -> None:
        needs(store, SnapshotStore)

        def saved(
            thread: str, checkpoint: str, ms: int, **fields: Any
        ) -> SnapshotRecord:
            return snapshot_record(
                thread, checkpoint, (), created_at_ms=T0 + ms, **fields
            )

        await store.save_snapshot(saved("a/1", "0001", 5))
        await store.save_snapshot(saved("a/1", "0002", 1, namespace="sub"))
        await store.save_snapshot(saved("a/2", "0001", 7))
        await store.save_snapshot(saved("b", "0001", 7))
        await store.save_snapshot(saved("c", "0001", 2))
        await store.save_snapshot(saved("c", "0002", 3))
        listed = await store.list_threads()
        # updated_at is the newest snapshot of any namespace; ties go by id, descending
        assert [(t.thread_id, t.updated_at_ms - T0) for t in listed] == [
            ("b", 7),
            ("a/2", 7),
            ("a/1", 5),
            ("c", 3),
        ]
        first = await store.list_threads(limit=2)
        assert [t.thread_id for t in first] == ["b", "a/2"]
        last = (first[-1].updated_at_ms, first[-1].thread_id)
        assert [t.thread_id for t in await store.list_threads(after=last)] == [
            "a/1",
            "c",
        ]
        assert [t.thread_id for t in await store.list_threads(prefix="a/")] == [
            "a/2",
            "a/1",
        ]
        assert await store.list_threads(limit=0) == []
        # a deleted thread is gone
        assert await store.delete_thread("b") == 1
        assert [t.thread_id for t in await store.list_threads()] == [
            "a/2",
            "a/1",
            "c",
        ]

    async def test_snapshots_load_latest_list_and_delete(self, store: Store) -> None:
        needs(store, SnapshotStore)
        await store.put_chunks({"a": b"A", "b": b"B", "c": b"C"})
        await store.save_snapshot(snapshot_record("t", "0001", ("a",)))
        await store.save_snapshot(
            snapshot_record("t", "0002", ("a", "b"), parent_id="0001", label="x")
        )
        await store.save_snapshot(
            snapshot_record("t", "0003", ("b", "c"), namespace="sub")
        )
        latest = await store.load_snapshot("t")
        assert latest is not None
        assert (latest.checkpoint_id, latest.parent_id, latest.label) == (
            "0002",
            "0001",
            "x",
        )
        assert set(latest.chunk_refs) == {"a", "b"}
        first = await store.load_snapshot("t", checkpoint_id="0001")
        assert first is not None
        assert first.manifest == b"m-0001"
        assert await store.load_snapshot("t", checkpoint_id="nope") is None
        assert [s.checkpoint_id for s in await store.list_snapshots("t")] == [
            "0002",
            "0001",
        ]
        assert [
            s.checkpoint_id for s in await store.list_snapshots("t", before="0002")
        ] == ["0001"]
        assert [s.checkpoint_id for s in await store.list_snapshots("t", limit=1)] == [
            "0002"
        ]
        assert len(await store.list_snapshots("t", namespace=None)) == 3
        assert await store.delete_unreferenced_chunks(100) == 0
        assert await store.delete_thread("t") == 3
        assert await store.load_snapshot("t") is None
        assert await store.delete_unreferenced_chunks(100) == 3
        assert await store.get_chunks(["a", "b", "c"]) == {}

    async def test_single_snapshots_are_deleted_and_only_their_chunks_released(
        self, store: Store
    ) -> None:
        needs(store, SnapshotStore)
        await store.put_chunks({"a": b"A", "b": b"B", "c": b"C"})
        await store.save_snapshot(snapshot_record("t", "0001", ("a",)))
        await store.save_snapshot(snapshot_record("t", "0002", ("a", "b")))
        await store.save_snapshot(
            snapshot_record("t", "0002", ("c",), namespace=WRITES)
        )
        await store.save_snapshot(snapshot_record("other", "0002", ("b",)))
        keys = [("", "0002"), (WRITES, "0002"), ("", "nope"), ("gone", "0001")]
        assert await store.delete_snapshots("t", keys) == 2
        assert [s.checkpoint_id for s in await store.list_snapshots("t")] == ["0001"]
        assert await store.list_snapshots("t", namespace=WRITES) == []
        assert await store.load_snapshot("other", checkpoint_id="0002") is not None
        # "b" is still the other thread's, "a" the kept snapshot's: only "c" goes
        assert await store.delete_unreferenced_chunks(100) == 1
        assert await store.get_chunks(["a", "b", "c"]) == {"a": b"A", "b": b"B"}
        # deleting again, or nothing, changes nothing
        assert await store.delete_snapshots("t", keys) == 0
        assert await store.delete_snapshots("t", []) == 0
        assert [t.thread_id for t in await store.list_threads()] == ["t", "other"]
        # the last snapshot gone, the thread is no longer listed
        assert await store.delete_snapshots("t", [("", "0001")]) == 1
        assert [t.thread_id for t in await store.list_threads()] == ["other"]
        assert await store.delete_unreferenced_chunks(100) == 1
        assert await store.get_chunks(["a", "b"]) == {"b": b"B"}

    async def test_deleting_snapshots_is_one_transaction(self, store: Store) -> None:
        needs(store, SnapshotStore)
        await store.put_chunks({"x": b"X"})
        ids = [f"{n:04d}" for n in range(40)]
        for checkpoint_id in ids:
            await store.save_snapshot(snapshot_record("t", checkpoint_id, ("x",)))
        # a reader racing the delete sees every doomed row or none of them
        doomed = [("", checkpoint_id) for checkpoint_id in ids[::2]]
        deleted, seen = await asyncio.gather(
            store.delete_snapshots("t", doomed), store.list_snapshots("t")
        )
        assert deleted == len(doomed)
        assert len(seen) in (len(ids), len(ids) - len(doomed))
        kept = [s.checkpoint_id for s in await store.list_snapshots("t")]
        assert kept == sorted(ids[1::2], reverse=True)
