"""`resumable export`: every step of the selected runs as JSON Lines or Parquet.

One record per step (`Engine.export`): run, seq, step, status, attempts, timings,
args fingerprint, usage and cost, and the generic view of its result or error.
JSON Lines needs nothing but the stdlib; Parquet needs the `parquet` extra
(pyarrow), imported only when asked for, and holds the views as JSON text.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from collections.abc import AsyncIterator
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from resumable._engine.engine import Engine
from resumable._engine.export import StepExport
from resumable._plural import plural
from resumable.cli import _prices as prices
from resumable.errors import UsageError
from resumable.stores.protocol import RUN_STATUSES

__all__ = ["parse_since", "register", "write_jsonl", "write_parquet"]

_ROW_GROUP = 1000  # records held in memory at once while writing Parquet
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}
# the views and lists, which Parquet holds as JSON text / lists of text
_JSON_COLUMNS = ("result", "error", "run_input")


def register(commands: Any, store: argparse.ArgumentParser) -> None:
    """Add the subcommand."""
    export = commands.add_parser(
        "export",
        parents=[store],
        help="write every step of the selected runs as JSON Lines or Parquet",
    )
    export.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="these runs only")
    export.add_argument("--workflow", help="runs of this workflow only")
    export.add_argument(
        "--status", action="append", choices=RUN_STATUSES, help="runs in this status"
    )
    export.add_argument(
        "--since",
        type=parse_since,
        help="runs created since: a duration (30m, 12h, 7d, 2w) or an ISO date",
    )
    export.add_argument(
        "--format",
        choices=("jsonl", "parquet"),
        default="jsonl",
        help="JSON Lines, or Parquet (needs resumable[parquet]; default: %(default)s)",
    )
    export.add_argument(
        "--output", "-o", help="file to write (default: stdout, for jsonl only)"
    )
    export.add_argument(
        "--run-input",
        action="store_true",
        help="add each run's input (args, kwargs) to its records",
    )
    prices.add_option(export)
    export.set_defaults(handler=export_runs)


def parse_since(text: str) -> datetime | timedelta:
    """`7d`, `12h`, `30m`, `2w`, `90s` as a duration; else an ISO date or time (UTC)."""
    match = re.fullmatch(r"\s*(\d+)\s*([smhdw])\s*", text)
    if match:
        return timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither a duration (7d, 12h, 30m, 2w) nor an ISO date"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


async def export_runs(args: argparse.Namespace) -> int:
    """Write the records to the file (or stdout) and say how many on stderr."""
    if args.format == "parquet" and not args.output:
        raise UsageError("--format parquet writes a file: give --output PATH")
    async with Engine(args.store, prices=prices.price_table(args)) as engine:
        records = engine.export(
            args.run_ids,
            workflow=args.workflow,
            status=args.status,
            since=args.since,
            run_input=args.run_input,
        )
        if args.format == "parquet":
            count = await write_parquet(records, Path(args.output))
        elif args.output:
            # blocking writes on purpose: this loop runs the export and nothing else
            with Path(args.output).open("wb") as out:  # noqa: ASYNC230
                count = await write_jsonl(records, out)
        else:
            count = await write_jsonl(records, sys.stdout.buffer)
            sys.stdout.flush()
    where = args.output or "stdout"
    print(f"exported {plural(count, 'step')} to {where}", file=sys.stderr)
    return 0


def _json_text(value: Any) -> str:
    """Compact JSON text, non-ASCII kept as such.

    Text with a lone surrogate (LLM output has them) cannot be UTF-8: it is
    escaped as JSON allows, which reads back to the same string.
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, separators=(",", ":"))
    return text


async def write_jsonl(records: AsyncIterator[StepExport], out: IO[bytes]) -> int:
    """One JSON object a line (UTF-8); returns how many were written."""
    count = 0
    async for record in records:
        out.write(_json_text(record.to_json()).encode("utf-8") + b"\n")
        count += 1
    return count


def _pyarrow() -> tuple[Any, Any]:
    # imported by name: pyarrow ships no type information, and is optional
    try:
        return (
            importlib.import_module("pyarrow"),
            importlib.import_module("pyarrow.parquet"),
        )
    except ImportError:
        raise UsageError(
            "--format parquet needs pyarrow: pip install 'resumable[parquet]'"
        ) from None


def _schema(pa: Any) -> Any:
    text, integer = pa.string(), pa.int64()
    moment = pa.timestamp("ms", tz="UTC")
    columns = [
        ("run_id", text),
        ("workflow", text),
        ("run_status", text),
        ("seq", integer),
        ("item_key", text),
        ("step", text),
        ("status", text),
        ("attempts", integer),
        ("started_at", moment),
        ("finished_at", moment),
        ("duration_ms", integer),
        ("args_fingerprint", text),
        ("inherited_from", text),
        ("calls", integer),
        ("input_tokens", integer),
        ("cached_input_tokens", integer),
        ("cache_write_tokens", integer),
        ("output_tokens", integer),
        ("cost_usd", pa.float64()),
        ("unpriced_calls", integer),
        ("unmetered_calls", integer),
        ("models", pa.list_(text)),
        ("result", text),
        ("error", text),
        ("run_input", text),
        ("unreadable", pa.list_(text)),
        ("cached_from_run", text),
        ("cached_from_seq", integer),
    ]
    return pa.schema([pa.field(name, kind) for name, kind in columns])


def _row(record: StepExport) -> dict[str, Any]:
    row = {f.name: getattr(record, f.name) for f in fields(StepExport)}
    for name in _JSON_COLUMNS:
        value = row[name]
        row[name] = None if value is None else _json_text(value)
    row["models"] = list(record.models)
    row["unreadable"] = list(record.unreadable)
    return row


async def write_parquet(records: AsyncIterator[StepExport], path: Path) -> int:
    """A Parquet file, written a row group at a time; returns the records written."""
    pa, pq = _pyarrow()
    schema = _schema(pa)
    count = 0
    with pq.ParquetWriter(str(path), schema) as writer:
        rows: list[dict[str, Any]] = []
        async for record in records:
            rows.append(_row(record))
            if len(rows) >= _ROW_GROUP:
                writer.write_table(pa.Table.from_pylist(rows, schema=schema))
                count += len(rows)
                rows = []
        if rows or not count:  # an empty export is still a file with the schema
            writer.write_table(pa.Table.from_pylist(rows, schema=schema))
            count += len(rows)
    return count
