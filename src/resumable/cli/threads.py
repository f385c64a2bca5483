"""`resumable threads | show-thread`: every thread holding saved states.

Three kinds, listed and shown by the same commands: `save_state` threads
("state"), conversations (`engine.conversation`, "conversation") and LangGraph
threads stored by ResumableSaver ("langgraph"). LangGraph checkpoints are read
through the layout of `resumable.integrations.langgraph_threads`, so this works
without langgraph installed.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from resumable._engine.conversation import NAMESPACE as CONVERSATION
from resumable._engine.engine import Engine
from resumable._plural import plural
from resumable.cli._table import clip, table, when
from resumable.errors import CheckpointNotFound, ResumableError, UsageError
from resumable.integrations.langgraph_threads import (
    CheckpointInfo,
    ThreadInfo,
    checkpoint_history,
    list_threads,
)
from resumable.serde.view import one_line

_ID_WIDTH = 40
_VALUES_WIDTH = 60


def register(commands: Any, store: argparse.ArgumentParser) -> None:
    """Add this group's subcommands."""
    listing = commands.add_parser(
        "threads",
        parents=[store],
        help="list threads (save_state, conversations, LangGraph), most recently "
        "updated first",
    )
    listing.add_argument(
        "--limit", type=int, default=50, help="at most N threads (default: %(default)s)"
    )
    listing.set_defaults(handler=list_all_threads)

    show = commands.add_parser(
        "show-thread",
        parents=[store],
        help="show a thread's checkpoint history (every namespace), with values",
    )
    show.add_argument("thread_id", help="the thread to show")
    show.add_argument("--checkpoint", help="this checkpoint only")
    show.add_argument(
        "--full", action="store_true", help="print each checkpoint's whole values"
    )
    show.set_defaults(handler=show_thread)


def _text(value: object) -> str:
    return "" if value is None else str(value)


async def list_all_threads(args: argparse.Namespace) -> int:
    """Print every thread as a table, with its kind."""
    if args.limit < 1:
        raise UsageError(f"--limit must be at least 1 (got {args.limit})")
    async with Engine(args.store) as engine:
        page = await engine.threads(limit=args.limit)
        graphs = {t.thread_id: t for t in await list_threads(engine)}
        rows = [await _thread_row(engine, t.thread_id, graphs) for t in page.threads]
    if not rows:
        print("no threads")
        return 0
    headers = ["THREAD", "KIND", "LATEST CHECKPOINT", "STEP", "SOURCE", "UPDATED (UTC)"]
    print(table(headers, rows, right=[3]))
    return 0


async def _thread_row(
    engine: Engine, thread_id: str, graphs: dict[str, ThreadInfo]
) -> list[str]:
    graph = graphs.get(thread_id)
    if graph is not None:
        return [
            thread_id,
            "langgraph",
            graph.checkpoint_id,
            _text(graph.step),
            _text(graph.source),
            when(graph.updated_at),
        ]
    latest = await engine.state_history(thread_id, limit=1)
    if not latest:
        return [thread_id, "-", "-", "", "", "-"]
    newest = latest[0]
    kind = "conversation" if newest.namespace == CONVERSATION else "state"
    return [
        thread_id,
        kind,
        newest.checkpoint_id,
        "",
        _text(newest.label),
        when(newest.created_at),
    ]


async def show_thread(args: argparse.Namespace) -> int:
    """Print a thread's checkpoints in every namespace, newest first, with values.

    Values are generic views (`resumable.serde.view`): readable without the
    graph's code or LangChain installed.
    """
    async with Engine(args.store) as engine:
        history = await checkpoint_history(engine, args.thread_id)
        if not history:  # a save_state thread or a conversation
            return await _show_states(engine, args)
        if args.checkpoint is not None:
            history = [c for c in history if c.checkpoint_id == args.checkpoint]
        values = [await _values(engine, args.thread_id, c) for c in history]
    if not history:
        raise CheckpointNotFound(
            thread_id=args.thread_id,
            detail=f"has no checkpoint {args.checkpoint!r} in this store; list its "
            f"checkpoints with `resumable show-thread {args.thread_id}`",
        )
    rows = [
        [
            checkpoint.checkpoint_id,
            clip(checkpoint.namespace, _ID_WIDTH) or "(root)",
            _text(checkpoint.parent_id),
            _text(checkpoint.step),
            _text(checkpoint.source),
            str(checkpoint.writes),
            when(checkpoint.created_at),
            "" if args.full else _preview(value),
        ]
        for checkpoint, value in zip(history, values, strict=True)
    ]
    headers = [
        "CHECKPOINT",
        "NAMESPACE",
        "PARENT",
        "STEP",
        "SOURCE",
        "WRITES",
        "CREATED (UTC)",
        "VALUES",
    ]
    print(f"thread  {args.thread_id}  ({plural(len(history), 'checkpoint')})\n")
    print(table(headers, rows, right=[3, 5]))
    if args.full:
        for checkpoint, value in zip(history, values, strict=True):
            print(f"\n{checkpoint.checkpoint_id} {checkpoint.namespace or '(root)'}")
            if isinstance(value, ResumableError):
                print(f"<unreadable: {value}>")
            else:
                print(json.dumps(value, indent=2, ensure_ascii=False))
    return 0


async def _show_states(engine: Engine, args: argparse.Namespace) -> int:
    """Print a save_state thread's or a conversation's checkpoints, newest first."""
    thread_id = args.thread_id
    history = await engine.state_history(thread_id)
    if args.checkpoint is not None:
        history = [c for c in history if c.checkpoint_id == args.checkpoint]
    if not history:
        which = "" if args.checkpoint is None else f" checkpoint {args.checkpoint!r}"
        raise CheckpointNotFound(
            thread_id=thread_id,
            detail=f"has no saved states{which} in this store; list threads with "
            f"`resumable threads`",
        )
    values: list[Any] = []
    for checkpoint in history:
        try:
            values.append(
                await engine.view_state(
                    thread_id,
                    checkpoint_id=checkpoint.checkpoint_id,
                    namespace=checkpoint.namespace,
                )
            )
        except ResumableError as exc:
            values.append(exc)
    rows = [
        [
            checkpoint.checkpoint_id,
            clip(checkpoint.namespace, _ID_WIDTH) or '""',
            _text(checkpoint.label),
            _text(checkpoint.parent_id),
            when(checkpoint.created_at),
            "" if args.full else _preview(value),
        ]
        for checkpoint, value in zip(history, values, strict=True)
    ]
    headers = ["CHECKPOINT", "NAMESPACE", "LABEL", "PARENT", "CREATED (UTC)", "VALUES"]
    print(f"thread  {thread_id}  ({len(history)} checkpoints)\n")
    print(table(headers, rows))
    if args.full:
        for checkpoint, value in zip(history, values, strict=True):
            namespace = checkpoint.namespace or '""'
            print(f"\n{checkpoint.checkpoint_id} {namespace}")
            if isinstance(value, ResumableError):
                print(f"<unreadable: {value}>")
            else:
                print(json.dumps(value, indent=2, ensure_ascii=False))
    return 0


async def _values(engine: Engine, thread_id: str, checkpoint: CheckpointInfo) -> Any:
    """The generic view of a checkpoint's channel values, or why it is unreadable."""
    try:
        state = await engine.view_state(
            thread_id,
            checkpoint_id=checkpoint.checkpoint_id,
            namespace=checkpoint.namespace,
        )
    except ResumableError as exc:
        return exc
    # a ResumableSaver checkpoint: LangGraph's channel values under "values"
    return state.get("values", state) if isinstance(state, dict) else state


def _preview(value: Any) -> str:
    if isinstance(value, ResumableError):
        return clip(f"<unreadable: {value}>", _VALUES_WIDTH)
    return one_line(value, _VALUES_WIDTH)
