"""The `resumable` command line: inspect and drive runs in any store.

Each command group lives in its own module and registers its subcommands here.
Every error a user can cause is printed as one line on stderr with exit status 1;
no traceback reaches the terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
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
    ui,
    worker,
)
from resumable.errors import ResumableError, UsageError
from resumable.observability.logs import configure as configure_logging
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
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=os.environ.get("RESUMABLE_LOG_FORMAT", "text"),
        help="how the resumable.* loggers write to stderr (default: text)",
    )
    parser.add_argument(
        "--log-level",
        default=os.environ.get("RESUMABLE_LOG_LEVEL", "WARNING"),
        help="lowest level logged (default: WARNING; INFO shows each run's end)",
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
    ui.register(commands, store)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit status."""
    args = build_parser().parse_args(argv)
    logger = logging.getLogger("resumable")
    level = logger.level
    handler = configure_logging(args.log_format, args.log_level)
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
    finally:  # main() may be called again in this process (tests, embedding)
        logger.removeHandler(handler)
        logger.setLevel(level)
    return int(result or 0)
