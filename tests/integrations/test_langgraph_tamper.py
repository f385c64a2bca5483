"""ResumableSaver on a damaged SQLite store: every read ends in CorruptCheckpointError."""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from resumable import CorruptCheckpointError
from resumable.integrations.langgraph import ResumableSaver
from resumable.testing import decompression_bomb, plain_frame


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _reply(state: Chat) -> dict[str, Any]:
    return {"messages": [AIMessage(content="ok " * 200)]}


def _graph(saver: ResumableSaver) -> Any:
    builder = StateGraph(Chat)
    builder.add_node("reply", _reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=saver)


CONFIG: Any = {"configurable": {"thread_id": "t1"}}


def _filled(tmp_path: Path) -> Path:
    db = tmp_path / "graph.db"
    with ResumableSaver.from_url(f"sqlite:///{db}", types=[Chat]) as saver:
        graph = _graph(saver)
        for i in range(3):
            graph.invoke({"messages": [HumanMessage(content=f"hi {i}")]}, CONFIG)
    return db


def _frame(body: bytes) -> bytes:
    header = bytes((1, 0))
    return header + zlib.crc32(body, zlib.crc32(header)).to_bytes(4, "big") + body


DAMAGE: dict[str, Callable[[sqlite3.Connection], object]] = {
    "a chunk with a valid checksum around a bad body": lambda db: db.execute(
        "UPDATE resumable_chunks SET data = ?", (_frame(b'{"~": "tuple", "v": 1}'),)
    ),
    "a chunk that is a zstd bomb": lambda db: db.execute(
        "UPDATE resumable_chunks SET data = ?",
        (plain_frame(decompression_bomb(), compressed=True),),
    ),
    "a manifest that decodes to a list": lambda db: db.execute(
        "UPDATE resumable_snapshots SET manifest = ?", (_frame(b"[1, 2, 3]"),)
    ),
    "chunk_refs that are not JSON": lambda db: db.execute(
        "UPDATE resumable_snapshots SET chunk_refs = '[\"unterminated'"
    ),
    "chunk_refs that are a number": lambda db: db.execute(
        "UPDATE resumable_snapshots SET chunk_refs = '7'"
    ),
    "chunk_refs nested 200,000 deep": lambda db: db.execute(
        "UPDATE resumable_snapshots SET chunk_refs = ?",
        ("[" * 200_000 + "]" * 200_000,),
    ),
    "text in the manifest's BLOB column": lambda db: db.execute(
        "UPDATE resumable_snapshots SET manifest = 'not bytes'"
    ),
    "text in a chunk's BLOB column": lambda db: db.execute(
        "UPDATE resumable_chunks SET data = 'not bytes'"
    ),
}


def test_a_garbage_checkpoint_id_is_never_handed_to_langgraph(tmp_path: Path) -> None:
    db = _filled(tmp_path)
    with sqlite3.connect(db) as conn:  # the newest checkpoint's id, nothing else
        conn.execute(
            "UPDATE resumable_snapshots SET checkpoint_id = 'zz' || checkpoint_id "
            "WHERE checkpoint_id = (SELECT max(checkpoint_id) FROM "
            "resumable_snapshots WHERE length(checkpoint_id) = 36)"
        )
    with (
        ResumableSaver.from_url(f"sqlite:///{db}", types=[Chat]) as saver,
        pytest.raises(CorruptCheckpointError, match="not the UUID LangGraph"),
    ):
        _graph(saver).invoke({"messages": [HumanMessage(content="again")]}, CONFIG)


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_thread_reads_as_corrupt_through_the_saver(
    tmp_path: Path, damage: str
) -> None:
    pytest.importorskip("zstandard")
    db = _filled(tmp_path)
    with sqlite3.connect(db) as conn:
        DAMAGE[damage](conn)
    with ResumableSaver.from_url(f"sqlite:///{db}", types=[Chat]) as saver:
        with pytest.raises(CorruptCheckpointError) as latest:
            saver.get_tuple(CONFIG)
        with pytest.raises(CorruptCheckpointError) as listed:
            list(saver.list(CONFIG))
    for caught in (latest, listed):
        assert "'t1'" in caught.value.place or "chunk" in caught.value.place
