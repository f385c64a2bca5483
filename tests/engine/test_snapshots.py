from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest

from resumable import Engine, ResumableError
from resumable._engine.snapshots import FULL_EVERY, SEGMENT
from resumable.stores.protocol import Store


@dataclasses.dataclass(frozen=True)
class Note:
    text: str
    score: float


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
    real_put = store.put_chunks

    async def counting_put(chunks: Mapping[str, bytes]) -> None:
        written.append(len(chunks))
        await real_put(chunks)

    store.put_chunks = counting_put  # type: ignore[method-assign]  # spy on a real store
    messages: list[dict[str, str]] = []
    for i in range(40):
        messages.append(message(i))
        await engine.save_state("conv", {"messages": messages})
    leaf_writes = sum(written)
    segments = 40 // SEGMENT * (40 // FULL_EVERY)
    assert leaf_writes <= 40 + segments  # one chunk per new message, plus list segments


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
    saved = await engine.save_state("m", [1, 2, 3], metadata={"step": 4}, label="x")
    assert saved.metadata == {"step": 4}
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
