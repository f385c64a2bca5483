"""`resumable cost-model`: storage, writes, latency, store cost and LLM spend avoided.

The arithmetic lives in `resumable.costmodel` (its docstring has the formulas);
this module reads the arguments, or a store's real runs (`--from-store`), and
prints one column per request rate.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from resumable._engine.engine import Engine
from resumable._plural import plural
from resumable.cli import _prices as prices
from resumable.cli.opening import for_reading
from resumable.costmodel import (
    STORE_KINDS,
    Inputs,
    StepCost,
    break_even,
    estimate,
    load_overheads,
    step_cost,
)
from resumable.costobserved import Observed, observe
from resumable.errors import UsageError
from resumable.pricing import PriceTable

DEFAULT_RATES = (1_000, 10_000, 100_000)


def register(commands: Any) -> None:
    """Add the subcommand."""
    cost = commands.add_parser(
        "cost-model",
        help="what durability costs and saves at 1K/10K/100K requests a day",
        description="Print storage, write rate, added latency, store cost, LLM spend "
        "avoided by resuming instead of restarting, ROI and the break-even.",
    )
    shape = cost.add_argument_group("the request (or --from-store)")
    shape.add_argument("--steps", type=int, default=10, help="steps per request")
    shape.add_argument("--model", default="gpt-5-mini", help="model of every step")
    shape.add_argument("--input-tokens", type=int, default=2000, help="per step")
    shape.add_argument("--output-tokens", type=int, default=500, help="per step")
    shape.add_argument(
        "--step",
        action="append",
        default=[],
        metavar="MODEL:IN:OUT",
        help="one step, in order (repeat; replaces --steps/--model/--*-tokens)",
    )
    shape.add_argument(
        "--payload-bytes",
        type=int,
        help="stored bytes per step (default: 4 x output tokens)",
    )
    shape.add_argument(
        "--failure-rate", type=float, help="per step attempt (default 0.01)"
    )
    shape.add_argument(
        "--step-seconds", type=float, help="wall time of a step (default 2)"
    )
    shape.add_argument(
        "--cache-hit-rate",
        type=float,
        default=0.0,
        help="share of step calls served from the step cache, 0 to 1 (default 0)",
    )
    shape.add_argument(
        "--from-store", metavar="URL", help="derive the request from real runs"
    )
    shape.add_argument(
        "--workflow", help="with --from-store: only this workflow's runs"
    )
    shape.add_argument("--limit", type=int, default=1000, help="with --from-store")
    _load_options(cost.add_argument_group("load, store and prices"))
    cost.add_argument("--json", action="store_true", help="print JSON")
    cost.set_defaults(handler=cost_model)


def _load_options(load: Any) -> None:
    """The options of the load, the store and the prices."""
    load.add_argument(
        "--requests-per-day",
        type=int,
        action="append",
        help="repeat; default 1K 10K 100K",
    )
    load.add_argument(
        "--store-kind",
        choices=STORE_KINDS,
        default="sqlite",
        help="the store priced (default: %(default)s)",
    )
    load.add_argument(
        "--retention-days",
        type=float,
        default=30.0,
        help="how long runs are kept before gc (default: %(default)s)",
    )
    load.add_argument("--lease-ttl", type=float, default=5.0, help="seconds")
    load.add_argument(
        "--usd-per-gb-month",
        type=float,
        default=0.10,
        help="storage price (default: %(default)s)",
    )
    load.add_argument(
        "--usd-per-million-writes",
        type=float,
        default=0.0,
        help="write price, for stores billed per write (default: %(default)s)",
    )
    load.add_argument("--store-usd-per-month", type=float, default=0.0, help="fixed")
    load.add_argument("--overhead-file", type=Path, help="measured figures (JSON)")
    load.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="MODEL=IN,OUT[,CACHED]",
        help=prices.HELP,
    )


def _steps(args: argparse.Namespace, table: PriceTable) -> tuple[StepCost, ...]:
    specs = [tuple(text.split(":")) for text in args.step] or [
        (args.model, str(args.input_tokens), str(args.output_tokens))
    ] * args.steps
    steps = []
    for spec in specs:
        if len(spec) != 3 or not spec[1].isdigit() or not spec[2].isdigit():
            raise UsageError(
                f"--step {':'.join(spec)!r}: write MODEL:INPUT_TOKENS:OUTPUT_TOKENS, "
                "e.g. gpt-5-mini:2000:500"
            )
        if table.price(spec[0]) is None:
            raise UsageError(
                f"cost-model: {spec[0]!r} is unpriced ({spec[1]} input and {spec[2]} "
                f"output tokens a step); price it with --price {spec[0]}=IN,OUT "
                "(USD per million tokens), or pick a priced --model"
            )
        try:
            steps.append(
                step_cost(
                    table,
                    model=spec[0],
                    input_tokens=int(spec[1]),
                    output_tokens=int(spec[2]),
                    payload_bytes=args.payload_bytes,
                )
            )
        except ValueError as exc:
            raise UsageError(f"cost-model: {exc}") from exc
    return tuple(steps)


def _refuse_unpriced(seen: Observed) -> None:
    """The spend avoided cannot be known while some calls have no price."""
    if not seen.unpriced_models:
        return
    models = ", ".join(seen.unpriced_models)
    raise UsageError(
        f"cost-model: the runs read made {plural(seen.unpriced_calls, 'call')} to "
        f"unpriced models ({models}; {seen.input_tokens_per_step:.0f} input and "
        f"{seen.output_tokens_per_step:.0f} output tokens a step on average); price "
        "them with --price MODEL=IN,OUT (USD per million tokens)"
    )


def _observed_steps(seen: Observed, args: argparse.Namespace) -> tuple[StepCost, ...]:
    count = max(round(seen.steps_per_run), 1)
    payload = args.payload_bytes
    step = StepCost(
        cost_usd=seen.cost_usd_per_step,
        payload_bytes=round(seen.payload_bytes_per_step)
        if payload is None
        else payload,
        label=f"observed {seen.input_tokens_per_step:.0f}in/"
        f"{seen.output_tokens_per_step:.0f}out",
    )
    return (step,) * count


async def cost_model(args: argparse.Namespace) -> int:
    """Print the model's figures for each request rate."""
    if args.steps < 1:
        raise UsageError(f"--steps must be at least 1 (got {args.steps})")
    overheads = load_overheads(
        args.overhead_file.read_text(encoding="utf-8") if args.overhead_file else None
    )
    overhead = overheads.get(args.store_kind)
    if overhead is None:
        raise UsageError(
            f"no measured overhead for store kind {args.store_kind!r}: run `make bench` "
            f"with the services up (measured: {', '.join(sorted(overheads))})"
        )
    seen: Observed | None = None
    table = prices.price_table(args)
    if args.from_store:
        async with Engine(for_reading(args.from_store), prices=table) as engine:
            seen = await observe(engine, workflow=args.workflow, limit=args.limit)
        _refuse_unpriced(seen)
        steps = _observed_steps(seen, args)
    else:
        steps = _steps(args, table)
    failure = args.failure_rate
    if failure is None:
        failure = seen.failure_rate if seen else 0.01
    step_s = args.step_seconds
    if step_s is None:
        step_s = seen.step_seconds if seen else 2.0
    try:
        inputs = Inputs(
            steps=steps,
            failure_rate=failure,
            overhead=overhead,
            retention_days=args.retention_days,
            step_seconds=step_s,
            lease_ttl_s=args.lease_ttl,
            usd_per_gb_month=args.usd_per_gb_month,
            usd_per_million_writes=args.usd_per_million_writes,
            store_usd_per_month=args.store_usd_per_month,
            cache_hit_rate=args.cache_hit_rate,
        )
    except ValueError as exc:
        raise UsageError(f"cost-model: {exc}") from exc
    rates: list[int] = args.requests_per_day or list(DEFAULT_RATES)
    if any(rate < 0 for rate in rates):
        raise UsageError("--requests-per-day must be >= 0")
    if args.json:
        print(json.dumps(report_data(inputs, rates, seen, args.store_kind), indent=2))
    else:
        print(render(inputs, rates, seen, args.store_kind))
    return 0


def report_data(
    inputs: Inputs, rates: Sequence[int], seen: Observed | None, kind: str
) -> dict[str, Any]:
    """Everything the printout shows, as plain data."""
    return {
        "store_kind": kind,
        "inputs": {
            "steps": [asdict(s) for s in inputs.steps],
            "failure_rate": inputs.failure_rate,
            "retention_days": inputs.retention_days,
            "step_seconds": inputs.step_seconds,
            "usd_per_gb_month": inputs.usd_per_gb_month,
            "usd_per_million_writes": inputs.usd_per_million_writes,
            "store_usd_per_month": inputs.store_usd_per_month,
            "cache_hit_rate": inputs.cache_hit_rate,
        },
        "overhead": asdict(inputs.overhead),
        "observed": None if seen is None else asdict(seen),
        "rates": [
            {
                **asdict(at := estimate(inputs, rate)),
                "avoided_usd_per_day": at.avoided_usd_per_day,
                "net_usd_per_day": at.net_usd_per_day,
                "roi": at.roi,
                "break_even": asdict(break_even(inputs, rate)),
            }
            for rate in rates
        ],
    }


def _bytes(value: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def _usd(value: float | None) -> str:
    if value is None:
        return "never"
    if abs(value) >= 1:
        return f"${value:,.2f}"
    return f"${value:.4f}" if abs(value) >= 0.01 else f"${value:.6f}"


def _rate(value: int) -> str:
    return f"{value // 1000}K/day" if value % 1000 == 0 and value else f"{value}/day"


def render(
    inputs: Inputs, rates: Sequence[int], seen: Observed | None, kind: str
) -> str:
    """The printout: the assumptions, then one column per request rate."""
    table = _table(inputs, rates)
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = [*_assumptions(inputs, seen, kind), ""]
    lines += [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in table
    ]
    seconds = break_even(inputs, rates[0] if rates else 0).step_seconds
    lines += [
        "",
        "break-even: below that LLM spend per request, the store costs more",
        "  than resuming saves.",
    ]
    if seconds is None:
        lines.append(
            "with no failures or a single step, resuming never saves anything."
        )
    else:
        lines += [
            f"latency: steps shorter than {seconds * 1000:.2f} ms make a request slower",
            "  on average with the journal than restarting without it.",
        ]
    return "\n".join(lines)


def _assumptions(inputs: Inputs, seen: Observed | None, kind: str) -> list[str]:
    labels = sorted({s.label for s in inputs.steps})
    over = inputs.overhead
    lines = [
        f"{plural(len(inputs.steps), 'step')}/request ({', '.join(labels)}),",
        f"  LLM {_usd(inputs.llm_usd_per_request)}/request, failure rate "
        f"{inputs.failure_rate:.2%}/step, {inputs.step_seconds:g} s/step"
        + (
            f", {inputs.cache_hit_rate:.0%} of steps served from the step cache"
            if inputs.cache_hit_rate
            else ""
        ),
        f"store: {kind}, measured {over.us_per_step:g} us/step, "
        f"{over.bytes_per_step:g} B/step + payload, {over.bytes_per_run:g} B/run, "
        f"{over.writes_per_run} writes/run",
        f"  ({over.source})",
        f"retention {inputs.retention_days:g} days; unit prices "
        f"${inputs.usd_per_gb_month:g}/GB-month, ${inputs.usd_per_million_writes:g}"
        f"/M writes, ${inputs.store_usd_per_month:g}/month fixed",
    ]
    if seen is not None:
        lines.append(
            f"observed on {plural(seen.runs, 'run')}: {seen.steps_per_run:.1f} steps/run, "
            f"{seen.failure_rate:.2%} of step attempts interrupted"
        )
    return lines


def _table(inputs: Inputs, rates: Sequence[int]) -> list[tuple[str, ...]]:
    at = [estimate(inputs, r) for r in rates]
    even = [break_even(inputs, r) for r in rates]
    return [
        ("", *(_rate(r) for r in rates)),
        ("storage / day", *(_bytes(e.storage_bytes_per_day) for e in at)),
        ("storage at steady state", *(_bytes(e.storage_bytes_steady) for e in at)),
        ("write ops/s (average)", *(f"{e.write_ops_per_s:.2f}" for e in at)),
        (
            "added latency / step",
            *(f"{e.added_latency_per_step_ms:.3f} ms" for e in at),
        ),
        (
            "added latency / request",
            *(f"{e.added_latency_per_request_ms:.2f} ms" for e in at),
        ),
        ("store cost / day", *(_usd(e.store_usd_per_day) for e in at)),
        (
            "LLM spend / day, restarting",
            *(_usd(e.llm_usd_per_day_restarted) for e in at),
        ),
        ("LLM spend / day, resuming", *(_usd(e.llm_usd_per_day_resumed) for e in at)),
        ("LLM spend avoided / day", *(_usd(e.avoided_usd_per_day) for e in at)),
        ("net saving / day", *(_usd(e.net_usd_per_day) for e in at)),
        (
            "ROI",
            *("n/a (free store)" if e.roi is None else f"{e.roi:,.1f}x" for e in at),
        ),
        ("break-even LLM $/request", *(_usd(b.llm_usd_per_request) for b in even)),
    ]
