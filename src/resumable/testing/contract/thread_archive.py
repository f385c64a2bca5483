"""`StoreContract`'s thread archive part: `SupportsThreadArchive` swaps snapshots for a stub.

A store without the capability skips these tests (`Engine.archive` then archives
none of its threads: `stores.archive`).
"""

from __future__ import annotations

import dataclasses

from resumable.errors import ChunksMissing
from resumable.stores.protocol import (
    PacksSnapshots,
    SnapshotRecord,
    SnapshotStore,
    Store,
)
from resumable.stores.roles import pack_namespace
from resumable.stores.stubs import SupportsThreadArchive, ThreadStub
from resumable.testing.contract.records import T0, WEIRD_IDS, needs, snapshot_record

PACKS = pack_namespace("")

_CHUNKS = {"a": b"A", "b": b"B", "c": b"C", "shared": b"S"}


def _archiving(store: Store) -> SupportsThreadArchive:
    if not isinstance(store, SupportsThreadArchive):
        import pytest  # the suite runs under pytest; resumable does not need it

        pytest.skip(f"{type(store).__name__} does not declare SupportsThreadArchive")
    return store


def _stub(thread_id: str, key: str = "threads/ab/one", **fields: object) -> ThreadStub:
    base = ThreadStub(
        thread_id=thread_id,
        key=key,
        size=321,
        snapshots=3,
        chunks=3,
        archived_at_ms=T0 + 50,
        newest=(("", "0002"), (PACKS, "0001")),
        refers_to=("sha256/aa/one",),
    )
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]  # the test's fields


async def _thread(store: Store, thread_id: str) -> list[SnapshotRecord]:
    """Three snapshots and a pack in `thread_id`, one snapshot in "other"; oldest first."""
    await store.put_chunks(_CHUNKS)
    saved = [
        snapshot_record(thread_id, "0001", ("a", "shared")),
        snapshot_record(thread_id, "0002", ("b",), metadata=b"meta", label="two"),
        snapshot_record(thread_id, "0003", ("b", "c")),
        snapshot_record(thread_id, "0001", ("a", "b"), namespace=PACKS),
    ]
    for snap in saved:
        await store.save_snapshot(snap)
    await store.save_snapshot(snapshot_record("other", "0001", ("shared",)))
    return saved


_MOVED = [("", "0001"), ("", "0002"), (PACKS, "0001")]


class ThreadArchiveContract:
    """Behaviour of `SupportsThreadArchive` (see `StoreContract`)."""

    async def test_archiving_a_thread_swaps_older_snapshots_and_their_chunks_for_a_stub(
        self, store: Store
    ) -> None:
        archive = _archiving(store)
        saved = await _thread(store, "t")
        stub = _stub("t")
        assert await archive.load_thread_stub("t") is None
        assert await archive.archive_snapshots(
            stub, moved=_MOVED, chunks=["a", "shared", "b"], replaces=None
        )
        assert await archive.load_thread_stub("t") == stub
        assert [s.checkpoint_id for s in await store.list_snapshots("t")] == ["0003"]
        assert await store.list_snapshots("t", namespace=PACKS) == []
        # "a" went; "b" is named by the kept snapshot, "shared" by another thread
        assert await store.get_chunks(list(_CHUNKS)) == {
            "b": b"B",
            "c": b"C",
            "shared": b"S",
        }
        assert [t.thread_id for t in await store.list_threads(prefix="t")] == ["t"]
        # the stub stands: only the stub that stands there restores
        assert not await archive.archive_snapshots(
            stub, moved=[("", "0003")], chunks=[], replaces=None
        )
        moved = [s for s in saved if s.checkpoint_id != "0003" or s.namespace]
        other = dataclasses.replace(stub, key="threads/ff/other")
        assert not await archive.restore_snapshots(other, moved, _CHUNKS)
        assert await archive.restore_snapshots(stub, moved, {"a": b"A", "b": b"X"})
        assert await archive.load_thread_stub("t") is None
        listed = await store.list_snapshots("t", namespace=None)
        assert sorted(listed, key=lambda s: (s.namespace, s.checkpoint_id)) == sorted(
            saved, key=lambda s: (s.namespace, s.checkpoint_id)
        )
        # a chunk stored already keeps its bytes (chunks are content-addressed)
        assert await store.get_chunks(["a", "b"]) == {"a": b"A", "b": b"B"}
        assert not await archive.restore_snapshots(stub, moved, _CHUNKS)

    async def test_archiving_a_thread_refuses_when_its_rows_or_stub_changed(
        self, store: Store
    ) -> None:
        archive = _archiving(store)
        await _thread(store, "t")
        gone = [*_MOVED, ("", "0009")]
        assert not await archive.archive_snapshots(
            _stub("t"), moved=gone, chunks=["a"], replaces=None
        )
        assert not await archive.archive_snapshots(
            _stub("t"), moved=_MOVED, chunks=["a"], replaces="threads/ab/none"
        )
        assert len(await store.list_snapshots("t", namespace=None)) == 4
        assert await store.get_chunks(["a"]) == {"a": b"A"}
        assert await archive.load_thread_stub("t") is None
        # archived again later: the new stub replaces the one it names
        first = _stub("t")
        assert await archive.archive_snapshots(
            first, moved=[("", "0001")], chunks=["a", "shared"], replaces=None
        )
        second = _stub("t", key="threads/cd/two", snapshots=2)
        assert not await archive.archive_snapshots(
            second, moved=[("", "0002")], chunks=[], replaces="threads/ff/stale"
        )
        assert await archive.archive_snapshots(
            second, moved=[("", "0002")], chunks=["b"], replaces=first.key
        )
        assert await archive.load_thread_stub("t") == second
        # the pack still names "a" and "b", another thread "shared"
        assert await store.get_chunks(["a", "b", "shared"]) == {
            "a": b"A",
            "b": b"B",
            "shared": b"S",
        }

    async def test_a_save_naming_a_chunk_an_archive_deleted_is_refused(
        self, store: Store
    ) -> None:
        archive = _archiving(store)
        await _thread(store, "t")
        assert await archive.archive_snapshots(
            _stub("t"), moved=_MOVED, chunks=["a", "shared", "b"], replaces=None
        )
        refused: ChunksMissing | None = None
        try:
            await store.save_snapshot(snapshot_record("t", "0004", ("a", "c")))
        except ChunksMissing as exc:
            refused = exc
        assert refused is not None, "expected ChunksMissing"
        assert refused.hashes == ("a",)
        await store.save_snapshot(
            snapshot_record("t", "0004", ("a", "c")), chunks={"a": b"A"}
        )
        assert [s.checkpoint_id for s in await store.list_snapshots("t")] == [
            "0004",
            "0003",
        ]
        assert await archive.load_thread_stub("t") is not None

    async def test_deleting_a_thread_deletes_its_stub(self, store: Store) -> None:
        archive = _archiving(store)
        await _thread(store, "gone")
        assert await archive.archive_snapshots(
            _stub("gone"), moved=_MOVED, chunks=[], replaces=None
        )
        assert await store.delete_thread("gone") == 1
        assert await archive.load_thread_stub("gone") is None
        assert await archive.list_thread_stubs(after=None, limit=10) == []

    async def test_thread_stubs_list_in_pages_and_keep_weird_ids(
        self, store: Store
    ) -> None:
        archive = _archiving(store)
        stubs = []
        for thread_id in WEIRD_IDS:
            await store.save_snapshot(snapshot_record(thread_id, "0001", ()))
            await store.save_snapshot(snapshot_record(thread_id, "0002", ()))
            stub = _stub(thread_id, newest=((thread_id, "0001"),))
            moved = [("", "0001")]
            assert await archive.archive_snapshots(
                stub, moved=moved, chunks=[], replaces=None
            ), thread_id
            assert await archive.load_thread_stub(thread_id) == stub
            stubs.append(stub)
        listed: list[ThreadStub] = []
        after: str | None = None
        while page := await archive.list_thread_stubs(after=after, limit=4):
            listed += page
            after = page[-1].thread_id
        assert sorted(s.thread_id for s in listed) == sorted(WEIRD_IDS)
        assert {s.thread_id: s for s in listed} == {s.thread_id: s for s in stubs}

    async def test_a_snapshot_replaced_under_its_own_id_keeps_the_chunks_it_names(
        self, store: Store
    ) -> None:
        # archiving makes each namespace's newest snapshot full under its own id
        # (`Snapshots.make_full`) and then deletes the chunks nothing names
        needs(store, SnapshotStore)
        await store.put_chunks(_CHUNKS)
        first = snapshot_record("t", "0001", ("a", "b"))
        await store.save_snapshot(first)
        full = snapshot_record("t", "0001", ("b", "c"), parent_id="0000")
        packing: object = store  # a Store by type, maybe not at run time
        if isinstance(packing, PacksSnapshots):
            assert await packing.swap_snapshots("t", [first], by=full)
        else:
            await store.save_snapshot(full)
        assert await store.list_snapshots("t") == [full]
        assert await store.delete_unreferenced_chunks(100) == 2  # "a" and "shared"
        assert await store.get_chunks(["a", "b", "c"]) == {"b": b"B", "c": b"C"}
