"""`StoreContract`'s packing part (`PacksSnapshots.swap_snapshots`), and thread times.

The swap tests skip on a store without `PacksSnapshots`: packing is optional.
"""

from __future__ import annotations

import asyncio
import dataclasses

from resumable._contract_records import T0, must_raise, needs, snapshot_record
from resumable.errors import ChunksMissing
from resumable.stores.protocol import (
    PacksSnapshots,
    SnapshotRecord,
    SnapshotStore,
    Store,
)
from resumable.stores.roles import pack_namespace

PACKS = pack_namespace("")
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
