"""Every kind of thread is listed and shown by the same commands.

A `save_state` thread, a conversation and a LangGraph thread, from a user's
script; `state_history` finds a conversation's saves, and `resumable threads` /
`show-thread` show all three (the dashboard always did).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from newcomer.as_a_user import ok, python, resumable

pytest.importorskip("langgraph", reason="the langgraph extra is not installed")

SAVES = """
import asyncio
from typing import TypedDict
from langgraph.graph import END, START, StateGraph
from resumable import Engine
from resumable.integrations.langgraph import ResumableSaver

class Count(TypedDict):
    n: int

def bump(state: Count) -> Count:
    return {"n": state["n"] + 1}

async def main() -> None:
    async with Engine() as engine:
        await engine.save_state("t-1", {"docs": 3}, label="after-doc-3")
        chat = await engine.conversation("cust-7")
        for turn in range(4):
            chat.append({"role": "user", "content": f"question {turn}"})
            chat.append({"role": "assistant", "content": f"answer {turn}"})
            await chat.save()
        print(len(await engine.state_history("cust-7")))

asyncio.run(main())
with ResumableSaver.from_url("sqlite:///.resumable/state.db") as saver:
    graph = StateGraph(Count)
    graph.add_node("bump", bump)
    graph.add_edge(START, "bump")
    graph.add_edge("bump", END)
    graph.compile(checkpointer=saver).invoke(
        {"n": 0}, {"configurable": {"thread_id": "graph-1"}}
    )
"""


def test_threads_and_show_thread_cover_states_conversations_and_langgraph(
    tmp_path: Path,
) -> None:
    (tmp_path / "saves.py").write_text(SAVES)
    assert ok(python(tmp_path, "saves.py")).strip() == "4"  # the four chat.save()

    listed = ok(resumable(tmp_path, "threads"))
    kinds = {
        line.split()[0]: line.split()[1] for line in listed.splitlines()[2:] if line
    }
    assert kinds == {"t-1": "state", "cust-7": "conversation", "graph-1": "langgraph"}

    chat = ok(resumable(tmp_path, "show-thread", "cust-7"))
    assert chat.startswith("thread  cust-7  (4 checkpoints)")
    assert len(re.findall(r"\bconversation\b", chat)) == 4
    assert "question 0" in chat

    state = ok(resumable(tmp_path, "show-thread", "t-1"))
    assert "after-doc-3" in state
    assert '{"docs": 3}' in state

    assert "(root)" in ok(resumable(tmp_path, "show-thread", "graph-1"))
