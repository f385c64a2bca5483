"""Engine.view_state: a saved state as a generic view, on every store."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from resumable import Engine, register
from resumable.errors import ResumableError
from resumable.stores.protocol import Store


@dataclass(frozen=True)
class Note:
    text: str
    raw: bytes


register(Note)  # states hold it: the program names it


async def test_view_state_reads_every_version_as_plain_data(store: Store) -> None:
    engine = Engine(store)
    messages = [Note(f"message {i} " + "x" * 60, b"\x00" * i) for i in range(40)]
    first = await engine.save_state("t", {"messages": messages[:35], "$meta": 1})
    # the next saves are deltas, and 40 messages span a folded list segment
    await engine.save_state("t", {"messages": messages, "$meta": 2})
    await engine.save_state("t", {"messages": messages, "$meta": 3, "tag": (1, 2)})

    def note(i: int) -> dict[str, object]:
        return {
            "$type": f"{__name__}:Note",
            "text": f"message {i} " + "x" * 60,
            "raw": {"$type": "bytes", "$size": i, "$head": ("00" * i)[:32]},
        }

    assert await engine.view_state("t") == {
        "messages": [note(i) for i in range(40)],
        "$$meta": 3,  # a stored "$" key is escaped, as in every view
        "tag": {"$type": "tuple", "$items": [1, 2]},
    }
    assert await engine.view_state("t", checkpoint_id=first.checkpoint_id) == {
        "messages": [note(i) for i in range(35)],
        "$$meta": 1,
    }
    with pytest.raises(ResumableError, match="has no saved state"):
        await engine.view_state("nothing")
