"""`resumable archive`: move finished runs' and cold threads' history to the object store.

`--restore RUN_ID` puts one run's journal and inputs back in the primary store,
`--restore-thread THREAD_ID` one thread's archived saved states.
"""

from __future__ import annotations

import argparse
from typing import Any

from resumable._engine.engine import Engine
from resumable._plural import plural
from resumable.cli.gc import parse_age


def register(commands: Any, store: argparse.ArgumentParser) -> None:
    """Add the subcommand."""
    archive = commands.add_parser(
        "archive",
        parents=[store],
        help="move finished runs' and cold threads' history to the object store (?blobs=...)",
    )
    which = archive.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--older-than",
        help="age since the run last changed, e.g. 30d, 12h",
    )
    which.add_argument(
        "--restore",
        metavar="RUN_ID",
        help="put this archived run's journal back in the primary store",
    )
    which.add_argument(
        "--restore-thread",
        metavar="THREAD_ID",
        help="put this thread's archived saved states back in the primary store",
    )
    archive.add_argument(
        "--limit",
        type=int,
        default=1000,
        help="at most this many runs, and this many threads, per call",
    )
    archive.set_defaults(handler=archive_runs)


async def archive_runs(args: argparse.Namespace) -> int:
    """Archive the finished runs older than --older-than and print what moved."""
    if args.restore is not None:
        return await restore_run(args)
    if args.restore_thread is not None:
        return await restore_thread(args)
    async with Engine(args.store) as engine:
        done = await engine.archive(
            older_than=parse_age(args.older_than), limit=args.limit
        )
    moved = [item for item in done if item.payloads]
    runs = sum(item.kind == "run" for item in moved)
    total = sum(item.bytes_moved for item in moved)
    print(
        f"archived {plural(runs, 'run')} and {plural(len(moved) - runs, 'thread')} "
        f"({plural(total, 'byte')} written to the object store); "
        f"{len(done) - len(moved)} had nothing left to move"
    )
    for item in moved[:20]:
        what = "records" if item.kind == "run" else "payloads"
        print(f"  {item.kind} {item.name}: {item.payloads} {what} -> {item.key}")
    if len(moved) > 20:
        print(f"  ... and {len(moved) - 20} more")
    return 0


async def restore_run(args: argparse.Namespace) -> int:
    """Put the run named by --restore back in the primary store."""
    async with Engine(args.store) as engine:
        restored = await engine.unarchive(args.restore)
    if restored:
        print(f"run {args.restore!r}: journal and inputs are back in the store")
    else:
        print(f"run {args.restore!r} was not archived; nothing changed")
    return 0


async def restore_thread(args: argparse.Namespace) -> int:
    """Put the thread named by --restore-thread back in the primary store."""
    async with Engine(args.store) as engine:
        restored = await engine.unarchive_thread(args.restore_thread)
    if restored:
        print(
            f"thread {args.restore_thread!r}: its archived saved states are back "
            f"in the store"
        )
    else:
        print(f"thread {args.restore_thread!r} was not archived; nothing changed")
    return 0
