"""`Engine.delete_states`: single checkpoints go, every other one still loads."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import pytest

from resumable import Engine
from resumable._engine import packs
from resumable._engine.snapshots import Checkpoint
from resumable.stores.protocol import NO_CHUNKS, SnapshotRecord, Store
from resumable.stores.roles import pack_namespace


@pytest.fixture(autouse=True)
def small_packs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pack every 4 saves, at most 8 rows a pack: rows loose and in several packs."""
    monkeypatch.setattr(packs, "PACK_EVERY", 4)
    monkeypatch.setattr(packs, "KEEP_LOOSE", 2)
    monkeypatch.setattr(packs, "PACK_MIN", 2)
    monkeypatch.setattr(packs, "PACK_MAX", 8)


def state(i: int) -> dict[str, Any]:
    # a growing list: each save after the first is a delta against its parent
    return {"messages": [f"turn {n} " * 10 for n in range(i + 1)], "turn": i}


async def conversation(engine: Engine, thread: str, turns: int) -> list[Checkpoint]:
    return [await engine.save_state(thread, state(i)) for i in range(turns)]


async def assert_only(store: Store, thread: str, kept: dict[int, Checkpoint]) -> None:
    """A cold engine lists exactly `kept` and loads each one's state."""
    engine = Engine(store)
    history = await engine.state_history(thread)
    assert [c.checkpoint_id for c in history] == [
        kept[i].checkpoint_id for i in sorted(kept, reverse=True)
    ]
    for i, checkpoint in kept.items():
        loaded = await engine.load_state(thread, checkpoint_id=checkpoint.checkpoint_id)
        assert loaded == state(i), f"checkpoint {i}"


async def test_deleted_checkpoints_go_and_the_others_still_load(store: Store) -> None:
    engine = Engine(store)
    saved = await conversation(engine, "t", 30)
    held = await store.list_snapshots("t", namespace=pack_namespace(""))
    assert len(held) >= 3  # packed and loose rows both deleted below
    # a pack's oldest row, rows inside packs, a whole pack's rows, loose ones
    doomed = {0, 3, 4, 8, 9, 10, 11, 12, 13, 14, 15, 27, 29}
    ids = [saved[i].checkpoint_id for i in sorted(doomed)]
    assert await engine.delete_states("t", [*ids, "no-such-checkpoint"]) == len(doomed)
    kept = {i: c for i, c in enumerate(saved) if i not in doomed}
    await assert_only(store, "t", kept)
    assert await engine.delete_states("t", ids) == 0
    # saving on after the deletion extends the latest kept checkpoint
    await engine.save_state("t", state(30))
    assert await Engine(store).load_state("t") == state(30)


async def test_a_kept_delta_whose_base_goes_is_rewritten_whole(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(packs, "PACK_EVERY", 10**9)  # every row loose
    engine = Engine(store)
    saved = await conversation(engine, "t", 8)
    doomed = [saved[i].checkpoint_id for i in range(6)]
    assert await engine.delete_states("t", doomed) == 6
    await assert_only(store, "t", {6: saved[6], 7: saved[7]})
    assert (await store.delete_unreferenced_chunks(10_000)) >= 0


async def test_checkpoints_of_other_namespaces_are_named_by_pairs(store: Store) -> None:
    engine = Engine(store)
    first = await engine.save_state("t", {"a": 1})
    side = await engine.save_state("t", {"b": 2}, namespace="side")
    assert await engine.delete_states("t", [("side", side.checkpoint_id)]) == 1
    assert await engine.state_history("t", namespace=None) == [first]
    with pytest.raises(ValueError, match="packs"):
        await engine.delete_states("t", [(pack_namespace(""), "x")])


class _Crash(Exception):
    """The process died here."""


class CrashingStore:
    """Wraps a store; the `crash_at`-th write raises, as a process killed then."""

    def __init__(self, inner: Store, crash_at: int) -> None:
        self.inner, self.crash_at, self.writes = inner, crash_at, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _write(self) -> None:
        self.writes += 1
        if self.writes == self.crash_at:
            raise _Crash

    async def save_snapshot(
        self, snapshot: SnapshotRecord, *, chunks: Mapping[str, bytes] = NO_CHUNKS
    ) -> None:
        self._write()
        await self.inner.save_snapshot(snapshot, chunks=chunks)

    async def put_chunks(self, chunks: Mapping[str, bytes]) -> None:
        self._write()
        await self.inner.put_chunks(chunks)

    async def swap_snapshots(
        self,
        thread_id: str,
        old: Sequence[SnapshotRecord],
        *,
        by: SnapshotRecord | None,
        chunks: Mapping[str, bytes] = NO_CHUNKS,
        durable: bool = True,
    ) -> bool:
        self._write()
        return await self.inner.swap_snapshots(
            thread_id, old, by=by, chunks=chunks, durable=durable
        )

    async def delete_snapshots(
        self, thread_id: str, keys: Collection[tuple[str, str]]
    ) -> int:
        self._write()
        return await self.inner.delete_snapshots(thread_id, keys)


async def test_a_crash_at_any_write_of_a_deletion_loses_no_kept_checkpoint(
    store: Store,
) -> None:
    """Crash at the 1st, 2nd, ... store write of a deletion (a fresh thread each
    time): every kept checkpoint loads, and deleting again finishes the job."""
    doomed = {0, 5, 9, 12, 16, 17, 22, 28}
    crash_at = 1
    while True:
        thread = f"t{crash_at}"
        saved = await conversation(Engine(store), thread, 30)
        ids = [saved[i].checkpoint_id for i in sorted(doomed)]
        kept = {i: c for i, c in enumerate(saved) if i not in doomed}
        crashing = CrashingStore(store, crash_at)
        try:
            await Engine(crashing).delete_states(thread, ids)
        except _Crash:
            pass
        else:
            break
        for i, checkpoint in kept.items():
            loaded = await Engine(store).load_state(
                thread, checkpoint_id=checkpoint.checkpoint_id
            )
            assert loaded == state(i), f"crash at write {crash_at}, checkpoint {i}"
        await Engine(store).delete_states(thread, ids)
        await assert_only(store, thread, kept)
        crash_at += 1
    assert crash_at > 3  # the deletion took several writes, each crashed once
