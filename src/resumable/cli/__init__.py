"""The `resumable` command line: inspect and drive runs in any store.

Each command group lives in its own module and registers its subcommands here.
Every error a user can cause is printed as one line on stderr with exit status 1;
no traceback reaches the terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence

from resumable.cli import (
    archive,
    check,
    costmodel,
    demo,
    export,
    gc,
    keys,
    runs,
    simulate,
    threads,
    worker,
)
from resumable.errors import ResumableError, UsageError
from resumable.stores import DEFAULT_URL

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="resumable", description="Inspect and drive durable, resumable runs."
    )
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument(
        "--store",
        default=os.environ.get("RESUMABLE_STORE", DEFAULT_URL),
        help="store URL (default: $RESUMABLE_STORE or %(default)s)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    runs.register(commands, store)
    demo.register(commands, store)
    simulate.register(commands)
    worker.register(commands, store)
    gc.register(commands, store)
    keys.register(commands, store)
    threads.register(commands, store)
    export.register(commands, store)
    check.register(commands, store)
    archive.register(commands, store)
    costmodel.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit status."""
    args = build_parser().parse_args(argv)
    try:
        result = args.handler(args)
        if asyncio.iscoroutine(result):
            result = asyncio.run(result)
    except UsageError as exc:  # the command line asked for what cannot be done
        print(f"resumable: {exc}", file=sys.stderr)
        return 2
    except ResumableError as exc:
        print(f"resumable: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("resumable: interrupted", file=sys.stderr)
        return 130
    return int(result or 0)
