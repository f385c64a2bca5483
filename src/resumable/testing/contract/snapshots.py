"""`StoreContract`'s snapshot part: chunks, snapshots, threads, payload scans, packing.

The packing tests (`PacksSnapshots.swap_snapshots`, and thread times) skip on a
store without `PacksSnapshots`: packing is optional.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from resumable.errors import ChunksMissing
from resumable.stores.protocol import (
    PacksSnapshots,
    SnapshotRecord,
    SnapshotStore,
    Store,
)
from resumable.stores.roles import pack_namespace, writes_namespace
from resumable.testing.contract.records import T0, must_raise, needs, snapshot_record

PACKS = pack_namespace("")
WRITES = writes_namespace("")
_A = {"a": b"A"}


async def _read(store: Store, thread: str, namespace: str = "") -> list[SnapshotRecord]:
    """The thread's records in `namespace`, oldest first, as a packer reads them."""
    return list(reversed(await store.list_snapshots(thread, namespace=namespace)))


async def _ids(store: Store, thread: str, namespace: str = "") -> list[str]:
    return [r.checkpoint_id for r in await _read(store, thread, namespace)]


class PacksSnapshotsContract:
    """Behaviour of `swap_snapshots` (see `StoreContract`)."""

    async def test_snapshots_are_swapped_for_a_pack_in_one_step(
        self, store: Store
    ) -> None:
        needs(store, SnapshotStore, PacksSnapshots)
        await store.put_chunks({"a": b"A", "b": b"B", "c": b"C"})
        for n, refs in enumerate((("a",), ("a", "b"), ("c",)), start=1):
            await store.save_snapshot(snapshot_record("t", f"000{n}", refs))
        old = (await _read(store, "t"))[:2]
        pack = snapshot_record("t", "0001", ("a", "b"), namespace=PACKS, label="0002")
        assert await store.swap_snapshots("t", old, by=pack, durable=False)
        assert await _ids(store, "t") == ["0003"]
        loaded = await store.load_snapshot("t", namespace=PACKS)
        assert loaded is not None
        assert dataclasses.replace(loaded, chunk_refs=()) == dataclasses.replace(
            pack, chunk_refs=()
        )
        assert sorted(loaded.chunk_refs) == ["a", "b"]
        # the pack holds every chunk the swapped snapshots used
        assert await store.delete_unreferenced_chunks(100) == 0
        # one of them is gone: nothing changes
        again = snapshot_record("t", "0003", ("c",), namespace=PACKS)
        assert not await store.swap_snapshots(
            "t", [*(await _read(store, "t")), old[1]], by=again
        )
        assert await _ids(store, "t") == ["0003"]
        assert len(await store.list_snapshots("t", namespace=PACKS)) == 1
        assert await store.delete_thread("t") == 2
        assert await store.delete_unreferenced_chunks(100) == 3

    async def test_a_swap_naming_another_thread_is_refused_before_anything_changes(
        self, store: Store
    ) -> None:
        needs(store, SnapshotStore, PacksSnapshots)
        for n in (1, 2):
            await store.save_snapshot(snapshot_record("t", f"000{n}", ()))
        old = await _read(store, "t")
        pack = snapshot_record("other", "0001", (), namespace=PACKS, label="0002")
        with must_raise(ValueError):
            await store.swap_snapshots("t", old, by=pack)
        stranger = dataclasses.replace(old[0], thread_id="other")
        with must_raise(ValueError):
            await store.swap_snapshots("t", [stranger], by=None)
        assert await _ids(store, "t") == ["0001", "0002"]
        assert await store.list_snapshots("other", namespace=PACKS) == []

    async def test_two_swaps_of_the_same_snapshots_cannot_both_happen(
        self, store: Store
    ) -> None:
        needs(store, SnapshotStore, PacksSnapshots)
        await store.put_chunks({"a": b"A"})
        for n in range(1, 5):
            await store.save_snapshot(snapshot_record("t", f"000{n}", ("a",)))
        old = (await _read(store, "t"))[:3]
        packs = [
            snapshot_record("t", "0001", ("a",), namespace=PACKS, label=who)
            for who in ("one", "two")
        ]
        done = await asyncio.gather(
            *(store.swap_snapshots("t", old, by=pack) for pack in packs)
        )
        assert sorted(done) == [False, True]
        loaded = await store.load_snapshot("t", namespace=PACKS)
        assert loaded is not None
        assert loaded.label == ("one" if done[0] else "two")
        assert await _ids(store, "t") == ["0004"]

    async def test_a_pack_changed_between_read_and_swap_is_left_as_it_is(
        self, store: Store
    ) -> None:
        """The race of two engines extending (or one rewriting) the newest pack."""
        needs(store, SnapshotStore, PacksSnapshots)
        await store.put_chunks({"a": b"A", "b": b"B"})
        for n in range(2, 6):
            await store.save_snapshot(snapshot_record("t", f"000{n}", ("b",)))
        first = snapshot_record("t", "0001", ("a",), namespace=PACKS, label="0001")
        assert await store.swap_snapshots("t", [], by=first)
        read = await _read(store, "t", PACKS)  # both engines read the same pack
        loose = await _read(store, "t")
        # one extends it in place with 0002 and 0003
        theirs = dataclasses.replace(
            first, manifest=b"m-0001..0003", chunk_refs=("a", "b"), label="0003"
        )
        assert await store.swap_snapshots("t", [*loose[:2], *read], by=theirs)
        # the other, still holding the pack as first read, would drop 0002 and 0003
        ours = dataclasses.replace(first, manifest=b"m-0001,0004", label="0004")
        assert not await store.swap_snapshots("t", [loose[2], *read], by=ours)
        assert not await store.swap_snapshots("t", read, by=None)
        assert await _read(store, "t", PACKS) == [theirs]
        assert await _ids(store, "t") == ["0004", "0005"]
        # read again, the swap goes through
        now = await _read(store, "t", PACKS)
        assert await store.swap_snapshots("t", now, by=None)
        assert await store.list_snapshots("t", namespace=PACKS) == []

    async def test_a_loose_snapshot_rewritten_since_it_was_read_is_not_swapped(
        self, store: Store
    ) -> None:
        needs(store, SnapshotStore, PacksSnapshots)
        for n in (1, 2):
            await store.save_snapshot(snapshot_record("t", f"000{n}", ()))
        old = await _read(store, "t")
        await store.save_snapshot(
            snapshot_record("t", "0001", (), manifest=b"full version")
        )
        pack = snapshot_record("t", "0001", (), namespace=PACKS, label="0002")
        assert not await store.swap_snapshots("t", old, by=pack)
        assert await store.list_snapshots("t", namespace=PACKS) == []
        # a loose row rewritten in place as read: the swap is a compare-and-set
        now = await _read(store, "t")
        full = dataclasses.replace(now[1], manifest=b"m-0002 full")
        assert await store.swap_snapshots("t", [now[1]], by=full)
        assert (await _read(store, "t"))[1].manifest == b"m-0002 full"

    async def test_a_swap_never_overwrites_a_record_it_does_not_name(
        self, store: Store
    ) -> None:
        needs(store, SnapshotStore, PacksSnapshots)
        await store.save_snapshot(snapshot_record("t", "0001", ()))
        other = snapshot_record("t", "0001", (), namespace=PACKS, label="other")
        assert await store.swap_snapshots("t", [], by=other)
        old = await _read(store, "t")
        pack = snapshot_record("t", "0001", (), namespace=PACKS, label="0001")
        assert not await store.swap_snapshots("t", old, by=pack)
        assert await _read(store, "t") == old
        assert await _read(store, "t", PACKS) == [other]

    async def test_a_pack_rewritten_with_fewer_rows_releases_their_chunks(
        self, store: Store
    ) -> None:
        needs(store, SnapshotStore, PacksSnapshots)
        await store.put_chunks({"a": b"A", "b": b"B"})
        pack = snapshot_record("t", "0001", ("a", "b"), namespace=PACKS)
        assert await store.swap_snapshots("t", [], by=pack)
        smaller = dataclasses.replace(pack, manifest=b"m-0001 only", chunk_refs=("a",))
        assert await store.swap_snapshots("t", [pack], by=smaller)
        loaded = await store.load_snapshot("t", namespace=PACKS)
        assert loaded is not None
        assert loaded.chunk_refs == ("a",)
        assert await store.delete_unreferenced_chunks(100) == 1
        assert await store.get_chunks(["a", "b"]) == {"a": b"A"}
        # a pack swapped for nothing: gone, with its chunks and the empty thread
        assert await store.swap_snapshots("t", [smaller], by=None)
        assert await store.list_snapshots("t", namespace=None) == []
        assert await store.list_threads() == []
        assert await store.delete_unreferenced_chunks(100) == 1

    # --- the chunks a swapped-in record names ------------------------------------
    async def test_a_swap_naming_a_chunk_a_collection_deleted_changes_nothing(
        self, store: Store
    ) -> None:
        """The race `chunks` closes: chunks put, then collected before the swap."""
        needs(store, SnapshotStore, PacksSnapshots)
        await store.save_snapshot(snapshot_record("t", "0001", ("a",)), chunks=_A)
        old = await _read(store, "t")
        full = dataclasses.replace(old[0], manifest=b"full", chunk_refs=("a", "n"))
        await store.put_chunks({"n": b"N"})
        assert await store.delete_unreferenced_chunks(100) == 1  # took "n"
        refused: ChunksMissing | None = None
        try:
            await store.swap_snapshots("t", old, by=full, chunks={"x": b"X"})
        except ChunksMissing as exc:
            refused = exc
        assert refused is not None, "expected ChunksMissing"
        assert (refused.thread_id, refused.hashes) == ("t", ("n",))
        assert await _read(store, "t") == old
        assert await store.get_chunks(["a", "n", "x"]) == {"a": b"A"}  # nor "x" put
        # a swap refused as read stores none of its chunks either
        assert not await store.swap_snapshots("t", [full], by=full, chunks={"n": b"N"})
        assert await store.get_chunks(["n"]) == {}

    async def test_a_swap_given_its_chunks_survives_a_collection_after_the_read(
        self, store: Store
    ) -> None:
        needs(store, SnapshotStore, PacksSnapshots)
        await store.save_snapshot(snapshot_record("t", "0001", ("a",)), chunks=_A)
        old = await _read(store, "t")
        full = dataclasses.replace(old[0], manifest=b"full", chunk_refs=("a", "n"))
        await store.put_chunks({"n": b"N"})
        assert await store.delete_unreferenced_chunks(100) == 1
        given = {"n": b"N", "a": b"other bytes"}  # a hash present is left alone
        assert await store.swap_snapshots("t", old, by=full, chunks=given)
        assert await _read(store, "t") == [full]
        assert await store.delete_unreferenced_chunks(100) == 0
        assert await store.get_chunks(["a", "n"]) == {"a": b"A", "n": b"N"}
        # a pack given the chunks its rows name, in place of the rows
        pack = snapshot_record("t", "0001", ("a", "n", "p"), namespace=PACKS)
        assert await store.swap_snapshots("t", [full], by=pack, chunks={"p": b"P"})
        assert await store.delete_unreferenced_chunks(100) == 0
        assert await store.get_chunks(["p"]) == {"p": b"P"}

    async def test_swaps_racing_a_collection_never_keep_a_missing_chunk(
        self, store: Store
    ) -> None:
        needs(store, SnapshotStore, PacksSnapshots)
        for n in range(30):
            thread, chunk = f"race-{n}", f"loose-{n}"
            await store.save_snapshot(snapshot_record(thread, "0001", ()))
            old = await _read(store, thread)
            full = dataclasses.replace(old[0], manifest=b"full", chunk_refs=(chunk,))
            await store.put_chunks({chunk: b"L"})  # unreferenced: garbage until swapped
            swapped, _ = await asyncio.gather(
                store.swap_snapshots(thread, old, by=full),
                store.delete_unreferenced_chunks(1000),
                return_exceptions=True,
            )
            if isinstance(swapped, BaseException):
                assert isinstance(swapped, ChunksMissing), swapped
                assert await _read(store, thread) == old
            else:
                assert swapped is True
                assert await store.get_chunks([chunk]) == {chunk: b"L"}

    # --- snapshots rewritten or deleted: chunk references and thread times --------
    async def test_an_upserted_snapshot_releases_chunks_it_no_longer_names(
        self, store: Store
    ) -> None:
        needs(store, SnapshotStore)
        await store.put_chunks({"a": b"A", "b": b"B"})
        await store.save_snapshot(snapshot_record("t", "0001", ("a", "b")))
        await store.save_snapshot(snapshot_record("t", "0001", ("a",)))
        loaded = await store.load_snapshot("t")
        assert loaded is not None
        assert loaded.chunk_refs == ("a",)
        assert await store.delete_unreferenced_chunks(100) == 1
        assert await store.get_chunks(["a", "b"]) == {"a": b"A"}

    async def test_a_thread_is_as_new_as_its_newest_snapshot_left(
        self, store: Store
    ) -> None:
        needs(store, SnapshotStore)
        for n, ms in ((1, 5), (2, 7), (3, 9)):
            await store.save_snapshot(
                snapshot_record("t", f"000{n}", (), created_at_ms=T0 + ms)
            )
        await store.save_snapshot(
            snapshot_record("u", "0001", (), created_at_ms=T0 + 8)
        )

        async def listed() -> list[tuple[str, int]]:
            return [
                (t.thread_id, t.updated_at_ms - T0) for t in await store.list_threads()
            ]

        assert await listed() == [("t", 9), ("u", 8)]
        assert await store.delete_snapshots("t", [("", "0003")]) == 1
        assert await listed() == [("u", 8), ("t", 7)]
        assert await store.delete_snapshots("t", [("", "0001")]) == 1
        assert await listed() == [("u", 8), ("t", 7)]
        if isinstance(store, PacksSnapshots):
            assert await store.swap_snapshots("t", await _read(store, "t"), by=None)
            assert await listed() == [("u", 8)]


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
