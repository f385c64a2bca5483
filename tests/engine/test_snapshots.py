from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Collection, Mapping
from typing import Any

import pydantic
import pytest

from resumable import Engine, ResumableError, SerializationError, register
from resumable._engine import snapshots
from resumable._engine.packs import snapshot_place
from resumable._engine.snapshots import FULL_EVERY, SEGMENT
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


@dataclasses.dataclass(frozen=True)
class Note:
    text: str
    score: float


# a program names the types it stores in states (encoding registers nothing)
register(Level, Draft, Final, Slotted, Loose, Note)


def message(i: int) -> dict[str, str]:
    return {
        "role": "user" if i % 2 == 0 else "assistant",
        "content": f"turn {i}: " + "x" * 200,
    }


async def test_save_and_load_round_trip_every_version(store: Store) -> None:
    engine = Engine(store)
    saved = []
    for turn in range(
        FULL_EVERY * 2 + SEGMENT + 3
    ):  # crosses full manifests and segments
        state = {
            "messages": [message(i) for i in range(turn + 1)],
            "summary": f"after {turn}",
            "notes": (Note("n", 0.5),),
        }
        checkpoint = await engine.save_state("t", state, label=f"turn-{turn}")
        saved.append((checkpoint.checkpoint_id, state))
    assert await engine.load_state("t") == saved[-1][1]
    for checkpoint_id, state in saved[:: max(1, len(saved) // 7)]:
        assert await Engine(store).load_state("t", checkpoint_id=checkpoint_id) == state
    history = await engine.state_history("t", limit=3)
    assert [c.label for c in history] == [
        f"turn-{len(saved) - 1 - i}" for i in range(3)
    ]
    assert history[0].parent_id == history[1].checkpoint_id
    older = await engine.state_history("t", before=history[1].checkpoint_id, limit=1)
    assert [c.checkpoint_id for c in older] == [history[2].checkpoint_id]


async def test_unchanged_messages_are_never_written_twice(store: Store) -> None:
    engine = Engine(store)
    written: list[int] = []
    real_save = store.save_snapshot

    async def counting_save(
        snapshot: SnapshotRecord, *, chunks: Mapping[str, bytes] = NO_CHUNKS
    ) -> None:
        written.append(len(chunks))
        await real_save(snapshot, chunks=chunks)

    store.save_snapshot = counting_save  # type: ignore[method-assign]  # spy on a real store
    messages: list[dict[str, str]] = []
    for i in range(40):
        messages.append(message(i))
        await engine.save_state("conv", {"messages": messages})
    assert len(written) == 40
    segments = 40 // SEGMENT * (40 // FULL_EVERY)
    # one chunk per new message, plus list segments
    assert 40 <= sum(written) <= 40 + segments


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
    await Engine(store).save_state(
        "conv",
        {"messages": [Draft(text=f"turn {i}", tags=["t"] * 20) for i in range(30)]},
    )
    engine = Engine(store)  # nothing of the thread in its caches
    counted = Counted(engine)
    state = await engine.load_state("conv")
    state["messages"].append(Draft(text="turn 30", tags=[]))
    state["messages"][3].tags.append("edited in place")
    await engine.save_state("conv", state)
    assert counted.leaves == 2  # the new message and the one changed since the load
    assert await Engine(store).load_state("conv") == state
    older = await engine.state_history("conv")
    # a load of an older checkpoint is not what the next save extends: not memorized
    await engine.load_state("conv", checkpoint_id=older[-1].checkpoint_id)
    await engine.save_state("conv", state)
    assert counted.leaves == 2


async def test_a_load_notes_the_chunks_it_read_for_the_next_save(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshots, "_STORED_MAX", 0)  # each note forgets the others
    engine = Engine(store)
    messages = [message(i) for i in range(10)]
    await engine.save_state("conv", {"messages": messages})
    await engine.save_state("conv", {"messages": [*messages, message(10)]})
    counted = Counted(engine)
    state = await engine.load_state("conv")  # the shape this engine saved last
    state["messages"].append(message(11))
    await engine.save_state("conv", state)
    assert counted.leaves == 1  # not the eleven it read, as chunks it must write again


async def test_a_load_reads_no_chunk_this_engine_saved_or_loaded(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages = [message(i) for i in range(12)]
    await Engine(store).save_state("conv", {"messages": messages})
    read: list[str] = []
    real_get = store.get_chunks

    async def counting_get(hashes: Collection[str]) -> dict[str, bytes]:
        read.extend(hashes)
        return await real_get(hashes)

    monkeypatch.setattr(store, "get_chunks", counting_get)
    engine = Engine(store)
    assert await engine.load_state("conv") == {"messages": messages}
    assert len(read) == 12  # a new engine reads them, once
    await engine.save_state("conv", {"messages": [*messages, message(12)]})
    assert await engine.load_state("conv") == {"messages": [*messages, message(12)]}
    assert len(read) == 12  # then neither those nor the one it saved


def test_kept_chunk_bodies_are_bounded_in_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(snapshots, "_BODIES_MAX_BYTES", 10_000)
    bodies = snapshots._Bodies()
    for i in range(100):
        bodies.keep(f"d{i}", bytes(1000))
        assert bodies._bytes <= 10_000
    assert set(bodies.get_all(["d0", "d99"])) == {"d99"}  # the oldest went first
    bodies.keep("big", bytes(6000))  # over half the bound: not kept
    assert bodies.get_all(["big"]) == {}


async def test_a_load_after_a_save_reads_no_delta_chain(store: Store) -> None:
    engine = Engine(store)
    messages = [message(i) for i in range(5)]
    for i in range(5, 10):  # a full manifest, then four deltas
        messages.append(message(i))
        await engine.save_state("conv", {"messages": messages})
    reads: list[str | None] = []
    real_list = store.list_snapshots

    async def counting_list(
        thread_id: str,
        *,
        namespace: str | None = "",
        before: str | None = None,
        limit: int | None = None,
    ) -> list[SnapshotRecord]:
        reads.append(before)
        return await real_list(
            thread_id, namespace=namespace, before=before, limit=limit
        )

    store.list_snapshots = counting_list  # type: ignore[method-assign]  # spy on a real store
    assert await engine.load_state("conv") == {"messages": messages}
    assert all(before is None for before in reads)  # only the latest was looked up
    assert await Engine(store).load_state("conv") == {"messages": messages}
    assert any(before is not None for before in reads)  # a new engine reads the chain


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda m: m.update(content="edited in place"), id="new text"),
        pytest.param(lambda m: m.update(extra=[1]), id="new key"),
        pytest.param(lambda m: m.update(n=1.0), id="int to float"),
        pytest.param(lambda m: m.update(n=True), id="int to bool"),
        pytest.param(lambda m: m.update(n=Level.ONE), id="int to IntEnum"),
        # marshal writes bytes-like values as bytes; a leaf that held none had no
        # bytes in its image, so the image changes (see SnapshotCodec._unchanged)
        pytest.param(
            lambda m: m.update(content=bytearray(b"x" * 100)), id="text to bytearray"
        ),
        pytest.param(lambda m: m.update(n=[1]), id="int to list"),
        pytest.param(lambda m: m.update(content=("x" * 100,)), id="text to tuple"),
    ],
)
async def test_a_leaf_changed_in_place_is_saved_as_it_now_is(
    store: Store, change: Callable[[dict[str, object]], None]
) -> None:
    register(Level)
    engine = Engine(store)
    first: dict[str, object] = {"content": "x" * 100, "n": 1}
    messages = [first, {"content": "y" * 100, "n": 2}]
    await engine.save_state("conv", {"messages": messages})
    change(first)
    messages.append({"content": "z" * 100, "n": 3})
    await engine.save_state("conv", {"messages": messages})
    loaded = await Engine(store).load_state("conv")
    assert loaded == {"messages": messages}
    assert [type(v) for v in loaded["messages"][0].values()] == [
        type(v) for v in first.values()
    ]


async def test_a_leaf_changed_while_it_was_encoded_is_encoded_again_next_time(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LangGraph saves from a background thread while the graph runs on: a message
    # can change just after it was encoded. What the memo remembers must be what
    # was encoded, so that the next save sees the change.
    engine = Engine(store)
    item: dict[str, object] = {"content": "x" * 100, "n": 1}
    codec = engine.serde.codec
    real_encode = codec.encode

    def encode_then_change(value: object, *, root: str = "value") -> bytes:
        body = real_encode(value, root=root)
        if value is item:
            item["n"] = 2  # "another thread", right after the encoding
        return body

    monkeypatch.setattr(codec, "encode", encode_then_change)
    await engine.save_state("doc", {"items": [item]})
    monkeypatch.setattr(codec, "encode", real_encode)
    await engine.save_state("doc", {"items": [item]})

    assert await Engine(store).load_state("doc") == {
        "items": [{"content": "x" * 100, "n": 2}]
    }


def test_the_leaf_memo_is_bounded_in_entries_and_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(snapshots, "_MEMO_MAX", 50)
    monkeypatch.setattr(snapshots, "_MEMO_MAX_BYTES", 20_000)
    codec = snapshots.SnapshotCodec(Engine("memory://").serde)
    leaves: list[object] = [{"text": f"{i} " + "x" * 1000} for i in range(250)]
    texts = [f"{i} " + "y" * 1000 for i in range(250)]  # text: its own image
    peak_entries = peak_bytes = peak_texts = 0
    for leaf in leaves + texts:
        codec.leaf(leaf, {})
        peak_entries = max(peak_entries, len(codec._memo))
        peak_bytes = max(peak_bytes, codec._memo_bytes)
        held = sum(type(entry[0]) is str for entry in codec._memo.values())
        peak_texts = max(peak_texts, held)
    assert peak_entries <= 50
    assert peak_bytes <= 20_000 + 1100  # one image past the bound before it clears
    assert peak_texts <= 21  # texts count by their length, not their empty image
    first = {"text": "0 " + "x" * 1000}
    chunks: dict[str, bytes] = {}
    assert codec.leaf(leaves[0], chunks) == codec.leaf(first, chunks)


def test_a_full_memo_forgets_the_leaves_it_met_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A chat turn loads the thread as new objects: last turn's are the ones to drop."""
    monkeypatch.setattr(snapshots, "_MEMO_MAX", 50)
    engine = Engine("memory://")
    codec = snapshots.SnapshotCodec(engine.serde)
    chunks: dict[str, bytes] = {}
    state: list[dict[str, str]] = []
    for turn in range(3):
        state = [{"text": f"message {i}: " + "x" * 100} for i in range(20 + turn)]
        for leaf in state:
            codec.leaf(leaf, chunks)
    counted = Counted(engine)
    for leaf in state:
        codec.leaf(leaf, chunks)
    assert counted.leaves == 0  # this turn's leaves were all still remembered
    assert len(codec._memo) <= 50


async def test_a_field_outside_the_instance_dict_changed_in_place_is_saved(
    store: Store,
) -> None:
    register(Loose)
    engine = Engine(store)
    note = Loose(text="first " * 20, tags=["a"])
    await engine.save_state("doc", {"notes": [note]})
    note.text = "second " * 20  # a slot: not in note.__dict__
    await engine.save_state("doc", {"notes": [note]})
    assert await Engine(store).load_state("doc") == {"notes": [note]}


async def test_bytes_swapped_for_a_bytearray_are_saved_as_a_bytearray(
    store: Store,
) -> None:
    engine = Engine(store)
    item: dict[str, object] = {"blob": bytes(100)}
    await engine.save_state("doc", {"items": [item]})
    item["blob"] = bytearray(100)  # marshal writes both as the same bytes
    await engine.save_state("doc", {"items": [item]})
    (loaded,) = (await Engine(store).load_state("doc"))["items"]
    assert type(loaded["blob"]) is bytearray


@pytest.mark.parametrize("size", [3, 40], ids=["short", "long"])
@pytest.mark.parametrize("container", ["list", "dict"])
async def test_bytes_swapped_for_a_bytearray_deep_inside_are_saved_as_a_bytearray(
    store: Store, size: int, container: str
) -> None:
    """Long containers are first checked at C speed (atoms only?), short ones one
    item at a time: either way a bytearray inside is seen."""
    engine = Engine(store)
    blobs: list[object] = [bytes(20) for _ in range(size)]
    inner: dict[str, object] | list[object] = (
        blobs if container == "list" else {f"k{i}": b for i, b in enumerate(blobs)}
    )
    item = {"inner": inner}
    await engine.save_state("doc", {"items": [item]})
    if isinstance(inner, list):
        inner[size // 2] = bytearray(20)
    else:
        inner[f"k{size // 2}"] = bytearray(20)
    await engine.save_state("doc", {"items": [item]})
    (loaded,) = (await Engine(store).load_state("doc"))["items"]
    values = loaded["inner"] if container == "list" else [*loaded["inner"].values()]
    assert [type(v) for v in values].count(bytearray) == 1


def _entry(i: int) -> dict[str, object]:
    return {"n": 1, "blob": bytes(8), "text": f"{i} " * 30}


def _draft(i: int) -> Draft:
    return Draft(text=f"draft {i} " * 10, tags=["a"])


def _draft_with_tags_unset(i: int) -> Draft:
    """Stored with its fields set; with a frozenset instead (not a set), without."""
    draft = _draft(i)
    draft.__pydantic_fields_set__.discard("tags")
    return draft


@pytest.mark.parametrize("position", [0, 11, 23], ids=["first", "inside", "last"])
@pytest.mark.parametrize(
    ("make", "change"),
    [
        pytest.param(_entry, lambda d: d.update(n=2), id="value edited"),
        pytest.param(_entry, lambda d: d.update(n=True), id="int to bool"),
        pytest.param(
            _entry,
            lambda d: d.update(blob=bytearray(d["blob"])),
            id="bytes to bytearray",
        ),
        pytest.param(_entry, lambda d: d.update(extra=None), id="key added"),
        pytest.param(
            _draft, lambda m: setattr(m, "text", m.text.upper()), id="model field set"
        ),
        pytest.param(_draft, lambda m: m.tags.append("b"), id="model list appended"),
        pytest.param(
            _draft, lambda m: setattr(m, "__class__", Final), id="model class switched"
        ),
        pytest.param(
            _draft,
            lambda m: m.__pydantic_fields_set__.discard("tags"),
            id="model fields set shrunk",
        ),
        pytest.param(
            _draft_with_tags_unset,
            lambda m: setattr(
                m, "__pydantic_fields_set__", frozenset(m.__pydantic_fields_set__)
            ),
            id="model fields set swapped for an equal frozenset",
        ),
    ],
)
async def test_a_leaf_changed_in_place_in_a_long_list_is_saved_as_it_now_is(
    store: Store,
    make: Callable[[int], Any],
    change: Callable[[Any], object],
    position: int,
) -> None:
    """A long list's remembered leaves are checked as one run (`_remembered`): a
    change to any one of them, wherever it is, is seen."""
    engine = Engine(store)
    items = [make(i) for i in range(24)]
    await engine.save_state("doc", {"items": items})
    change(items[position])
    items.append(make(24))
    await engine.save_state("doc", {"items": items})
    loaded = await Engine(store).load_state("doc")
    encode = engine.serde.codec.encode
    assert encode(loaded) == encode({"items": items})  # == takes 1 and True alike


async def test_a_long_list_saved_again_calls_leaf_only_for_its_new_items(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = Engine(store)
    messages = [Draft(text=f"turn {i} " * 20, tags=["t"]) for i in range(30)]
    await engine.save_state("conv", {"messages": messages})
    called: list[object] = []
    real_leaf = snapshots.SnapshotCodec.leaf

    def leaf(self: snapshots.SnapshotCodec, value: object, *args: object) -> object:
        called.append(value)
        return real_leaf(self, value, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(snapshots.SnapshotCodec, "leaf", leaf)
    messages.append(Draft(text="turn 30 " * 20, tags=["t"]))
    messages[3], messages[4] = messages[4], messages[3]  # reordered: still known
    await engine.save_state("conv", {"messages": messages})
    assert called == [messages[-1]]
    assert await Engine(store).load_state("conv") == {"messages": messages}


def test_a_memo_ends_with_its_proofs_fields_in_order() -> None:
    """`_Memo(leaf, kind, digest, shape, *proof)` relies on it."""
    proof_fields = snapshots._Proof._fields
    assert snapshots._Memo._fields[-len(proof_fields) :] == proof_fields


def test_a_leaf_with_an_unset_field_is_remembered_and_its_change_seen() -> None:
    register(Loose)
    codec = snapshots.SnapshotCodec(Engine("memory://").serde)
    note = Loose.__new__(Loose)  # `text`'s slot never set: reading it raises
    note.tags = ["tag"] * 20
    chunks: dict[str, bytes] = {}
    first = codec.leaf(note, chunks)
    assert codec.leaf(note, chunks) is codec._memo[id(note)].shape  # remembered
    note.text = "now set"
    assert codec.leaf(note, chunks) != first


async def test_a_state_with_a_reference_cycle_is_refused_as_unserializable(
    store: Store,
) -> None:
    """Regression: the check of what a leaf is made of recursed until RecursionError."""
    cycle: list[object] = []
    cycle.append(cycle)
    with pytest.raises(SerializationError, match="reference cycle"):
        await Engine(store).save_state("doc", {"items": [cycle]})


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({"a": 1}, {"a": 2}),
        ({"a": 1}, {"a": True}),
        (1, True),
        (1, 1.0),
        (0.0, -0.0),
        ("a", "b"),
        (None, False),
    ],
    ids=[
        "small dict edited",
        "int to bool inside",
        "int to bool",
        "int to float",
        "zero to minus zero",
        "text",
        "None to False",
    ],
)
async def test_a_small_inline_value_changed_is_saved_as_it_now_is(
    store: Store, before: object, after: object
) -> None:
    engine = Engine(store)
    items = [before]
    await engine.save_state("doc", {"items": items, "flag": before})
    if isinstance(before, dict) and isinstance(after, dict):
        before.update(after)  # in place: the saved shape must not follow it
    else:
        items[0] = after
    await engine.save_state("doc", {"items": items, "flag": after})
    loaded = await Engine(store).load_state("doc")
    # compared encoded: == would take 1, 1.0 and True for one another
    encode = engine.serde.codec.encode
    assert encode(loaded) == encode({"items": [after], "flag": after})


async def test_snapshots_written_with_live_inline_values_still_load_and_grow(
    store: Store,
) -> None:
    # before inline values were kept encoded ({"j": text}) they were stored as
    # values ({"v": value}): such a manifest loads, and is a base for new deltas
    engine = Engine(store)
    manifest = {"full": {"d": {"n": {"v": 1}, "tags": {"l": [{"v": "a"}]}}}, "depth": 0}
    await store.save_snapshot(
        SnapshotRecord(
            thread_id="old",
            checkpoint_id="0001",
            parent_id=None,
            manifest=engine.serde.dumps(manifest, place=snapshot_place("old", "0001")),
            chunk_refs=(),
            created_at_ms=1,
        )
    )
    assert await engine.load_state("old") == {"n": 1, "tags": ["a"]}
    await engine.save_state("old", {"n": True, "tags": ["a", "b"]})
    loaded = await Engine(store).load_state("old")
    encode = engine.serde.codec.encode
    assert encode(loaded) == encode({"n": True, "tags": ["a", "b"]})


async def test_a_model_changed_in_place_is_saved_as_it_now_is(store: Store) -> None:
    engine = Engine(store)
    note = Draft(text="first draft " * 10, tags=["a"])
    await engine.save_state("doc", {"notes": [note]})
    note.tags.append("b")  # nested, in place: the model's own fields are unchanged
    await engine.save_state("doc", {"notes": [note]})
    assert await Engine(store).load_state("doc") == {"notes": [note]}
    note.__class__ = Final
    await engine.save_state("doc", {"notes": [note]})
    (loaded,) = (await Engine(store).load_state("doc"))["notes"]
    assert type(loaded) is Final


async def test_a_model_whose_fields_set_changed_in_place_is_saved_as_it_now_is(
    store: Store,
) -> None:
    """The fields set is compared, not imaged (SnapshotCodec._imager): a name
    dropped from it, then added back, is seen each time."""
    engine = Engine(store)
    note = Draft(text="first draft " * 10, tags=["a"])
    for change in ("discard", "add"):
        getattr(note.__pydantic_fields_set__, change)("tags")
        await engine.save_state("doc", {"notes": [note]})
        (loaded,) = (await Engine(store).load_state("doc"))["notes"]
        assert loaded.model_fields_set == note.model_fields_set


async def test_a_chunk_collected_meanwhile_is_written_again(store: Store) -> None:
    writer = Engine(store)
    shared = message(1)
    await writer.save_state("old", {"messages": [shared]})
    # another process deletes that thread and collects its chunks; `writer` still
    # counts the shared message's chunk as stored
    collector = Engine(store)
    await collector.delete_thread("old")
    assert await store.delete_unreferenced_chunks(100) == 1
    await writer.save_state("new", {"messages": [shared, message(2)]})
    loaded = await Engine(store).load_state("new")
    assert loaded == {"messages": [shared, message(2)]}


async def test_branching_and_forking_share_the_prefix(store: Store) -> None:
    engine = Engine(store)
    first = await engine.save_state("main", {"messages": [message(0)]})
    await engine.save_state("main", {"messages": [message(0), message(1)]})
    branch = await engine.save_state(
        "main", {"messages": [message(0), message(99)]}, parent=first.checkpoint_id
    )
    assert branch.parent_id == first.checkpoint_id
    assert await engine.load_state("main") == {"messages": [message(0), message(99)]}
    forked = await engine.fork_state("main", first.checkpoint_id, to_thread="copy")
    assert forked.metadata == {
        "forked_from": {"thread_id": "main", "checkpoint_id": first.checkpoint_id}
    }
    assert await engine.load_state("copy") == {"messages": [message(0)]}
    assert len(await engine.state_history("main")) == 3


async def test_metadata_defaults_and_missing_states(store: Store) -> None:
    engine = Engine(store)
    metadata = {"step": 4, "span": (1, 2)}
    saved = await engine.save_state("m", [1, 2, 3], metadata=metadata, label="x")
    assert saved.metadata is metadata  # as passed: not decoded back
    (listed,) = await engine.state_history("m")
    assert listed.metadata == metadata
    assert type(listed.metadata["span"]) is tuple
    assert await engine.load_state("m") == [1, 2, 3]
    assert await engine.load_state("empty", default=None) is None
    with pytest.raises(ResumableError, match=r"has no saved state"):
        await engine.load_state("empty")
    with pytest.raises(ResumableError, match="checkpoint"):
        await engine.save_state("m", [4], parent="nope")


async def test_scalar_and_nested_states_round_trip(store: Store) -> None:
    engine = Engine(store)
    for value in (
        "plain",
        42,
        None,
        {"a": {"b": [1, {"c": b"bytes" * 40}]}},
        Note("z", 1.0),
    ):
        await engine.save_state("s", value)
        assert await engine.load_state("s") == value
    await engine.save_state("s", {"a": 1, "b": 2})
    await engine.save_state("s", {"a": 1})  # a key removed
    assert await engine.load_state("s") == {"a": 1}


async def test_a_deleted_thread_is_not_used_as_a_delta_base(store: Store) -> None:
    engine = Engine(store)
    first = await engine.save_state("gone", {"messages": [message(0)]})
    await engine.delete_thread("gone")
    with pytest.raises(ResumableError, match="no checkpoint"):
        await engine.save_state(
            "gone", {"messages": [message(1)]}, parent=first.checkpoint_id
        )
    await engine.save_state("gone", {"messages": [message(2)]})
    assert await engine.load_state("gone") == {"messages": [message(2)]}
