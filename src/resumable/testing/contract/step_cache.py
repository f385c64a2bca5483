"""`StoreContract`'s step cache part: a store declaring `SupportsStepCache`.

A store without the capability skips these tests (a cached step then always
executes: `_engine/step_cache.py`).
"""

from __future__ import annotations

import dataclasses

from resumable.stores.kinds import JournalKind, seq_of
from resumable.stores.protocol import Maintenance, RunUpdate, Store
from resumable.stores.step_cache import CacheEntry, SupportsStepCache
from resumable.testing.contract.records import (
    T0,
    WEIRD_IDS,
    needs,
    run_record,
    step_record,
)

_KEYED = seq_of(JournalKind.BATCH_ITEM, 4242)  # a map_steps item


def _caching(store: Store) -> SupportsStepCache:
    if not isinstance(store, SupportsStepCache):
        import pytest  # the suite runs under pytest; resumable does not need it

        pytest.skip(f"{type(store).__name__} does not declare SupportsStepCache")
    return store


async def _recorded(store: Store, run_id: str, *seqs: int) -> int:
    """Create `run_id` with steps at `seqs`; the fence of its lease."""
    await store.create_run(run_record(run_id))
    lease = await store.acquire_lease(run_id, owner="w", now_ms=T0, ttl_ms=1000)
    assert lease is not None
    for seq in seqs:
        await store.commit_step(
            step_record(run_id, seq, output=b"v%d" % seq, usage=b"u"), fence=lease.fence
        )
    return lease.fence


def _entry(key: str, run_id: str, seq: int, **fields: object) -> CacheEntry:
    values: dict[str, object] = {
        "key": key,
        "step": "summarize",
        "workflow": "wf",
        "run_id": run_id,
        "seq": seq,
        "created_at_ms": T0,
        **fields,
    }
    return CacheEntry(**values)  # type: ignore[arg-type]


class StepCacheContract:
    """Behaviour of `SupportsStepCache` (see `StoreContract`)."""

    async def test_a_cache_entry_finds_the_row_it_names(self, store: Store) -> None:
        cache = _caching(store)
        await _recorded(store, "src", 1, 2, _KEYED)
        assert await cache.lookup_cache("k1", now_ms=T0) is None
        entry = _entry("k1", "src", 2)
        await cache.put_cache_entries([entry])
        found = await cache.lookup_cache("k1", now_ms=T0 + 5)
        assert found is not None
        assert found[0] == entry
        assert (found[1].run_id, found[1].seq, found[1].output) == ("src", 2, b"v2")
        item = _entry("k2", "src", _KEYED)
        await cache.put_cache_entries([item])
        found = await cache.lookup_cache("k2", now_ms=T0)
        assert found is not None
        assert found[1].seq == _KEYED

    async def test_the_last_entry_of_a_key_wins(self, store: Store) -> None:
        cache = _caching(store)
        await _recorded(store, "a", 1)
        await _recorded(store, "b", 1)
        await cache.put_cache_entries([_entry("k", "a", 1)])
        await cache.put_cache_entries([_entry("k", "b", 1, created_at_ms=T0 + 1)])
        found = await cache.lookup_cache("k", now_ms=T0 + 2)
        assert found is not None
        assert (found[0].run_id, found[1].run_id) == ("b", "b")

    async def test_an_expired_entry_or_one_whose_row_is_gone_is_a_miss(
        self, store: Store
    ) -> None:
        cache = _caching(store)
        await _recorded(store, "src", 1)
        await cache.put_cache_entries([_entry("ttl", "src", 1, expires_at_ms=T0 + 100)])
        assert await cache.lookup_cache("ttl", now_ms=T0 + 99) is not None
        assert await cache.lookup_cache("ttl", now_ms=T0 + 100) is None
        await cache.put_cache_entries([_entry("gone", "src", 7)])  # no row at seq 7
        assert await cache.lookup_cache("gone", now_ms=T0) is None
        await cache.put_cache_entries([_entry("nothing", "no-such-run", 1)])
        assert await cache.lookup_cache("nothing", now_ms=T0) is None

    async def test_clearing_removes_the_entries_of_a_step_or_a_workflow(
        self, store: Store
    ) -> None:
        cache = _caching(store)
        weird = WEIRD_IDS[-1]
        await _recorded(store, weird, 1)
        entries = [
            _entry("a", weird, 1),
            _entry("b", weird, 1, step=weird),
            _entry("c", weird, 1, workflow=weird),
            _entry("d", weird, 1, step=weird, workflow=weird),
        ]
        await cache.put_cache_entries(entries)
        await cache.put_cache_entries([])  # nothing to write: no error
        found = await cache.lookup_cache("d", now_ms=T0)
        assert found is not None
        assert found[0] == entries[3]
        assert await cache.clear_cache(step=weird, workflow=weird) == 1
        assert await cache.clear_cache(step=weird) == 1
        assert await cache.clear_cache(workflow=weird) == 1
        assert await cache.lookup_cache("a", now_ms=T0) is not None
        assert await cache.clear_cache() == 1
        assert await cache.clear_cache() == 0
        for entry in entries:
            assert await cache.lookup_cache(entry.key, now_ms=T0) is None
        assert dataclasses.replace(entries[0], expires_at_ms=None).is_live(T0)

    async def test_deleting_a_run_deletes_the_entries_naming_its_rows(
        self, store: Store
    ) -> None:
        cache = _caching(store)
        needs(store, Maintenance)
        assert isinstance(store, Maintenance)
        fence = await _recorded(store, "gone", 1, 2)
        await _recorded(store, "kept", 1)
        await cache.put_cache_entries(
            [_entry("a", "gone", 1), _entry("b", "gone", 2), _entry("c", "kept", 1)]
        )
        # a key the run recorded and a later run took over stays, naming the later run
        await cache.put_cache_entries([_entry("t", "gone", 1)])
        await cache.put_cache_entries([_entry("t", "kept", 1)])
        await store.update_run(
            "gone",
            fence=fence,
            update=RunUpdate(status="succeeded", now_ms=T0, output=b"r"),
        )
        assert (await store.delete_runs(["gone"])).runs == 1
        assert await cache.lookup_cache("a", now_ms=T0) is None
        found = await cache.lookup_cache("t", now_ms=T0)
        assert found is not None
        assert found[0].run_id == "kept"
        # counted in the store: only the entries naming "kept" are left
        assert await cache.clear_cache() == 2
