"""`resumable simulate-llm`: the simulated LLM provider as a standalone server."""

from __future__ import annotations

import argparse
import json
from typing import Any

from resumable.errors import UsageError


def register(commands: Any) -> None:
    """Add the subcommand."""
    sim = commands.add_parser(
        "simulate-llm",
        help="serve a simulated OpenAI/Anthropic API on 127.0.0.1 (tests, demos)",
    )
    sim.add_argument(
        "--host", default="127.0.0.1", help="address (default: %(default)s)"
    )
    sim.add_argument(
        "--port", type=int, default=8089, help="port (default: %(default)s)"
    )
    sim.add_argument("--latency", type=float, default=0.0, help="seconds per request")
    sim.add_argument("--jitter", type=float, default=0.0, help="random extra seconds")
    sim.add_argument("--faults", help="a FaultPlan as JSON")
    sim.add_argument("--log-path", help="append every request to this JSONL file")
    sim.set_defaults(handler=simulate)


def simulate(args: argparse.Namespace) -> int:
    """Serve until interrupted."""
    from resumable.simulator import FaultPlan, SimulatedProvider, serve

    try:
        faults = FaultPlan.from_dict(json.loads(args.faults)) if args.faults else None
    except (ValueError, TypeError) as exc:
        raise UsageError(f"--faults is not a valid fault plan: {exc}") from None

    def ready(provider: SimulatedProvider) -> None:
        print(
            f"OPENAI_BASE_URL={provider.openai_base_url} "
            f"ANTHROPIC_BASE_URL={provider.anthropic_base_url}",
            flush=True,
        )

    serve(
        host=args.host,
        port=args.port,
        latency_s=args.latency,
        jitter_s=args.jitter,
        faults=faults,
        log_path=args.log_path,
        on_ready=ready,
    )
    return 0
