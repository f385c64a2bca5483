"""`python -m resumable.simulator`: run a simulated provider in the foreground.

Prints one line once listening, `OPENAI_BASE_URL=... ANTHROPIC_BASE_URL=...`,
so a parent process can read the URLs (and the port, with `--port 0`).
"""

from __future__ import annotations

import argparse
import json
import sys

from resumable.simulator.faults import FaultPlan
from resumable.simulator.server import DEFAULT_PORT, SimulatedProvider, serve


def _fault_plan(text: str) -> FaultPlan:
    try:
        return FaultPlan.from_dict(json.loads(text))
    except (ValueError, TypeError, KeyError) as exc:
        raise argparse.ArgumentTypeError(f"not a FaultPlan: {exc}") from exc


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="python -m resumable.simulator",
        description="Run a simulated OpenAI/Anthropic provider in the foreground.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="0 picks a free port"
    )
    parser.add_argument(
        "--latency", type=float, default=0.0, help="seconds before each answer"
    )
    parser.add_argument(
        "--jitter", type=float, default=0.0, help="extra random seconds"
    )
    parser.add_argument(
        "--faults",
        type=_fault_plan,
        default=None,
        help='a FaultPlan as JSON, e.g. \'{"rate_limit_p": 0.1, "seed": 7}\'',
    )
    parser.add_argument(
        "--log-path", default=None, help="append each request to this JSONL file"
    )
    args = parser.parse_args(argv)

    def announce(provider: SimulatedProvider) -> None:
        sys.stdout.write(
            f"OPENAI_BASE_URL={provider.openai_base_url} "
            f"ANTHROPIC_BASE_URL={provider.anthropic_base_url}\n"
        )
        sys.stdout.flush()

    serve(
        host=args.host,
        port=args.port,
        latency_s=args.latency,
        jitter_s=args.jitter,
        faults=args.faults,
        log_path=args.log_path,
        on_ready=announce,
    )


if __name__ == "__main__":
    main()
