"""A chunk collection between a rewrite's read and its swap loses no kept checkpoint.

`delete_states` and archiving rewrite a kept snapshot as a full one, which names
new chunks (its lists folded into new segments). They go in with the swap
(`swap_snapshots(..., chunks=...)`), atomic with `delete_unreferenced_chunks`: a
collection running just before the swap (another process's `resumable gc`) finds
them not yet stored, never stored and unreferenced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from resumable import Engine
from resumable._engine import packs
from resumable._engine.snapshots import Checkpoint
from resumable.stores.blobs import FileBlobs
from resumable.stores.offload import OffloadStore
from resumable.stores.protocol import NO_CHUNKS, SnapshotRecord, Store
from resumable.stores.roles import pack_namespace
from resumable.stores.stubs import SupportsThreadArchive
from resumable.testing import FakeClock


class CollectingBeforeSwaps:
    """Wraps a store: each `swap_snapshots` runs a chunk collection first.

    After each swap that happened it notes the chunks the swapped-in record names
    that the store does not hold (`missing`): a later rewrite storing the same
    chunk again would otherwise hide the damage from the loads at the end.
    """

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.swaps = 0
        self.missing: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def swap_snapshots(
        self,
        thread_id: str,
        old: Sequence[SnapshotRecord],
        *,
        by: SnapshotRecord | None,
        chunks: Mapping[str, bytes] = NO_CHUNKS,
        durable: bool = True,
    ) -> bool:
        self.swaps += 1
        await self.inner.delete_unreferenced_chunks(100_000)
        done = await self.inner.swap_snapshots(
            thread_id, old, by=by, chunks=chunks, durable=durable
        )
        if done and by is not None:
            held = await self.inner.get_chunks(by.chunk_refs)
            self.missing += [ref for ref in by.chunk_refs if ref not in held]
        return done


def state(i: int) -> dict[str, Any]:
    # 55 + i messages: from i = 9 on, a full manifest folds messages 32..63 into a
    # segment chunk that no delta manifest names, so a rewrite stores it anew
    return {"messages": [f"message {n}" for n in range(55 + i)], "turn": i}


async def conversation(engine: Engine, thread: str, turns: int) -> list[Checkpoint]:
    return [await engine.save_state(thread, state(i)) for i in range(turns)]


async def assert_loads(store: Store, thread: str, kept: dict[int, Checkpoint]) -> None:
    """A cold engine loads every kept checkpoint, before and after a collection."""
    for _ in range(2):
        engine = Engine(store)
        for i, checkpoint in kept.items():
            loaded = await engine.load_state(
                thread, checkpoint_id=checkpoint.checkpoint_id
            )
            assert loaded == state(i), f"checkpoint {i}"
        await store.delete_unreferenced_chunks(100_000)


async def test_loose_checkpoints_rewritten_whole_survive_a_collection_before_the_swap(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(packs, "PACK_EVERY", 10**9)  # every row loose
    saved = await conversation(Engine(store), "t", 10)
    racing = CollectingBeforeSwaps(store)
    # the full base goes: every later one is a delta through it, rewritten whole
    assert await Engine(racing).delete_states("t", [saved[0].checkpoint_id]) == 1
    assert racing.swaps >= 9
    assert racing.missing == []
    await assert_loads(store, "t", {i: c for i, c in enumerate(saved) if i > 0})


async def test_packed_checkpoints_rewritten_whole_survive_a_collection_before_the_swap(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(packs, "PACK_EVERY", 4)
    monkeypatch.setattr(packs, "KEEP_LOOSE", 2)
    monkeypatch.setattr(packs, "PACK_MIN", 2)
    monkeypatch.setattr(packs, "PACK_MAX", 8)
    saved = await conversation(Engine(store), "t", 14)
    assert await store.list_snapshots("t", namespace=pack_namespace(""))
    racing = CollectingBeforeSwaps(store)
    assert await Engine(racing).delete_states("t", [saved[0].checkpoint_id]) == 1
    assert racing.swaps >= 1
    assert racing.missing == []
    await assert_loads(store, "t", {i: c for i, c in enumerate(saved) if i > 0})


async def test_the_newest_checkpoint_made_whole_for_an_archive_survives_a_collection(
    store: Store, tmp_path: Path, clock: FakeClock
) -> None:
    if not isinstance(store, SupportsThreadArchive):
        pytest.skip("the store does not archive threads")
    saved = await conversation(Engine(store, clock=clock), "t", 10)
    clock.advance(60)
    racing = CollectingBeforeSwaps(store)
    archiving = OffloadStore(racing, FileBlobs(tmp_path / "objects"))
    engine = Engine(archiving, clock=clock)
    done = await engine.archive(older_than=timedelta(seconds=30))
    assert [(a.kind, a.name) for a in done] == [("thread", "t")]
    assert racing.swaps >= 1
    assert racing.missing == []
    live = await store.list_snapshots("t", namespace=None)
    assert [r.checkpoint_id for r in live] == [saved[-1].checkpoint_id]
    await assert_loads(store, "t", {9: saved[-1]})
