"""The `resumable` command line: inspect and drive runs in any store.

Each command group lives in its own module and registers its subcommands here.
Every error a user can cause is printed as one line on stderr with a non-zero exit
status (2 for a usage error, 1 for the rest); no traceback reaches the terminal.
`--store` is taken before or after the command (`$RESUMABLE_STORE` otherwise),
and the commands that only read open an existing store read-only (`STORE_READERS`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from importlib import metadata

from resumable.cli import (
    archive,
    cache,
    check,
    costmodel,
    demo,
    export,
    gc,
    keys,
    runs,
    schedules,
    simulate,
    threads,
    ui,
    worker,
)
from resumable.cli.opening import for_reading, for_reading_and_writing
from resumable.errors import ResumableError, UsageError
from resumable.observability.logs import configure as configure_logging
from resumable.serde.keys import KeyRing, new_aead
from resumable.stores import DEFAULT_URL

__all__ = ["STORE_READERS", "build_parser", "main"]

STORE_READERS = frozenset({"runs", "show", "threads", "show-thread", "export", "check"})
"""Commands that only read a store: it must exist, and is opened read-only."""
_STORE_USERS = frozenset({"ui", "rerun", "cache"})
"""Commands that never create a store but may write one that exists."""
_BROKEN_PIPE = 141  # what a shell reports for a process ended by SIGPIPE (128 + 13)


def _version() -> str:
    try:
        return metadata.version("resumable")
    except metadata.PackageNotFoundError:  # run from a source tree, not installed
        from resumable import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="resumable", description="Inspect and drive durable, resumable runs."
    )
    parser.add_argument(
        "--version", action="version", version=f"resumable {_version()}"
    )
    store_help = (
        "store URL: sqlite:///relative/path.db (from the current folder), "
        "sqlite:////absolute/path.db, postgresql://..., redis://... "
        f"(default: $RESUMABLE_STORE or {DEFAULT_URL})"
    )
    parser.add_argument(
        "--store",
        default=os.environ.get("RESUMABLE_STORE") or DEFAULT_URL,
        help=store_help,
    )
    # the same option after the command; SUPPRESS keeps the value given before it
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument("--store", default=argparse.SUPPRESS, help=store_help)
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=os.environ.get("RESUMABLE_LOG_FORMAT", "text"),
        help="how the resumable.* loggers write to stderr (default: text)",
    )
    parser.add_argument(
        "--log-level",
        default=os.environ.get("RESUMABLE_LOG_LEVEL"),
        help="lowest level logged (default: $RESUMABLE_LOG_LEVEL, else INFO for "
        "`worker`, which then logs each run it claims and finishes, and WARNING "
        "for the rest)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    runs.register(commands, store)
    cache.register(commands, store)
    demo.register(commands, store)
    simulate.register(commands)
    worker.register(commands, store)
    schedules.register(commands, store)
    gc.register(commands, store)
    keys.register(commands, store)
    threads.register(commands, store)
    export.register(commands, store)
    check.register(commands, store)
    archive.register(commands, store)
    costmodel.register(commands)
    ui.register(commands, store)
    return parser


def _check_encryption_key() -> None:
    """A bad $RESUMABLE_ENCRYPTION_KEY, or no cryptography for it, as a one-line error."""
    value = os.environ.get("RESUMABLE_ENCRYPTION_KEY")
    if not value:
        return
    try:
        ring = KeyRing.from_env(value)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        new_aead(bytes(32))
    except ImportError as exc:
        raise UsageError(
            f"RESUMABLE_ENCRYPTION_KEY is set (key {ring.current!r}) but {exc}"
        ) from None


def _run(args: argparse.Namespace) -> int:
    if getattr(args, "store", None) is not None:
        _check_encryption_key()
        if args.command in STORE_READERS:
            args.store = for_reading(args.store)
        elif args.command in _STORE_USERS:
            args.store = for_reading_and_writing(args.store)
    result = args.handler(args)
    if asyncio.iscoroutine(result):
        result = asyncio.run(result)
    sys.stdout.flush()  # a closed pipe (`| head`) is reported here, not at exit
    return int(result or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit status."""
    args = build_parser().parse_args(argv)
    logger = logging.getLogger("resumable")
    level = logger.level
    default_level = "INFO" if args.command == "worker" else "WARNING"
    handler = configure_logging(args.log_format, args.log_level or default_level)
    try:
        return _run(args)
    except UsageError as exc:  # the command line asked for what cannot be done
        print(f"resumable: {exc}", file=sys.stderr)
        return 2
    except ResumableError as exc:
        print(f"resumable: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # the reader stopped (`resumable runs | head`): silent, as other tools are;
        # stdout goes to /dev/null so the interpreter's last flush cannot fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return _BROKEN_PIPE
    except KeyboardInterrupt:
        print("resumable: interrupted", file=sys.stderr)
        return 130
    finally:  # main() may be called again in this process (tests, embedding)
        logger.removeHandler(handler)
        logger.setLevel(level)
