"""The leaf memo: the fast path of snapshot saves, checked against the plain path.

`SnapshotCodec(memo=False)` encodes every leaf at every save; the memo skips the
leaves an earlier save met unchanged. The first test drives both through the same
saves, in-place changes and loads, and compares every byte handed to the store.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from typing import Any

import pydantic
import pytest

from resumable import Engine
from resumable._engine import snapshot_codec
from resumable._engine.leaf_memo import LeafMemo, _Memo, _Proof
from resumable._engine.snapshot_codec import SnapshotCodec
from resumable._engine.snapshots import Snapshots
from resumable.serde import Serde, TypeRegistry
from resumable.stores.memory import MemoryStore
from resumable.stores.protocol import NO_CHUNKS, SnapshotRecord, Store


class Level(enum.IntEnum):
    ONE = 1


class Draft(pydantic.BaseModel):
    text: str
    tags: list[str]


class Final(Draft):
    """A subclass a model can be switched to in place (`__class__ = Final`)."""


@dataclasses.dataclass(slots=True)
class Slotted:
    text: str


@dataclasses.dataclass
class Loose(Slotted):
    """Has a __dict__, yet `text` lives in its parent's slot."""

    tags: list[str]


TYPES = (Level, Draft, Final, Slotted, Loose)


def message(i: int) -> dict[str, Any]:
    return {"role": "user" if i % 2 else "assistant", "content": f"turn {i} " * 30}


class RecordingStore(MemoryStore):
    """A MemoryStore noting every snapshot and chunk handed to it."""

    def __init__(self) -> None:
        super().__init__()
        self.saved: list[tuple[SnapshotRecord, dict[str, bytes]]] = []

    async def save_snapshot(
        self, snapshot: SnapshotRecord, *, chunks: Mapping[str, bytes] = NO_CHUNKS
    ) -> None:
        self.saved.append((snapshot, dict(chunks)))
        await super().save_snapshot(snapshot, chunks=chunks)


State = dict[str, Any]
Change = Callable[[State], object]


def _set(path: tuple[Any, ...], value: Any) -> Change:
    def change(state: State) -> None:
        target: Any = state
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


def _attr(path: tuple[Any, ...], name: str, value: Any) -> Change:
    def change(state: State) -> None:
        target: Any = state
        for key in path:
            target = target[key]
        setattr(target, name, value)

    return change


def _loose_unset(i: int) -> Loose:
    loose = Loose.__new__(Loose)  # `text`'s slot never set: reading it raises
    loose.tags = [f"tag {i}"] * 20
    return loose


def _start() -> State:
    return {
        "messages": [message(i) for i in range(40)],
        "drafts": [Draft(text=f"draft {i} " * 10, tags=["a"]) for i in range(12)],
        "notes": [Loose(text="note " * 10, tags=["t"]), _loose_unset(1)],
        "blobs": [{"n": 1, "blob": bytes(30), "text": f"{i} " * 30} for i in range(20)],
        "flags": [1, True, None, "a", 0.0],
        "small": {"a": 1},
    }


# each a change made in place to the live state, followed by a save
CHANGES: list[Change] = [
    lambda s: s["messages"].append(message(40)),
    lambda s: s["messages"][3].update(content="edited in place " * 10),
    lambda s: s["messages"][5].update(extra=[1]),
    lambda s: s["messages"][6].update(n=1),
    lambda s: s["messages"][6].update(n=True),
    lambda s: s["messages"][6].update(n=1.0),
    lambda s: s["messages"][6].update(n=Level.ONE),
    lambda s: s["messages"][7].update(content=bytearray(b"x" * 100)),
    lambda s: s["messages"][8].update(content=("x" * 100,)),
    lambda s: s["messages"].__setitem__(slice(3, 5), s["messages"][4:2:-1]),
    _attr(("drafts", 0), "text", "rewritten " * 10),
    lambda s: s["drafts"][1].tags.append("b"),
    _attr(("drafts", 2), "__class__", Final),
    lambda s: s["drafts"][3].__pydantic_fields_set__.discard("tags"),
    lambda s: s["drafts"][3].__pydantic_fields_set__.add("tags"),
    lambda s: s["drafts"][4].__pydantic_fields_set__.discard("tags"),
    _attr(
        ("drafts", 4),
        "__pydantic_fields_set__",
        frozenset({"text"}),
    ),
    _attr(("notes", 0), "text", "slot changed " * 10),
    _attr(("notes", 1), "text", "slot now set"),
    lambda s: s["blobs"][11].update(blob=bytearray(30)),
    lambda s: s["blobs"][0].update(n=True),
    _set(("flags", 0), 1.0),
    _set(("flags", 4), -0.0),
    _set(("flags", 2), False),
    lambda s: s["small"].update(a=True),
    lambda s: s["messages"].extend(message(i) for i in range(41, 110)),
    lambda s: s.pop("small"),
]


async def stored_bytes(memo: bool) -> list[tuple[SnapshotRecord, dict[str, bytes]]]:
    """Every record and chunk handed to the store by saves of CHANGES, in order."""
    store = RecordingStore()
    registry = TypeRegistry()
    registry.register(*TYPES)
    snapshots = Snapshots(store, Serde(registry), memo=memo)
    state, parent, n = _start(), None, 0

    async def save() -> None:
        nonlocal parent, n
        n += 1
        record = await snapshots.save(
            "t", state, now_ms=n, parent_id=parent, checkpoint_id=f"{n:06d}"
        )
        parent = record.checkpoint_id

    await save()
    for change in CHANGES:
        change(state)
        await save()
        await save()  # saved again unchanged
    for _ in range(2):  # a chat turn: the latest state, loaded as new objects
        found = await snapshots.load("t")
        assert found is not None
        state = found[1]
        state["messages"].append(message(n))
        state["drafts"][0].tags.append("after the load")
        await save()
    return store.saved


async def test_the_memo_and_the_plain_path_store_the_same_bytes() -> None:
    plain = await stored_bytes(memo=False)
    memo = await stored_bytes(memo=True)
    assert len(plain) == 1 + 2 * len(CHANGES) + 2
    assert [record for record, _ in memo] == [record for record, _ in plain]
    assert [chunks for _, chunks in memo] == [chunks for _, chunks in plain]


class Counted:
    """Counts the codec's encodings of state leaves (what the memo saves)."""

    def __init__(self, engine: Engine) -> None:
        self.leaves = 0
        codec = engine.serde.codec
        real_encode = codec.encode

        def encode(value: object, *, root: str = "value") -> bytes:
            if root == "state":
                self.leaves += 1
            return real_encode(value, root=root)

        codec.encode = encode  # type: ignore[method-assign]  # spy on the real codec


async def test_saving_again_encodes_only_the_new_leaves(store: Store) -> None:
    engine = Engine(store)
    counted = Counted(engine)
    messages = [message(i) for i in range(30)]
    await engine.save_state("conv", {"messages": messages})
    assert counted.leaves == 30
    messages.append(message(30))
    await engine.save_state("conv", {"messages": messages})
    assert counted.leaves == 31
    assert await Engine(store).load_state("conv") == {"messages": messages}


async def test_saving_what_was_loaded_encodes_only_the_new_leaves(store: Store) -> None:
    """A chat turn: load the thread in a new process, add a message, save."""
    await Engine(store, types=TYPES).save_state(
        "conv",
        {"messages": [Draft(text=f"turn {i}", tags=["t"] * 20) for i in range(30)]},
    )
    engine = Engine(store, types=TYPES)  # nothing of the thread in its caches
    counted = Counted(engine)
    state = await engine.load_state("conv")
    state["messages"].append(Draft(text="turn 30", tags=[]))
    state["messages"][3].tags.append("edited in place")
    await engine.save_state("conv", state)
    assert counted.leaves == 2  # the new message and the one changed since the load
    assert await Engine(store, types=TYPES).load_state("conv") == state
    older = await engine.state_history("conv")
    # a load of an older checkpoint is not what the next save extends: not noted
    await engine.load_state("conv", checkpoint_id=older[-1].checkpoint_id)
    await engine.save_state("conv", state)
    assert counted.leaves == 2


async def test_a_long_list_saved_again_calls_leaf_only_for_its_new_items(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = Engine(store, types=TYPES)
    messages = [Draft(text=f"turn {i} " * 20, tags=["t"]) for i in range(30)]
    await engine.save_state("conv", {"messages": messages})
    called: list[object] = []
    real_leaf = snapshot_codec.SnapshotCodec.leaf

    def leaf(self: SnapshotCodec, value: object, *args: Any) -> object:
        called.append(value)
        return real_leaf(self, value, *args)

    monkeypatch.setattr(snapshot_codec.SnapshotCodec, "leaf", leaf)
    messages.append(Draft(text="turn 30 " * 20, tags=["t"]))
    messages[3], messages[4] = messages[4], messages[3]  # reordered: still known
    await engine.save_state("conv", {"messages": messages})
    assert called == [messages[-1]]
    assert await Engine(store, types=TYPES).load_state("conv") == {"messages": messages}


def _codec(**bounds: int) -> SnapshotCodec:
    registry = TypeRegistry()
    registry.register(*TYPES)
    codec = SnapshotCodec(Serde(registry))
    codec.memo = LeafMemo(registry, **bounds)
    return codec


def test_the_leaf_memo_is_bounded_in_entries_and_bytes() -> None:
    codec = _codec(max_entries=50, max_bytes=20_000)
    assert codec.memo is not None
    leaves: list[object] = [{"text": f"{i} " + "x" * 1000} for i in range(250)]
    peak_entries = peak_bytes = 0
    for leaf in leaves:
        codec.leaf(leaf, {})
        peak_entries = max(peak_entries, len(codec.memo))
        peak_bytes = max(peak_bytes, codec.memo.held_bytes)
    assert peak_entries <= 50
    assert peak_bytes <= 20_000 + 1100  # one image past the bound before it clears
    first = {"text": "0 " + "x" * 1000}
    chunks: dict[str, bytes] = {}
    assert codec.leaf(leaves[0], chunks) == codec.leaf(first, chunks)


def test_remembered_text_counts_by_its_length_not_its_empty_image() -> None:
    codec = _codec(max_entries=50, max_bytes=20_000)
    assert codec.memo is not None
    peak = 0
    for i in range(250):
        codec.leaf(f"{i} " + "y" * 1000, {})
        peak = max(peak, len(codec.memo))
    assert peak <= 21


def test_a_full_memo_forgets_the_leaves_it_met_first() -> None:
    """A chat turn loads the thread as new objects: last turn's are the ones to drop."""
    codec = _codec(max_entries=50)
    assert codec.memo is not None
    chunks: dict[str, bytes] = {}
    state: list[dict[str, str]] = []
    for turn in range(3):
        state = [{"text": f"message {i}: " + "x" * 100} for i in range(20 + turn)]
        for leaf in state:
            codec.leaf(leaf, chunks)
    shapes = [codec.memo.find(leaf, chunks, ()) for leaf in state]
    assert None not in shapes  # this turn's leaves were all still remembered
    assert len(codec.memo) <= 50


def test_a_memo_ends_with_its_proofs_fields_in_order() -> None:
    """`_Memo(leaf, kind, digest, shape, *proof)` relies on it."""
    assert _Memo._fields[-len(_Proof._fields) :] == _Proof._fields


def test_a_leaf_with_an_unset_field_is_remembered_and_its_change_seen() -> None:
    codec = _codec()
    note = _loose_unset(0)
    chunks: dict[str, bytes] = {}
    first = codec.leaf(note, chunks)
    assert codec.leaf(note, chunks) is first  # remembered: the same shape object
    note.text = "now set"
    assert codec.leaf(note, chunks) != first
