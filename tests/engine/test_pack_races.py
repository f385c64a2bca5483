"""Two engines on one store, packing and deleting one thread at once: nothing is lost.

Each test forces one interleaving: a store wrapper stops an engine just before
its next `swap_snapshots` (waiting on an event, never a timer), the other engine
does its whole write, then the first goes on. Its swap names the rows as it read
them, so it is refused and (a delete) read again, or (a packer) given up.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from conftest import store_url
from resumable import Engine
from resumable._engine import packs
from resumable._engine.snapshots import Checkpoint
from resumable.stores import create_store
from resumable.stores.protocol import NO_CHUNKS, SnapshotRecord, Store
from resumable.stores.roles import SnapshotRole, pack_namespace

PAIRED = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]


@pytest.fixture(autouse=True)
def small_packs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pack every 4 saves, at most 8 rows a pack."""
    monkeypatch.setattr(packs, "PACK_EVERY", 4)
    monkeypatch.setattr(packs, "KEEP_LOOSE", 2)
    monkeypatch.setattr(packs, "PACK_MIN", 2)
    monkeypatch.setattr(packs, "PACK_MAX", 8)


@pytest.fixture(params=PAIRED)
async def pair(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Store, Store]]:
    """Two store objects on one database, as two processes would hold them."""
    url = store_url(str(request.param), tmp_path)
    first, second = create_store(url), create_store(url)
    try:
        yield first, second
    finally:
        drop = getattr(first, "drop", None)
        if drop is not None:
            await drop()
        await first.close()
        await second.close()


class Paused:
    """A store that, once `hold` is set, stops before its next swap of a pack until `go`."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.hold = False
        self.arrived, self.go = asyncio.Event(), asyncio.Event()
        self.swaps: list[bool] = []
        """What the swaps since the held one returned, the held one first."""

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
        if self.hold and any(r.role is SnapshotRole.PACK for r in old):
            self.hold = False
            self.swaps.clear()  # from here on
            self.arrived.set()
            await self.go.wait()
        done = await self.inner.swap_snapshots(
            thread_id, old, by=by, chunks=chunks, durable=durable
        )
        self.swaps.append(done)
        return done


def state(i: int) -> dict[str, Any]:
    # a growing list: each save after the first is a delta against its parent
    return {"messages": [f"turn {n} " * 10 for n in range(i + 1)], "turn": i}


async def save(engine: Engine, turns: range) -> list[Checkpoint]:
    return [await engine.save_state("t", state(i)) for i in turns]


async def assert_only(store: Store, saved: list[Checkpoint], doomed: set[int]) -> None:
    """A cold engine lists every saved checkpoint but the doomed, and loads each."""
    engine = Engine(store)
    kept = {i: c for i, c in enumerate(saved) if i not in doomed}
    history = await engine.state_history("t")
    assert [c.checkpoint_id for c in history] == [
        kept[i].checkpoint_id for i in sorted(kept, reverse=True)
    ]
    for i, checkpoint in kept.items():
        loaded = await engine.load_state("t", checkpoint_id=checkpoint.checkpoint_id)
        assert loaded == state(i), f"checkpoint {i}"


async def packed_ids(store: Store, engine: Engine) -> list[str]:
    reader = packs.Packs(store, engine.serde)
    held = await store.list_snapshots("t", namespace=pack_namespace(""))
    return sorted(r.checkpoint_id for p in held for r in reader.rows(p, ""))


async def test_a_pack_changed_by_a_delete_while_a_packer_extends_it_is_kept(
    pair: tuple[Store, Store],
) -> None:
    """Packer reads, delete_states rewrites the pack, packer swaps: refused."""
    paused = Paused(pair[0])
    packer, deleter = Engine(cast("Store", paused)), Engine(pair[1])
    saved = await save(packer, range(10))  # a pack of 0..5, 6..9 loose
    assert await packed_ids(pair[0], packer) == [c.checkpoint_id for c in saved[:6]]
    paused.hold = True  # the 12th save packs 6 and 7 into that pack: stop there
    saving = asyncio.create_task(save(packer, range(10, 12)))
    await paused.arrived.wait()
    doomed = {3}  # a row of the pack being extended
    ids = [saved[i].checkpoint_id for i in sorted(doomed)]
    assert await deleter.delete_states("t", ids) == 1
    paused.go.set()
    saved += await saving
    assert paused.swaps[0] is False  # the packer's swap saw the pack had changed
    await assert_only(pair[1], saved, doomed)


async def test_a_pack_extended_while_a_delete_rewrites_it_keeps_the_moved_rows(
    pair: tuple[Store, Store],
) -> None:
    """delete_states reads, a packer extends the pack, delete swaps: it reads again."""
    paused = Paused(pair[1])
    packer, deleter = Engine(pair[0]), Engine(cast("Store", paused))
    saved = await save(packer, range(10))  # a pack of 0..5, 6..9 loose
    paused.hold = True
    deleting = asyncio.create_task(deleter.delete_states("t", [saved[3].checkpoint_id]))
    await paused.arrived.wait()  # its rewrite of the pack is due
    saved += await save(packer, range(10, 12))  # 6..9 move into packs
    assert await packed_ids(pair[0], packer) == [c.checkpoint_id for c in saved[:10]]
    paused.go.set()
    assert await deleting == 1
    assert False in paused.swaps  # refused once, then done on a fresh read
    await assert_only(pair[0], saved, {3})


async def test_two_packers_extending_one_pack_at_once_lose_no_row(
    pair: tuple[Store, Store],
) -> None:
    paused = Paused(pair[0])
    saver = Engine(pair[1])
    saved = await save(saver, range(10))  # a pack of 0..5, 6..9 loose
    first = packs.Packs(cast("Store", paused), saver.serde)
    second = packs.Packs(pair[1], saver.serde)
    paused.hold = True
    packing = asyncio.create_task(first.pack("t", ""))
    await paused.arrived.wait()  # it read the pack and 6, 7 to add
    assert await second.pack("t", "") == 2
    paused.go.set()
    assert await packing == 0  # refused: the pack is no longer what it read
    assert paused.swaps == [False]
    assert await packed_ids(pair[0], saver) == [c.checkpoint_id for c in saved[:8]]
    await assert_only(pair[0], saved, set())
