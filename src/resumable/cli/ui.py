"""`resumable ui`: serve the web dashboard (needs `pip install 'resumable[ui]'`)."""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from resumable._engine.engine import Engine
from resumable.cli import _prices as prices
from resumable.cli.runs import _import_app
from resumable.errors import UsageError
from resumable.ui import check_bind


def register(commands: Any, store: argparse.ArgumentParser) -> None:
    """Add the `ui` subcommand."""
    ui = commands.add_parser(
        "ui", parents=[store], help="serve a web dashboard of the store's runs"
    )
    ui.add_argument(
        "--host", default="127.0.0.1", help="address (default: %(default)s)"
    )
    ui.add_argument(
        "--port", type=int, default=8765, help="port (default: %(default)s)"
    )
    ui.add_argument(
        "--token",
        default=os.environ.get("RESUMABLE_UI_TOKEN"),
        help="require this token (bearer header or login cookie); needed for a "
        "non-loopback --host (default: $RESUMABLE_UI_TOKEN)",
    )
    ui.add_argument(
        "--app",
        action="append",
        default=[],
        help="import a module that defines workflows, so Resume can run them here",
    )
    prices.add_option(ui)
    ui.set_defaults(handler=serve_ui)


def serve_ui(args: argparse.Namespace) -> int:
    """Check the bind address, then serve until interrupted."""
    check_bind(args.host, args.token)
    for app in args.app:
        _import_app(app)
    try:
        import uvicorn

        from resumable.ui.app import create_app
    except ImportError as exc:
        raise UsageError(
            f"resumable ui needs its extra: pip install 'resumable[ui]' ({exc})"
        ) from None

    async def main() -> None:
        async with Engine(args.store, prices=prices.price_table(args)) as engine:
            await engine.count_runs()  # a store that is not there: an error now
            app = create_app(engine, token=args.token, host=args.host)
            config = uvicorn.Config(
                app, host=args.host, port=args.port, log_level="warning"
            )
            print(
                f"resumable ui: http://{args.host}:{args.port}/ ({engine.store.url})",
                flush=True,
            )
            await uvicorn.Server(config).serve()

    asyncio.run(main())
    return 0
