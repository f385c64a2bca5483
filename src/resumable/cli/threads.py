"""`resumable threads | show-thread`: LangGraph threads stored by ResumableSaver.

Reads the layout of `resumable.integrations.langgraph_threads`, so it works without
langgraph installed.
"""

from __future__ import annotations

import argparse
from typing import Any

from resumable._engine.engine import Engine
from resumable.cli._table import clip, table, when
from resumable.errors import ResumableError
from resumable.integrations.langgraph_threads import checkpoint_history, list_threads

_ID_WIDTH = 40


def register(commands: Any, store: argparse.ArgumentParser) -> None:
    """Add this group's subcommands."""
    listing = commands.add_parser(
        "threads",
        parents=[store],
        help="list LangGraph threads (ResumableSaver), most recently updated first",
    )
    listing.add_argument("--limit", type=int, default=50)
    listing.set_defaults(handler=list_langgraph_threads)

    show = commands.add_parser(
        "show-thread",
        parents=[store],
        help="show a LangGraph thread's checkpoint history",
    )
    show.add_argument("thread_id")
    show.set_defaults(handler=show_thread)


def _text(value: object) -> str:
    return "" if value is None else str(value)


async def list_langgraph_threads(args: argparse.Namespace) -> int:
    """Print LangGraph threads as a table."""
    if args.limit < 1:
        raise ResumableError(f"--limit must be at least 1 (got {args.limit})")
    async with Engine(args.store) as engine:
        found = await list_threads(engine, limit=args.limit)
    if not found:
        print("no LangGraph threads")
        return 0
    rows = [
        [
            thread.thread_id,
            thread.checkpoint_id,
            _text(thread.step),
            _text(thread.source),
            when(thread.updated_at),
        ]
        for thread in found
    ]
    headers = ["THREAD", "LATEST CHECKPOINT", "STEP", "SOURCE", "UPDATED (UTC)"]
    print(table(headers, rows, right=[2]))
    return 0


async def show_thread(args: argparse.Namespace) -> int:
    """Print a thread's checkpoints in every namespace, newest first."""
    async with Engine(args.store) as engine:
        history = await checkpoint_history(engine, args.thread_id)
    if not history:
        raise ResumableError(
            f"thread {args.thread_id!r} has no LangGraph checkpoints in this store; "
            f"list threads with `resumable threads`"
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
        ]
        for checkpoint in history
    ]
    headers = [
        "CHECKPOINT",
        "NAMESPACE",
        "PARENT",
        "STEP",
        "SOURCE",
        "WRITES",
        "CREATED (UTC)",
    ]
    print(f"thread  {args.thread_id}  ({len(history)} checkpoints)\n")
    print(table(headers, rows, right=[3, 5]))
    return 0
