"""A third-party snapshot store without packing saves, lists and deletes states in full.

`SnapshotsOnly` stands for a store written outside this project that adds the
`SnapshotStore` methods to a run store, and does not declare `PacksSnapshots`
(no `swap_snapshots`). The engine then keeps every snapshot a loose row.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Mapping
from typing import Any

import pytest
from test_run_store_only import RunsOnly

from resumable import CapabilityMissing, Engine
from resumable._engine import packs
from resumable._engine.snapshots import Checkpoint
from resumable.stores import MemoryStore
from resumable.stores.capabilities import Capabilities
from resumable.stores.protocol import (
    NO_CHUNKS,
    PacksSnapshots,
    SnapshotRecord,
    SnapshotStore,
    ThreadRecord,
)
from resumable.testing.contract.snapshots import SnapshotStoreContract


class SnapshotsOnly(RunsOnly):
    """RunStore and SnapshotStore, and no optional capability."""

    def __init__(self, rows: MemoryStore | None = None) -> None:
        super().__init__(rows)
        self.url = "snapshots-only://"

    async def put_chunks(self, chunks: Mapping[str, bytes]) -> None:
        await self._rows.put_chunks(chunks)

    async def get_chunks(self, hashes: Collection[str]) -> dict[str, bytes]:
        return await self._rows.get_chunks(hashes)

    async def save_snapshot(
        self, snapshot: SnapshotRecord, *, chunks: Mapping[str, bytes] = NO_CHUNKS
    ) -> None:
        await self._rows.save_snapshot(snapshot, chunks=chunks)

    async def load_snapshot(
        self, thread_id: str, *, namespace: str = "", checkpoint_id: str | None = None
    ) -> SnapshotRecord | None:
        return await self._rows.load_snapshot(
            thread_id, namespace=namespace, checkpoint_id=checkpoint_id
        )

    async def list_snapshots(
        self,
        thread_id: str,
        *,
        namespace: str | None = "",
        before: str | None = None,
        limit: int | None = None,
    ) -> list[SnapshotRecord]:
        return await self._rows.list_snapshots(
            thread_id, namespace=namespace, before=before, limit=limit
        )

    async def delete_snapshots(
        self, thread_id: str, keys: Collection[tuple[str, str]]
    ) -> int:
        return await self._rows.delete_snapshots(thread_id, keys)

    async def delete_thread(self, thread_id: str) -> int:
        return await self._rows.delete_thread(thread_id)

    async def list_threads(
        self,
        *,
        prefix: str | None = None,
        after: tuple[int, str] | None = None,
        limit: int = 100,
    ) -> list[ThreadRecord]:
        return await self._rows.list_threads(prefix=prefix, after=after, limit=limit)

    async def delete_unreferenced_chunks(self, limit: int) -> int:
        return await self._rows.delete_unreferenced_chunks(limit)


@pytest.fixture(autouse=True)
def small_packs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pack every 4 saves: a store that packs would hold packs after a few saves."""
    monkeypatch.setattr(packs, "PACK_EVERY", 4)
    monkeypatch.setattr(packs, "KEEP_LOOSE", 2)
    monkeypatch.setattr(packs, "PACK_MIN", 2)
    monkeypatch.setattr(packs, "PACK_MAX", 8)


def state(i: int) -> dict[str, Any]:
    # a growing list: each save after the first is a delta against its parent
    return {"messages": [f"turn {n} " * 10 for n in range(i + 1)], "turn": i}


async def conversation(engine: Engine, turns: int) -> list[Checkpoint]:
    return [await engine.save_state("t", state(i)) for i in range(turns)]


def test_it_is_a_snapshot_store_that_does_not_pack() -> None:
    store = SnapshotsOnly()
    assert isinstance(store, SnapshotStore)
    assert not isinstance(store, PacksSnapshots)
    found = Capabilities.of(store)
    assert found.snapshots
    assert not found.packs
    assert found.names == ("SnapshotStore",)
    assert Capabilities.of(MemoryStore()).packs


async def test_saves_history_and_deletes_work_with_every_snapshot_loose() -> None:
    store = SnapshotsOnly()
    engine = Engine(store)
    saved = await conversation(engine, 30)
    # nothing was packed: every snapshot is a loose row of its own namespace
    every = await store.list_snapshots("t", namespace=None)
    assert len(every) == 30
    assert {record.namespace for record in every} == {""}
    cold = Engine(store)
    assert await cold.state_history("t") == saved[::-1]
    assert await cold.load_state("t") == state(29)
    # deleting bases of deltas: the kept ones are rewritten whole and still load
    doomed = {0, 1, 5, 12, 13, 29}
    ids = [saved[i].checkpoint_id for i in sorted(doomed)]
    assert await cold.delete_states("t", ids) == len(doomed)
    kept = [c for i, c in enumerate(saved) if i not in doomed]
    again = Engine(store)
    assert await again.state_history("t") == kept[::-1]
    for i, checkpoint in enumerate(saved):
        if i not in doomed:
            assert await again.load_state(
                "t", checkpoint_id=checkpoint.checkpoint_id
            ) == state(i)
    await again.save_state("t", state(30))
    assert await Engine(store).load_state("t") == state(30)


async def test_a_pack_it_cannot_rewrite_names_the_missing_capability() -> None:
    rows = MemoryStore()
    saved = await conversation(Engine(rows), 12)  # the memory store packs them
    assert any(
        r.namespace != "" for r in await rows.list_snapshots("t", namespace=None)
    )
    engine = Engine(SnapshotsOnly(rows))  # the same rows, through a store that does not
    assert not engine.capabilities.packs
    assert await engine.load_state("t") == state(11)  # packs still read
    with pytest.raises(CapabilityMissing, match="PacksSnapshots") as missing:
        await engine.delete_states("t", [saved[0].checkpoint_id])  # packed: a swap
    assert missing.value.store == "snapshots-only://"
    assert await engine.load_state("t", checkpoint_id=saved[0].checkpoint_id) == state(
        0
    )


class TestASnapshotStoreWithoutPackingPassesTheContract(SnapshotStoreContract):
    """The snapshot half of the contract runs; the packing tests skip."""

    @pytest.fixture
    async def store(self) -> AsyncIterator[SnapshotsOnly]:
        store = SnapshotsOnly()
        yield store
        await store.close()
