"""`resumable rekey`: re-encrypt a store under its current key."""

from __future__ import annotations

import argparse
from typing import Any

from resumable._engine.engine import Engine
from resumable._plural import plural


def register(commands: Any, store: argparse.ArgumentParser) -> None:
    """Add the subcommand."""
    rekey = commands.add_parser(
        "rekey",
        parents=[store],
        help="re-encrypt every payload under the first key of $RESUMABLE_ENCRYPTION_KEY",
        description="Set RESUMABLE_ENCRYPTION_KEY to 'new:<base64>,old:<base64>' (the new "
        "key first). Safe to interrupt: run it again to finish.",
    )
    rekey.add_argument("--dry-run", action="store_true", help="count; rewrite nothing")
    rekey.add_argument(
        "--batch",
        type=int,
        default=500,
        help="payloads rewritten per transaction (default: %(default)s)",
    )
    rekey.set_defaults(handler=run_rekey)


async def run_rekey(args: argparse.Namespace) -> int:
    """One pass over every payload kind."""
    async with Engine(args.store) as engine:
        report = await engine.rekey(batch=args.batch, dry_run=args.dry_run)
    verb = "would re-encrypt" if args.dry_run else "re-encrypted"
    print(
        f"rekey {verb} {plural(report.total_rewritten, 'payload')}; "
        f"{report.current} {'was' if report.current == 1 else 'were'} current"
    )
    for kind, count in sorted(report.rewritten.items()):
        print(f"  {kind:<18} {count}")
    if report.changed_meanwhile:
        print(
            f"  {report.changed_meanwhile} changed meanwhile: run rekey again to finish them"
        )
    return 0
