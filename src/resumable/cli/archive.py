"""`resumable archive`: move finished runs' payloads to the object store, one object per run."""

from __future__ import annotations

import argparse
from typing import Any

from resumable._engine.engine import Engine
from resumable.cli.gc import parse_age


def register(commands: Any, store: argparse.ArgumentParser) -> None:
    """Add the subcommand."""
    archive = commands.add_parser(
        "archive",
        parents=[store],
        help="move finished runs' history to the object store (?blobs=...)",
    )
    archive.add_argument(
        "--older-than",
        required=True,
        help="age since the run last changed, e.g. 30d, 12h",
    )
    archive.add_argument(
        "--limit", type=int, default=1000, help="at most this many runs per call"
    )
    archive.set_defaults(handler=archive_runs)


async def archive_runs(args: argparse.Namespace) -> int:
    """Archive the finished runs older than --older-than and print what moved."""
    async with Engine(args.store) as engine:
        done = await engine.archive(
            older_than=parse_age(args.older_than), limit=args.limit
        )
    moved = [item for item in done if item.payloads]
    runs = sum(item.kind == "run" for item in moved)
    total = sum(item.bytes_moved for item in moved)
    print(
        f"archived {runs} runs and {len(moved) - runs} threads ({total:,} bytes of "
        f"payloads moved to the object store); {len(done) - len(moved)} had nothing "
        f"left to move"
    )
    for item in moved[:20]:
        print(f"  {item.kind} {item.name}: {item.payloads} payloads -> {item.key}")
    if len(moved) > 20:
        print(f"  ... and {len(moved) - 20} more")
    return 0
