"""Packing a thread's older snapshots: nothing a reader sees changes."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from resumable import CorruptCheckpointError, Engine, StoreError
from resumable._engine import packs
from resumable._engine.snapshots import Checkpoint
from resumable.serde import KeyRing
from resumable.stores.protocol import Store
from resumable.stores.roles import pack_namespace


@pytest.fixture(autouse=True)
def small_packs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pack every 4 saves, at most 8 rows a pack: many packs, merges and new ones."""
    monkeypatch.setattr(packs, "PACK_EVERY", 4)
    monkeypatch.setattr(packs, "KEEP_LOOSE", 2)
    monkeypatch.setattr(packs, "PACK_MIN", 2)
    monkeypatch.setattr(packs, "PACK_MAX", 8)


def turn(i: int) -> dict[str, str]:
    return {"role": "user" if i % 2 else "assistant", "content": f"turn {i} " * 20}


async def conversation(engine: Engine, thread: str, turns: int) -> list[Checkpoint]:
    """Save a growing conversation once per turn; the checkpoints, oldest first."""
    saved, messages = [], []
    for i in range(turns):
        messages.append(turn(i))
        saved.append(
            await engine.save_state(
                thread,
                {"messages": messages, "turn": i},
                label=f"turn {i}" if i % 3 == 0 else None,
                metadata={"turn": i} if i % 2 == 0 else None,
            )
        )
    return saved


def expected_state(i: int) -> dict[str, object]:
    return {"messages": [turn(n) for n in range(i + 1)], "turn": i}


async def loose_and_packed(store: Store, thread: str) -> tuple[int, int]:
    loose = await store.list_snapshots(thread)
    held = await store.list_snapshots(thread, namespace=pack_namespace(""))
    return len(loose), len(held)


async def test_packed_checkpoints_read_back_exactly_as_saved(store: Store) -> None:
    saved = await conversation(Engine(store), "t", 30)
    loose, held = await loose_and_packed(store, "t")
    assert held >= 3  # several full packs of 8, and the newest one filling up
    assert loose <= packs.KEEP_LOOSE + packs.PACK_EVERY
    engine = Engine(store)  # cold: no cached shape or pack
    assert await engine.state_history("t") == saved[::-1]
    assert await engine.state_history("t", namespace=None) == saved[::-1]
    middle = saved[17].checkpoint_id
    assert await engine.state_history("t", before=middle, limit=5) == saved[12:17][::-1]
    for i, checkpoint in enumerate(saved):
        loaded = await engine.load_checkpoint(
            "t", checkpoint_id=checkpoint.checkpoint_id
        )
        assert loaded == (checkpoint, expected_state(i))
    assert await engine.load_state("t") == expected_state(29)


async def test_saving_on_after_a_cold_start_continues_the_packed_thread(
    store: Store,
) -> None:
    await conversation(Engine(store), "t", 21)
    engine = Engine(store)
    latest = await engine.load_state("t")
    latest["messages"].append(turn(21))
    await engine.save_state("t", {"messages": latest["messages"], "turn": 21})
    assert await Engine(store).load_state("t") == expected_state(21)
    # a branch from a packed checkpoint
    old = (await engine.state_history("t"))[-3]
    await engine.save_state("t", {"branch": True}, parent=old.checkpoint_id)
    assert await Engine(store).load_state("t") == {"branch": True}


async def test_a_pack_read_from_the_store_is_extended_to_read_back_exactly(
    store: Store,
) -> None:
    """A cold engine's pack events extend the newest pack as it reads it: its rows
    kept opened from that read, not from the saves that wrote them."""
    saved = await conversation(Engine(store), "t", 13)  # packs of rows 0-7 and 8-9
    engine = Engine(store)  # cold: it opens the newest pack from the store
    state = await engine.load_state("t")
    for i in range(13, 13 + 2 * packs.PACK_EVERY):
        state["messages"].append(turn(i))
        state["turn"] = i
        saved.append(await engine.save_state("t", state))
    held = await store.list_snapshots("t", namespace=pack_namespace(""))
    extended = {pack.checkpoint_id: pack.label for pack in held}
    assert extended[saved[8].checkpoint_id] == saved[15].checkpoint_id  # rows 8-15
    reader = Engine(store)
    for i, checkpoint in enumerate(saved):
        loaded = await reader.load_checkpoint(
            "t", checkpoint_id=checkpoint.checkpoint_id
        )
        assert loaded is not None
        assert loaded[0] == checkpoint
        assert loaded[1]["messages"] == expected_state(i)["messages"]


async def test_a_pack_keeps_its_chunks_until_the_thread_is_deleted(
    store: Store,
) -> None:
    engine = Engine(store)
    saved = await conversation(engine, "t", 20)
    assert (await loose_and_packed(store, "t"))[1] > 0
    assert await store.delete_unreferenced_chunks(10_000) == 0
    for i, checkpoint in enumerate(saved):
        value = await Engine(store).load_state(
            "t", checkpoint_id=checkpoint.checkpoint_id
        )
        assert value == expected_state(i)
    await engine.delete_thread("t")
    assert await store.delete_unreferenced_chunks(10_000) > 0
    assert await store.list_snapshots("t", namespace=None) == []


async def test_engines_packing_one_thread_at_once_lose_nothing(store: Store) -> None:
    writer = Engine(store)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(packs, "PACK_EVERY", 10**9)  # nothing packed while saving
        saved = await conversation(writer, "t", 40)
    packers = [packs.Packs(store, Engine(store).serde) for _ in range(3)]
    await asyncio.gather(*(packer.pack("t", "") for packer in packers))
    loose, held = await loose_and_packed(store, "t")
    assert (loose, held) == (packs.KEEP_LOOSE, 5)  # 38 rows: 4 packs of 8, one of 6
    assert await Engine(store).state_history("t") == saved[::-1]


async def test_a_damaged_pack_is_reported_with_its_thread_and_checkpoint(
    store: Store,
) -> None:
    await conversation(Engine(store), "t", 12)
    (pack, *_) = await store.list_snapshots("t", namespace=pack_namespace(""))
    damaged = bytearray(pack.manifest)
    damaged[-1] ^= 0xFF
    await store.save_snapshot(dataclasses.replace(pack, manifest=bytes(damaged)))
    with pytest.raises(CorruptCheckpointError) as raised:
        await Engine(store).load_state("t", checkpoint_id=pack.checkpoint_id)
    assert "thread 't'" in str(raised.value)
    assert repr(pack.checkpoint_id) in str(raised.value)


async def test_rekey_rewrites_packs_so_the_old_key_can_go(store: Store) -> None:
    old, new = bytes(range(32)), bytes(range(1, 33))
    first = Engine(store, encryption_key=KeyRing({"old": old}, current="old"))
    saved = await conversation(first, "t", 20)
    both = KeyRing({"old": old, "new": new}, current="new")
    await Engine(store, encryption_key=both).rekey()
    engine = Engine(store, encryption_key=KeyRing({"new": new}, current="new"))
    assert await engine.state_history("t") == saved[::-1]
    for i, checkpoint in enumerate(saved):
        value = await engine.load_state("t", checkpoint_id=checkpoint.checkpoint_id)
        assert value == expected_state(i)


async def test_the_pack_namespaces_are_not_for_saving(engine: Engine) -> None:
    with pytest.raises(ValueError, match="':pack:'"):
        await engine.save_state("t", {"x": 1}, namespace=pack_namespace("x"))


async def test_a_failed_pack_leaves_the_saves_done_and_the_rows_loose(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def refuse(*args: object, **kwargs: object) -> bool:
        raise StoreError(store="test", detail="the store went away mid-pack")

    monkeypatch.setattr(store, "swap_snapshots", refuse)
    saved = await conversation(Engine(store), "t", 10)
    assert await loose_and_packed(store, "t") == (10, 0)
    assert await Engine(store).state_history("t") == saved[::-1]
    assert "thread 't' namespace '': packing older snapshots failed" in caplog.text
    assert "the store went away mid-pack" in caplog.text
