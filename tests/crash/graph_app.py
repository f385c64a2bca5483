"""A LangGraph graph a crash test runs in a child: `python graph_app.py DB LOG STEPS`.

One node appends its step number to `items` until there are STEPS of them, with
`durability="sync"` on ResumableSaver over SQLite (durability=full). For each
step's update the graph yields, the child appends `step <n>` to LOG, one write
per line. With `resume` as a fourth argument it continues the
thread from its last checkpoint instead of starting it; either way it writes the
final items to stdout as JSON.
"""

from __future__ import annotations

import json
import operator
import os
import sys
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph

from resumable.integrations.langgraph import ResumableSaver

DB, LOG, STEPS = sys.argv[1], sys.argv[2], int(sys.argv[3])
RESUME = sys.argv[4:] == ["resume"]


class State(TypedDict):
    items: Annotated[list[int], operator.add]


def note(line: str) -> None:
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


def add(state: State) -> dict[str, list[int]]:
    return {"items": [len(state["items"])]}


def route(state: State) -> str:
    return END if len(state["items"]) >= STEPS else "add"


def main() -> None:
    builder = StateGraph(State)
    builder.add_node("add", add)
    builder.add_edge(START, "add")
    builder.add_conditional_edges("add", route)
    with ResumableSaver.from_url(f"sqlite:///{DB}") as saver:
        graph = builder.compile(checkpointer=saver)
        config: Any = {
            "configurable": {"thread_id": "crash"},
            "recursion_limit": 10 * STEPS,
        }
        start: State | None = None if RESUME else {"items": []}
        for update in graph.stream(
            start, config, stream_mode="updates", durability="sync"
        ):
            note(f"step {update['add']['items'][0]}")
        sys.stdout.write(json.dumps(graph.get_state(config).values["items"]))


if __name__ == "__main__":
    main()
