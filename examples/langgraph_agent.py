"""A LangGraph graph on resumable's checkpointer, killed half-way and resumed.

`ResumableSaver` is a LangGraph checkpointer: LangGraph saves the graph's state
after every node, and the saver commits it to resumable's store (SQLite,
PostgreSQL or Redis; no pickle). Kill the process in the middle and invoke the
thread again: the nodes that finished are not run again.

    python examples/langgraph_agent.py --crash   # killed in the last node
    python examples/langgraph_agent.py           # resumes the thread: only that node runs
    resumable threads                            # what the saver stored

Needs `pip install 'resumable[langgraph]'`. The store is $RESUMABLE_STORE
(default: the SQLite file ./.resumable/state.db).
"""

from __future__ import annotations

import operator
import os
import signal
import sys
from typing import Annotated, TypedDict

try:  # the framework is an extra: say which, rather than a traceback
    from langgraph.graph import END, START, StateGraph
except ImportError:
    sys.exit("this example needs LangGraph: pip install 'resumable[langgraph]'")

from resumable.integrations.langgraph import ResumableSaver

STORE = os.environ.get("RESUMABLE_STORE", "sqlite:///.resumable/state.db")
THREAD = "report-on-heat-pumps"  # the same thread on every run: that is what resumes
CRASH = "--crash" in sys.argv


class State(TypedDict):
    """The graph's state: LangGraph checkpoints it after every node."""

    topic: str
    notes: Annotated[list[str], operator.add]  # each node appends to it
    report: str


def plan(state: State) -> dict[str, list[str]]:
    print("  executed  node plan")
    return {"notes": [f"questions about {state['topic']}"]}


def research(state: State) -> dict[str, list[str]]:
    print("  executed  node research (imagine a slow, costly search here)")
    return {"notes": ["heat pumps move heat instead of making it: 3-4x efficient"]}


def write(state: State) -> dict[str, str]:
    if CRASH:  # stands in for an OOM kill, a deploy, a laptop lid closing
        print(
            "  CRASH     killed now (SIGKILL); run me again without --crash", flush=True
        )
        os.kill(os.getpid(), signal.SIGKILL)
    print("  executed  node write")
    return {"report": f"Report on {state['topic']}: " + "; ".join(state["notes"])}


builder = StateGraph(State)
builder.add_node("plan", plan)
builder.add_node("research", research)
builder.add_node("write", write)
builder.add_edge(START, "plan")
builder.add_edge("plan", "research")
builder.add_edge("research", "write")
builder.add_edge("write", END)


def main() -> None:
    with ResumableSaver.from_url(STORE) as saver:
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": THREAD}}
        saved = graph.get_state(config)
        if not saved.values:
            print(f"thread {THREAD}: starting")
            inputs: State | None = {"topic": "heat pumps", "notes": [], "report": ""}
        elif saved.next:
            print(f"thread {THREAD}: resuming at node {', '.join(saved.next)}")
            inputs = None  # None: continue the thread from its last checkpoint
        else:
            print(f"thread {THREAD}: finished earlier; nothing runs")
            print(f"report: {saved.values['report']}")
            return
        # durability="sync": each node's checkpoint is on disk before the next node
        result = graph.invoke(inputs, config, durability="sync")
        print(f"report: {result['report']}")


if __name__ == "__main__":
    main()
