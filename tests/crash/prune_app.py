"""A LangGraph thread pruned in a child process that SIGKILLs itself at a store write.

Usage: prune_app.py MODE URL [K]
- write: 30 turns of a graph on thread "t" (many checkpoints, packed and loose)
- prune: prune(["t"]), SIGKILL at the K-th snapshot write (K=0: never; prints the count)
- check: every checkpoint listed loads; then prune finishes and the latest is intact
"""

from __future__ import annotations

import operator
import os
import signal
import sys
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph

from resumable import Engine
from resumable.integrations.langgraph import ResumableSaver
from resumable.stores import create_store

WRITES = frozenset(
    {"save_snapshot", "put_chunks", "swap_snapshots", "delete_snapshots"}
)


class State(TypedDict):
    items: Annotated[list[str], operator.add]
    n: int


def step(state: State) -> dict[str, Any]:
    return {"items": [f"item {state['n']} " * 8], "n": state["n"] + 1}


class KillAt:
    """A store that SIGKILLs this process just before its `at`-th snapshot write."""

    def __init__(self, inner: Any, at: int) -> None:
        self.inner, self.at, self.count = inner, at, 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in WRITES:
            return attr

        async def write(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            if self.count == self.at:
                os.kill(os.getpid(), signal.SIGKILL)
            return await attr(*args, **kwargs)

        return write


def main() -> None:
    mode, url = sys.argv[1], sys.argv[2]
    at = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    store = KillAt(create_store(url), at)
    config: Any = {"configurable": {"thread_id": "t"}}
    builder = StateGraph(State)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    with ResumableSaver(Engine(store)) as saver:
        graph = builder.compile(checkpointer=saver)
        if mode == "write":
            for n in range(30):
                graph.invoke({"items": [], "n": n}, config)
            sys.stdout.write(f"checkpoints {len(list(saver.list(config)))}\n")
        elif mode == "prune":
            store.count = 0
            saver.prune(["t"])
            sys.stdout.write(f"writes {store.count}\n")
        else:
            listed = list(saver.list(config))
            for found in listed:
                assert saver.get_tuple(found.config) == found, found.config
            saver.prune(["t"])
            left = list(saver.list(config))
            assert len(left) == 1, left
            values = graph.get_state(config).values
            assert values["n"] == 30, values
            assert values["items"] == [f"item {n} " * 8 for n in range(30)], values
            sys.stdout.write(f"ok {len(listed)}\n")


if __name__ == "__main__":
    main()
