"""`resumable worker`: claim and execute runnable runs until stopped."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import re
import signal
import sys
from pathlib import Path
from typing import Any

from resumable._engine.engine import Engine
from resumable._engine.worker import Queue
from resumable._plural import plural
from resumable.cli import _prices as prices
from resumable.errors import UsageError
from resumable.observability import Observer

_QUEUE = re.compile(
    r"^(?P<name>[^=]+)=(?P<concurrency>\d*)(?::(?P<rate>\d+)/(?P<per>\d+(?:\.\d+)?)s?)?$"
)


def register(commands: Any, store: argparse.ArgumentParser) -> None:
    """Add the subcommand."""
    worker = commands.add_parser(
        "worker",
        parents=[store],
        help="claim and run queued, crashed and woken runs (Ctrl-C or SIGTERM to stop)",
    )
    worker.add_argument(
        "--app", required=True, action="append", help="module defining workflows"
    )
    worker.add_argument(
        "--concurrency",
        type=int,
        default=8,
        help="runs executed at once (default: %(default)s)",
    )
    worker.add_argument(
        "--queue",
        action="append",
        default=[],
        metavar="NAME=CONCURRENCY[:RATE/SECONDS]",
        help="limits for a queue, e.g. docs=4:60/60 (4 at once, 60 starts a minute)",
    )
    worker.add_argument("--lease-ttl", type=float, default=5.0, help="seconds")
    worker.add_argument(
        "--version",
        action="append",
        dest="versions",
        help="claim only runs started on this @workflow(version=) (repeatable); "
        "default: any run",
    )
    worker.add_argument(
        "--metrics-port",
        type=int,
        metavar="N",
        help="serve Prometheus /metrics and /healthz on this port (0: any free one); "
        "needs resumable[prometheus]",
    )
    worker.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        help="address the metrics endpoint listens on (default: %(default)s)",
    )
    worker.add_argument(
        "--traces",
        action="store_true",
        help="emit OpenTelemetry spans to the global TracerProvider (set up by an "
        "--app module or opentelemetry-instrument); needs resumable[otel]",
    )
    prices.add_option(worker)  # the prices its runs' dollar budgets count with
    worker.set_defaults(handler=run_worker)


def _observers(args: argparse.Namespace) -> tuple[list[Observer], Any]:
    """The observers the flags ask for, and the Metrics among them (or None)."""
    from resumable import observability

    observers: list[Observer] = []
    metrics = None
    try:
        if args.traces:
            observers.append(observability.Tracing())
        if args.metrics_port is not None:
            metrics = observability.Metrics()
            observers.append(metrics)
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    return observers, metrics


def parse_queue(text: str) -> tuple[str, Queue]:
    """`docs=4:60/60` -> ("docs", Queue(concurrency=4, rate=60, per=60))."""
    match = _QUEUE.match(text)
    if match is None:
        raise UsageError(f"--queue {text!r}: expected NAME=CONCURRENCY[:RATE/SECONDS]")
    concurrency = int(match["concurrency"]) if match["concurrency"] else None
    rate = int(match["rate"]) if match["rate"] else None
    per = float(match["per"]) if match["per"] else 60.0
    return match["name"], Queue(concurrency=concurrency, rate=rate, per=per)


async def run_worker(args: argparse.Namespace) -> int:
    """Import the apps, then work until a signal asks to stop."""
    sys.path.insert(0, str(Path.cwd()))
    for app in args.app:
        try:
            importlib.import_module(app)
        except ImportError as exc:
            raise UsageError(f"cannot import --app {app!r}: {exc}") from None
    queues = dict(parse_queue(text) for text in args.queue)
    table = prices.price_table(args)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    observers, metrics = _observers(args)
    async with Engine(
        args.store, lease_ttl_s=args.lease_ttl, observers=observers, prices=table
    ) as engine:
        worker = engine.worker(
            concurrency=args.concurrency, queues=queues, versions=args.versions
        )
        versions = ", ".join(args.versions) if args.versions else "any"
        print(
            f"worker {engine.owner} on {engine!r}: concurrency {args.concurrency}, "
            f"versions {versions}",
            flush=True,
        )
        endpoint = None
        if metrics is not None:
            from resumable.observability.endpoint import MetricsEndpoint

            endpoint = MetricsEndpoint(metrics, engine.store)
            port = await endpoint.start(args.metrics_port, args.metrics_host)
            print(
                f"metrics on http://{args.metrics_host}:{port}/metrics "
                f"(health: /healthz)",
                flush=True,
            )
        try:
            await worker.run(stop=stop)
        finally:
            if endpoint is not None:
                await endpoint.close()
    print(f"worker stopped after {plural(worker.completed, 'run')}", flush=True)
    return 0
