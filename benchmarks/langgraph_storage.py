"""LangGraph checkpoint storage: LangGraph's SqliteSaver vs ResumableSaver on SQLite.

One graph, run once per saver in the same process: a node that adds one 500-byte
message (real English prose) to an `add_messages` channel per step, for 200 steps,
on one thread. For each saver it prints:

- file growth: the database file's used pages after a WAL checkpoint, minus the
  empty schema's (what the disk holds, SQLite's page and index overhead included);
- row bytes: the bytes of every column of every row the run added (what was
  written, without SQLite's overhead), as a multiple of the new message text;
- per-step time: the median time between two steps of `graph.stream`, with
  LangGraph's default `durability="async"` (checkpoints saved in the background)
  and with `durability="sync"` (each step waits for its checkpoint), and the
  whole run's time per step. Async runs are whole runs, the savers taking turns
  run by run (a run's saves go on in the background), ASYNC_RUNS per saver:
  their medians swing more than sync ones. Sync runs go in lockstep:
  the savers' graphs advance one step each in turn, so that the machine's drift
  (a shared host's phases shift step times by 20% for seconds at a time) hits
  both alike;
- chat turn: a second graph answers one message per `invoke`, as a chat app
  does, for 100 turns; the median turn (load the thread, save the input and the
  reply, `durability="sync"`).

The step times have a third row: a saver that stores nothing, whose steps take
LangGraph's own time. An async step is mostly that. The saves run on other
threads, and while the graph steps they get the GIL only when the stepping
thread lets go of it, so neither saver's saves keep up: the run's last step
waits 0.2-0.3 s for most of them (in 'run / step', not in the median). What a
saver adds to an async step comes from those hand-overs more than from its CPU
time: in a separate measurement, ResumableSaver with 600 us of busy Python
added to every put_writes stepped no slower (0.93x against 0.96x SqliteSaver's
step, 24 runs each).

Both savers fsync every commit; `--no-fsync` runs both with SQLite's
`synchronous=NORMAL` instead (ResumableSaver: `?durability=normal`).
`--sync-only [ROUNDS]` runs only the lockstep `durability="sync"` runs (ROUNDS of
them, 9 by default, the saver stepping first alternating) and prints each
round's median step per saver and their ratio, then the medians over rounds.

Needs `pip install langgraph-checkpoint-sqlite` (LangGraph's SqliteSaver).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

sys.path.insert(0, str(Path(__file__).parent))

from _common import prose, table
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint, CheckpointTuple
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from resumable.integrations.langgraph import ResumableSaver

try:
    from langgraph.checkpoint.sqlite import SqliteSaver
except ImportError:
    sys.exit("needs LangGraph's SqliteSaver: pip install langgraph-checkpoint-sqlite")

STEPS = 200
TURNS = 100
MESSAGE_BYTES = 500
RUNS = 7
ASYNC_RUNS = 2 * RUNS
FLOOR = "a saver storing nothing"


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def build_graph() -> StateGraph[State]:
    rng = random.Random(7)

    def speak(state: State) -> dict[str, list[AnyMessage]]:
        turn = len(state["messages"])
        text = prose(rng, MESSAGE_BYTES)
        kind = HumanMessage if turn % 2 == 0 else AIMessage
        return {"messages": [kind(text, id=f"msg-{turn}")]}

    def route(state: State) -> str:
        return END if len(state["messages"]) >= STEPS else "speak"

    builder = StateGraph(State)
    builder.add_node("speak", speak)
    builder.add_edge(START, "speak")
    builder.add_conditional_edges("speak", route)
    return builder


def used_bytes(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        (free,) = conn.execute("PRAGMA freelist_count").fetchone()
        (size,) = conn.execute("PRAGMA page_size").fetchone()
    return int((pages - free) * size)


def row_bytes(path: Path) -> int:
    """The bytes of every column of every row in every table."""
    total = 0
    with sqlite3.connect(path) as conn:
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
            )
        ]
        for name in tables:
            columns = [row[1] for row in conn.execute(f'PRAGMA table_info("{name}")')]
            for column in columns:
                (size,) = conn.execute(
                    f'SELECT COALESCE(SUM(LENGTH(CAST("{column}" AS BLOB))), 0) '
                    f'FROM "{name}"'
                ).fetchone()
                total += int(size)
    return total


def breakdown(path: Path, steps: int) -> str:
    """ResumableSaver's row bytes per step: chunks, packs, loose checkpoints, writes."""
    parts = {
        "chunks": "SELECT SUM(LENGTH(hash) + LENGTH(data)) FROM resumable_chunks",
        "packs": _SNAPSHOT_BYTES + "namespace LIKE ':pack:%'",
        "loose checkpoint rows": _SNAPSHOT_BYTES + "namespace NOT LIKE ':%'",
        "loose pending-writes rows": _SNAPSHOT_BYTES + "namespace LIKE ':writes:%'",
    }
    with sqlite3.connect(path) as conn:
        sizes = {
            name: int(conn.execute(query).fetchone()[0] or 0)
            for name, query in parts.items()
        }
    return ", ".join(f"{name} {size / steps:.0f} B" for name, size in sizes.items())


_SNAPSHOT_BYTES = (
    "SELECT SUM(LENGTH(thread_id) + LENGTH(namespace) + LENGTH(checkpoint_id) "
    "+ COALESCE(LENGTH(parent_id), 0) + LENGTH(manifest) + LENGTH(chunk_refs) "
    "+ COALESCE(LENGTH(metadata), 0) + 8) FROM resumable_snapshots WHERE "
    "thread_id NOT LIKE ':%' AND "
)


def stream_graph(
    saver: BaseCheckpointSaver[Any], durability: Literal["async", "sync"]
) -> Iterator[Any]:
    """The graph's steps on a fresh thread, as `graph.stream` yields them."""
    graph = build_graph().compile(checkpointer=saver)
    config: Any = {
        "configurable": {"thread_id": f"bench-{durability}-{time.time_ns()}"},
        "recursion_limit": 10 * STEPS,
    }
    return iter(
        graph.stream(
            {"messages": []}, config, stream_mode="updates", durability=durability
        )
    )


def run_graph(
    saver: BaseCheckpointSaver[Any], durability: Literal["async", "sync"]
) -> list[float]:
    """Stream the graph to the end on a fresh thread; the step-to-step times."""
    stamps = [time.perf_counter()]
    for _ in stream_graph(saver, durability):
        stamps.append(time.perf_counter())
    assert len(stamps) == STEPS + 1, len(stamps)
    return [later - earlier for earlier, later in itertools.pairwise(stamps)]


def run_in_lockstep(
    savers: dict[str, BaseCheckpointSaver[Any]], first: int
) -> dict[str, list[float]]:
    """Each saver's graph run with `durability="sync"`, one step of each in turn.

    The saver at index `first` steps first. Each step waits for its checkpoint,
    so one saver's work does not run into the other's step. Returns each step's
    time per saver.
    """
    names = list(savers)
    names = names[first:] + names[:first]
    steps = {name: stream_graph(savers[name], "sync") for name in names}
    times: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(STEPS):
        for name in names:
            start = time.perf_counter()
            next(steps[name])
            times[name].append(time.perf_counter() - start)
    for name in names:  # each graph has ended
        assert next(steps[name], None) is None, name
    return times


def build_chat() -> StateGraph[State]:
    """One reply per `invoke`: a chat app's turn."""
    rng = random.Random(11)

    def reply(state: State) -> dict[str, list[AnyMessage]]:
        text = prose(rng, MESSAGE_BYTES)
        return {"messages": [AIMessage(text, id=f"reply-{len(state['messages'])}")]}

    builder = StateGraph(State)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder


def run_chat(saver: BaseCheckpointSaver[Any]) -> list[float]:
    """TURNS turns on a fresh thread, each `invoke` adding a message and a reply.

    A turn loads the thread (`get_tuple`) and saves the input and the reply with
    `durability="sync"`; the thread grows to 2 * TURNS messages.
    """
    graph = build_chat().compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": f"chat-{time.time_ns()}"}}
    rng = random.Random(13)
    times = []
    for turn in range(TURNS):
        message = HumanMessage(prose(rng, MESSAGE_BYTES), id=f"user-{turn}")
        start = time.perf_counter()
        graph.invoke({"messages": [message]}, config, durability="sync")
        times.append(time.perf_counter() - start)
    return times


def measure_turns(savers: dict[str, BaseCheckpointSaver[Any]]) -> dict[str, float]:
    """Median time of a chat turn, the savers interleaved run by run."""
    medians: dict[str, list[float]] = {name: [] for name in savers}
    for _ in range(RUNS):
        for name, saver in savers.items():
            medians[name].append(statistics.median(run_chat(saver)))
    return {name: statistics.median(values) * 1000 for name, values in medians.items()}


def measure_storage(saver: BaseCheckpointSaver[Any], path: Path) -> dict[str, Any]:
    """Bytes one graph run adds to the saver's file, and ResumableSaver's breakdown."""
    empty = used_bytes(path)
    empty_rows = row_bytes(path)
    run_graph(saver, "async")
    return {
        "parts": breakdown(path, STEPS) if isinstance(saver, ResumableSaver) else "",
        "grown": used_bytes(path) - empty,
        "rows": row_bytes(path) - empty_rows,
    }


def measure_times(savers: dict[str, BaseCheckpointSaver[Any]]) -> dict[str, Any]:
    """Per-step times: async runs interleaved run by run, sync runs in lockstep."""
    timings: dict[str, dict[str, list[float]]] = {
        name: {"async": [], "sync": [], "total": []} for name in savers
    }
    for run in range(ASYNC_RUNS):
        for name, saver in savers.items():
            start = time.perf_counter()
            intervals = run_graph(saver, "async")
            timings[name]["async"].append(statistics.median(intervals))
            timings[name]["total"].append((time.perf_counter() - start) / STEPS)
        if run < RUNS:
            for name, times in run_in_lockstep(savers, run % len(savers)).items():
                timings[name]["sync"].append(statistics.median(times))
    return {
        name: {key: statistics.median(values) * 1000 for key, values in kinds.items()}
        for name, kinds in timings.items()
    }


FSYNC = True


class _NullSaver(BaseCheckpointSaver[str]):
    """Keeps nothing: each step's time is LangGraph's own."""

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return None

    def list(self, *args: Any, **kwargs: Any) -> Iterator[CheckpointTuple]:
        return iter(())

    def put(
        self, config: RunnableConfig, checkpoint: Checkpoint, *rest: Any
    ) -> RunnableConfig:
        configurable = config["configurable"]
        return {
            "configurable": {
                "thread_id": configurable["thread_id"],
                "checkpoint_ns": configurable.get("checkpoint_ns", ""),
                "checkpoint_id": checkpoint["id"],
            }
        }

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        return None


class _SqliteSaver(AbstractContextManager[BaseCheckpointSaver[Any]]):
    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute(f"PRAGMA synchronous = {'FULL' if FSYNC else 'NORMAL'}")
        self.saver = SqliteSaver(self.conn)
        self.saver.setup()

    def __enter__(self) -> BaseCheckpointSaver[Any]:
        return self.saver

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


class _ResumableSaver(AbstractContextManager[BaseCheckpointSaver[Any]]):
    def __init__(self, path: Path) -> None:
        durability = "full" if FSYNC else "normal"
        self.saver = ResumableSaver.from_url(
            f"sqlite:///{path}?durability={durability}"
        )
        # open the store now, so "empty" counts its schema
        next(self.saver.list({"configurable": {"thread_id": "warm-up"}}), None)

    def __enter__(self) -> BaseCheckpointSaver[Any]:
        return self.saver

    def __exit__(self, *exc: object) -> None:
        self.saver.close()


OPENERS: dict[
    str, Callable[[Path], AbstractContextManager[BaseCheckpointSaver[Any]]]
] = {
    "LangGraph SqliteSaver": _SqliteSaver,
    "ResumableSaver (sqlite)": _ResumableSaver,
}


def sync_only(rounds: int) -> None:
    """Lockstep sync runs only: each round's median step per saver, and the ratio."""
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        savers: dict[str, BaseCheckpointSaver[Any]] = {}
        for name, opener in OPENERS.items():
            path = Path(tmp) / name.split()[0] / "storage.db"
            path.parent.mkdir()
            savers[name] = stack.enter_context(opener(path))
        theirs_name, ours_name = OPENERS
        medians: dict[str, list[float]] = {name: [] for name in savers}
        ratios = []
        for run in range(rounds):
            times = run_in_lockstep(savers, run % len(savers))
            for name in savers:
                medians[name].append(statistics.median(times[name]) * 1000)
            ratios.append(medians[ours_name][-1] / medians[theirs_name][-1])
            print(
                f"round {run}: SqliteSaver {medians[theirs_name][-1]:.3f} ms, "
                f"ResumableSaver {medians[ours_name][-1]:.3f} ms, "
                f"ratio {ratios[-1]:.3f}x",
                flush=True,
            )
    theirs, ours = (statistics.median(medians[name]) for name in savers)
    print(
        f"sync step, medians of {rounds} rounds "
        f"({'fsync on every commit' if FSYNC else 'no fsync per commit'}): "
        f"SqliteSaver {theirs:.3f} ms, ResumableSaver {ours:.3f} ms, ratio of "
        f"medians {ours / theirs:.3f}x, median ratio {statistics.median(ratios):.3f}x "
        f"(rounds: {min(ratios):.3f}x to {max(ratios):.3f}x)"
    )


def main() -> None:
    global FSYNC  # noqa: PLW0603 - a command-line switch read by both openers
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-fsync", action="store_true", help="synchronous=NORMAL")
    parser.add_argument(
        "--sync-only",
        type=int,
        nargs="?",
        const=9,
        metavar="ROUNDS",
        help="only the lockstep durability='sync' runs, ROUNDS of them",
    )
    args = parser.parse_args()
    FSYNC = not args.no_fsync
    if args.sync_only:
        sync_only(args.sync_only)
        return
    content = STEPS * MESSAGE_BYTES
    openers = OPENERS
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        savers, results = {}, {}
        for name, opener in openers.items():
            path = Path(tmp) / name.split()[0] / "storage.db"
            path.parent.mkdir()
            savers[name] = stack.enter_context(opener(path))
            results[name] = measure_storage(savers[name], path)
        for name, times in measure_times({**savers, FLOOR: _NullSaver()}).items():
            results.setdefault(name, {}).update(times)
        for name, turn in measure_turns(savers).items():
            results[name]["turn"] = turn
    kb = 1024
    rows: list[tuple[str, ...]] = [
        (
            "saver",
            "file growth",
            "row bytes",
            "x new text",
            "step (async)",
            "step (sync)",
            "run / step",
            "chat turn",
        )
    ]
    for name, r in results.items():
        stored = "rows" in r
        rows.append(
            (
                name,
                f"{r['grown'] / kb:,.0f} KB" if stored else "-",
                f"{r['rows'] / kb:,.0f} KB" if stored else "-",
                f"{r['rows'] / content:.2f}x / {r['grown'] / content:.2f}x"
                if stored
                else "-",
                f"{r['async']:.3f} ms",
                f"{r['sync']:.3f} ms",
                f"{r['total']:.3f} ms",
                f"{r['turn']:.2f} ms" if stored else "-",
            )
        )
    print(
        f"{STEPS} steps, one {MESSAGE_BYTES}-byte message per step: "
        f"{content / kb:.0f} KB of new message text ('x new text': row bytes / "
        f"file growth); per-step times are medians of {ASYNC_RUNS} async and "
        f"{RUNS} sync runs (sync: in lockstep, one step of each saver in turn), "
        f"{'fsync on every commit' if FSYNC else 'no fsync per commit'}; chat turn: "
        f"the median `invoke` of a chat adding a message and a reply per turn for "
        f"{TURNS} turns (the thread grows to {2 * TURNS} messages)"
    )
    print(table(rows))
    theirs, ours = (results[name] for name in openers)
    print(
        "ResumableSaver / SqliteSaver: "
        + ", ".join(
            f"{label} {ours[key] / theirs[key]:.2f}x"
            for label, key in (
                ("row bytes", "rows"),
                ("async step", "async"),
                ("sync step", "sync"),
                ("run / step", "total"),
                ("chat turn", "turn"),
            )
        )
        + f"; {FLOOR} / SqliteSaver: async step "
        f"{results[FLOOR]['async'] / theirs['async']:.2f}x"
    )
    for name, r in results.items():
        if r.get("parts"):
            print(f"{name} row bytes per step: {r['parts']}")


if __name__ == "__main__":
    main()
