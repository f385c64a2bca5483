"""`StoreContract`'s feeds part: runs' append-only channels (`KeepsFeeds`)."""

from __future__ import annotations

import asyncio

from resumable.errors import RunNotFound
from resumable.stores.capabilities import KeepsFeeds
from resumable.stores.protocol import Maintenance, RunUpdate, Store
from resumable.testing.contract.records import T0, must_raise, needs, run_record


class FeedContract:
    """Behaviour of a store's `KeepsFeeds` (see `StoreContract`)."""

    async def test_feed_entries_are_numbered_from_one_in_append_order(
        self, store: Store
    ) -> None:
        needs(store, KeepsFeeds)
        assert isinstance(store, KeepsFeeds)
        await store.create_run(run_record("fed"))
        assert await store.append_feed("fed", "c", [b"a", b"b"], now_ms=T0) == 2
        assert await store.append_feed("fed", "c", [b"\x00c:"], now_ms=T0 + 1) == 3
        assert await store.append_feed("fed", "other", [b"x"], now_ms=T0) == 1
        entries = await store.read_feed("fed", "c", after=0, limit=10)
        assert [(e.offset, e.payload) for e in entries] == [
            (1, b"a"),
            (2, b"b"),
            (3, b"\x00c:"),
        ]
        assert [e.created_at_ms for e in entries] == [T0, T0, T0 + 1]
        later = await store.read_feed("fed", "c", after=1, limit=1)
        assert [(e.offset, e.payload, e.channel) for e in later] == [(2, b"b", "c")]
        assert await store.read_feed("fed", "c", after=3, limit=10) == []
        assert await store.read_feed("fed", "none", after=0, limit=10) == []

    async def test_an_append_whose_once_key_the_channel_took_appends_nothing(
        self, store: Store
    ) -> None:
        needs(store, KeepsFeeds)
        assert isinstance(store, KeepsFeeds)
        await store.create_run(run_record("tok"))
        assert (
            await store.append_feed("tok", "e", [b"1"], now_ms=T0, once_key="1.0") == 1
        )
        assert (
            await store.append_feed("tok", "e", [b"2"], now_ms=T0, once_key="1.0")
            is None
        )
        assert (
            await store.append_feed("tok", "e", [b"3"], now_ms=T0, once_key="2.0") == 2
        )
        # a once_key is per channel
        assert (
            await store.append_feed("tok", "f", [b"4"], now_ms=T0, once_key="1.0") == 1
        )
        entries = await store.read_feed("tok", "e", after=0, limit=10)
        assert [e.payload for e in entries] == [b"1", b"3"]

    async def test_concurrent_appends_to_one_channel_take_distinct_offsets(
        self, store: Store
    ) -> None:
        needs(store, KeepsFeeds)
        assert isinstance(store, KeepsFeeds)
        await store.create_run(run_record("many"))
        await asyncio.gather(
            *(
                store.append_feed("many", "c", [str(n).encode()], now_ms=T0)
                for n in range(20)
            )
        )
        entries = await store.read_feed("many", "c", after=0, limit=100)
        assert [e.offset for e in entries] == list(range(1, 21))
        assert sorted(int(e.payload) for e in entries) == list(range(20))

    async def test_an_append_to_a_missing_run_raises_run_not_found(
        self, store: Store
    ) -> None:
        needs(store, KeepsFeeds)
        assert isinstance(store, KeepsFeeds)
        with must_raise(RunNotFound):
            await store.append_feed("ghost", "c", [b"x"], now_ms=T0)

    async def test_deleting_a_run_deletes_its_feed(self, store: Store) -> None:
        needs(store, KeepsFeeds, Maintenance)
        assert isinstance(store, KeepsFeeds)
        await store.create_run(run_record("gone"))
        await store.append_feed("gone", "c", [b"x"], now_ms=T0, once_key="t")
        lease = await store.acquire_lease("gone", owner="a", now_ms=T0, ttl_ms=1000)
        assert lease is not None
        await store.update_run(
            "gone",
            fence=lease.fence,
            update=RunUpdate(status="succeeded", now_ms=T0, output=b"r"),
        )
        assert (await store.delete_runs(["gone"])).runs == 1
        assert await store.read_feed("gone", "c", after=0, limit=10) == []
        await store.create_run(run_record("gone"))  # the same id again: a new feed
        assert (
            await store.append_feed("gone", "c", [b"y"], now_ms=T0, once_key="t") == 1
        )
