"""`resumable demo`: an LLM workflow killed mid-run, resumed, and what that saved.

The parent serves the simulated provider (with injected 429s and 500s), runs the
workflow of `_demo_flow` in a child process on the embedded SQLite store, SIGKILLs
the child about 60% of the way through, resumes the same run in a fresh process,
and reports from the run's ledger and the provider's own request log.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from resumable._engine.engine import Engine
from resumable._engine.ledger import Ledger
from resumable._plural import plural
from resumable.errors import ResumableError, UsageError
from resumable.pricing import DEFAULT_PRICES

TOTAL_CALLS = 101  # 50 summaries, 50 entity lists, 1 report
KILL_AT_CALLS = 60  # about 60% of the way


class DemoFailed(ResumableError):
    """A process of the demo ended other than the demo expects."""


def register(commands: Any, store: argparse.ArgumentParser) -> None:
    """Add the subcommand."""
    demo = commands.add_parser(
        "demo",
        parents=[store],
        help="analyse 50 documents with an LLM, kill the run mid-way, resume, report savings",
    )
    demo.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    demo.add_argument("--run-id", default=None, help=argparse.SUPPRESS)
    demo.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    """Parent: serve the provider, run, kill, resume, report."""
    try:
        if args.child:
            from resumable.cli import _demo_flow

            return _demo_flow.run_child(args.store, args.run_id)
        import openai  # noqa: F401 - the child needs it; say so before starting
    except ImportError:
        raise UsageError(
            "the demo calls its simulated provider through the openai SDK: "
            "pip install 'resumable[openai]'"
        ) from None
    from resumable.simulator import FaultPlan, SimulatedProvider

    run_id = f"demo-{int(time.time())}"
    log_path = Path(".resumable") / f"{run_id}-llm.jsonl"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    faults = FaultPlan(
        rate_limit_p=0.06, server_error_p=0.03, retry_after_ms=150, seed=7
    )
    print(f"demo: run {run_id}: 50 documents -> summaries -> entities -> report")
    print(
        f"demo: store {args.store}; simulated LLM with injected 429s (retry-after) and 500s"
    )
    with SimulatedProvider(
        latency_s=0.05, jitter_s=0.05, faults=faults, log_path=log_path
    ) as llm:
        first = _spawn(args.store, run_id, llm.openai_base_url)
        deadline = time.monotonic() + 120
        while llm.count(status=200) < KILL_AT_CALLS and time.monotonic() < deadline:
            if first.poll() is not None:
                raise DemoFailed(
                    f"the demo's first process ended early: {first.communicate()[1].decode()}"
                )
            time.sleep(0.005)
        first.send_signal(signal.SIGKILL)
        first.communicate()
        done_before = llm.count(status=200)
        print(
            f"demo: killed the process with SIGKILL after {done_before} of "
            f"{plural(TOTAL_CALLS, 'LLM call')}"
        )

        resumed_at = time.monotonic()
        second = _spawn(args.store, run_id, llm.openai_base_url)
        out, err = second.communicate(timeout=300)
        elapsed = time.monotonic() - resumed_at
        if second.returncode != 0:
            raise DemoFailed(
                f"the resumed process failed: {err.decode().strip()[-2000:]}"
            )
        stats = json.loads(out.decode().strip().splitlines()[-1])
        requests = llm.requests()
    ledger = asyncio.run(_ledger(args.store, run_id))
    _report(ledger, requests, stats, elapsed, run_id)
    return 0


async def _ledger(store: str, run_id: str) -> Ledger:
    async with Engine(store) as engine:
        return await engine.ledger(run_id)


def _spawn(store: str, run_id: str, base_url: str) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "resumable.cli",
        "demo",
        "--child",
        "--store",
        store,
    ]
    return subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [*command, "--run-id", run_id],
        env={**os.environ, "RESUMABLE_DEMO_OPENAI_BASE_URL": base_url},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _report(
    ledger: Ledger,
    requests: list[Any],
    stats: dict[str, Any],
    elapsed: float,
    run_id: str,
) -> None:
    resumed = ledger.executions[-1]
    faults = sum(1 for r in requests if r.status in (429, 500))
    to_first = stats.get("to_first_call_s")
    print(f"demo: resumed in a new process and finished in {elapsed:.1f} s")
    print()
    print(f"  steps replayed from the store   {resumed.replayed_steps}")
    print(f"  steps executed after resume     {resumed.incurred.calls}")
    print(f"  LLM calls avoided               {resumed.reused.calls}")
    print(f"  tokens reused                   {resumed.reused.total_tokens:,}")
    print(
        f"  dollars reused                  ${resumed.reused.cost_usd:.4f} "
        f"(gpt-5-mini prices as of {DEFAULT_PRICES['gpt-5-mini'].as_of})"
    )
    if to_first is not None:
        print(
            f"  recovery: first new LLM call    {to_first * 1000:.0f} ms after the resumed run started"
        )
    billed = sum(1 for r in requests if r.status == 200)
    print(f"  provider errors retried         {faults} (429 with retry-after, 500)")
    print(
        f"  provider answered               {plural(billed, 'call')}; "
        f"{billed - ledger.incurred.calls} were in flight when the process died (answered, never committed) and ran again"
    )
    print(
        f"  run total incurred              {plural(ledger.incurred.calls, 'call')}, "
        f"{ledger.incurred.total_tokens:,} tokens, ${ledger.incurred.cost_usd:.4f}"
    )
    print()
    print(
        f"demo: a restart without checkpointing would have paid again for "
        f"{plural(resumed.reused.calls, 'call')} ({resumed.reused.total_tokens:,} tokens, "
        f"${resumed.reused.cost_usd:.4f}) and waited for them"
    )
    print(f"demo: inspect the run with `resumable show {run_id}`")
