from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Collection, Mapping
from typing import Any

import pydantic
import pytest

from resumable import Engine, ResumableError, SerializationError, register
from resumable._engine.packs import snapshot_place
from resumable._engine.snapshot_codec import SEGMENT, Bodies
from resumable._engine.snapshots import FULL_EVERY
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


def test_kept_chunk_bodies_are_bounded_in_bytes() -> None:
    bodies = Bodies(max_bytes=10_000)
    for i in range(100):
        bodies.keep(f"d{i}", bytes(1000))
        assert bodies.held_bytes <= 10_000
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
        # bytes in its image, so the image changes (see LeafMemo._unchanged)
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
    """A long list's remembered leaves are checked as one run (`LeafMemo.find_run`): a
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
    """The fields set is compared, not imaged (LeafMemo._imager): a name
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


async def test_a_state_saved_again_under_its_own_id_replaces_it_whole(
    store: Store,
) -> None:
    # two first saves of one id at once (LangGraph's thread index did) made the
    # second a delta of the first under the same id: a chain that never ends
    engine = Engine(store)
    await engine.save_state("t", {"n": 0}, checkpoint_id="0001")
    await engine.save_state("t", {"n": 1, "more": "x" * 50}, checkpoint_id="0002")
    again = await engine.save_state("t", {"n": 2}, checkpoint_id="0002")
    assert again.parent_id == "0001"
    assert await Engine(store).load_state("t") == {"n": 2}
    assert await Engine(store).load_state("t", checkpoint_id="0001") == {"n": 0}
