"""What the SQL stores share: migrations on disk, and rows mapped to records by name."""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from typing import Any, Protocol

from resumable.stores._records import converter
from resumable.stores.feeds import FeedEntry
from resumable.stores.protocol import (
    InputRecord,
    RunRecord,
    RunUpdate,
    ScheduleRecord,
    SnapshotRecord,
    StepRecord,
    set_attempts,
    set_fingerprint,
    set_finished_at_ms,
    set_name,
    set_output,
    set_run_id,
    set_seq,
    set_started_at_ms,
    set_status,
    set_usage,
)


class Row(Protocol):
    """A result row readable by column name (sqlite3.Row, psycopg's dict_row)."""

    def __getitem__(self, key: str, /) -> Any: ...


_NEEDS_ESCAPE = re.compile("[%\x00\ud800-\udfff]")
_ESCAPED = re.compile("%(25|00|u[0-9a-f]{4})")


def to_text(value: str) -> str:
    """An identifier as SQL text: `%`, NUL and lone surrogates escaped, reversibly.

    SQLite and PostgreSQL store strict UTF-8 (PostgreSQL refuses NUL), but run ids,
    step names and thread ids are any Python str. The escape is injective, so two
    different ids never meet in the database.
    """
    if value.isascii() and "%" not in value and "\x00" not in value:
        return value
    return _NEEDS_ESCAPE.sub(_escape_char, value)


def from_text(value: str) -> str:
    """The identifier `to_text` escaped."""
    if "%" not in value:
        return value
    return _ESCAPED.sub(_unescape, value)


def maybe_text(value: str | None) -> str | None:
    """`to_text` for optional identifiers."""
    return None if value is None else to_text(value)


def maybe_from_text(value: str | None) -> str | None:
    """`from_text` for optional identifiers."""
    return None if value is None else from_text(value)


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    if char == "%":
        return "%25"
    if char == "\x00":
        return "%00"
    return f"%u{ord(char):04x}"


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code == "25":
        return "%"
    if code == "00":
        return "\x00"
    return chr(int(code[1:], 16))


_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")

RUN_COLUMNS = (
    "run_id",
    "workflow",
    "status",
    "input",
    "output",
    "created_at_ms",
    "updated_at_ms",
    "parent_id",
    "forked_from",
    "fork_seq",
    "queue",
    "lease_owner",
    "lease_expires_at_ms",
    "fence",
    "wake_at_ms",
    "expires_at_ms",
    "version",
)
STEP_COLUMNS = (
    "run_id",
    "seq",
    "name",
    "fingerprint",
    "status",
    "output",
    "attempts",
    "started_at_ms",
    "finished_at_ms",
    "usage",
)


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered schema change, as read from its `NNNN_name.sql` file."""

    version: int
    name: str
    sql: str


def read_migrations(folder: Traversable) -> list[Migration]:
    """The migrations (`NNNN_name.sql`) in `folder`, in version order."""
    found = []
    for entry in folder.iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append(
                Migration(int(match.group(1)), entry.name, entry.read_text("utf-8"))
            )
    found.sort(key=lambda m: m.version)
    return found


def split_statements(sql: str) -> list[str]:
    """Split a migration file into statements (none of ours holds a literal `;`)."""
    lines = [line for line in sql.splitlines() if not line.lstrip().startswith("--")]
    return [stmt.strip() for stmt in "\n".join(lines).split(";") if stmt.strip()]


PAYLOAD_COLUMNS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], str]] = {
    "run.input": ("resumable_runs", ("run_id",), (), "input"),
    "run.output": ("resumable_runs", ("run_id",), (), "output"),
    "step.output": ("resumable_steps", ("run_id", "seq"), ("name",), "output"),
    "step.usage": ("resumable_steps", ("run_id", "seq"), ("name",), "usage"),
    "input.value": ("resumable_inputs", ("run_id", "key"), (), "value"),
    "snapshot.manifest": (
        "resumable_snapshots",
        ("thread_id", "namespace", "checkpoint_id"),
        (),
        "manifest",
    ),
    "snapshot.metadata": (
        "resumable_snapshots",
        ("thread_id", "namespace", "checkpoint_id"),
        (),
        "metadata",
    ),
    "chunk.data": ("resumable_chunks", ("hash",), (), "data"),
}
"""Payload kind -> (table, identity columns, extra key columns, payload column)."""


def key_to_sql(part: str | int) -> str | int:
    """One part of a payload key as a SQL parameter."""
    return part if isinstance(part, int) else to_text(part)


def key_from_sql(part: Any) -> str | int:
    """One payload key part read back from SQL."""
    return part if isinstance(part, int) else from_text(part)


_RUN_TEXT = frozenset(
    {
        "run_id",
        "workflow",
        "parent_id",
        "forked_from",
        "queue",
        "lease_owner",
        "version",
    }
)


def run_values(run: RunRecord) -> tuple[object, ...]:
    """A run's values in RUN_COLUMNS order, for an INSERT (identifiers escaped)."""
    return tuple(
        maybe_text(getattr(run, column))
        if column in _RUN_TEXT
        else getattr(run, column)
        for column in RUN_COLUMNS
    )


def update_values(run_id: str, fence: int, update: RunUpdate) -> dict[str, object]:
    """The named parameters of a lease holder's run update (identifiers escaped)."""
    return {
        "status": update.status,
        "output": update.output,
        "wake_at_ms": update.wake_at_ms,
        "expires_at_ms": update.expires_at_ms,
        "now_ms": update.now_ms,
        "run_id": to_text(run_id),
        "fence": fence,
    }


def step_values(step: StepRecord) -> tuple[object, ...]:
    """A step's values in STEP_COLUMNS order, for an INSERT."""
    return (
        to_text(step.run_id),
        step.seq,
        to_text(step.name),
        step.fingerprint,
        step.status,
        step.output,
        step.attempts,
        step.started_at_ms,
        step.finished_at_ms,
        step.usage,
    )


def blob(value: Any) -> Any:
    """A payload column as bytes; anything else (a damaged row) is passed on as it is.

    Drivers hand back bytes, memoryview or bytearray depending on type and
    version. Text or a number in a payload column is damage: the envelope that
    opens the payload refuses it, naming the run and step, so it is not
    converted (or refused without a place) here.
    """
    if type(value) is bytes or value is None:
        return value
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    return value


@converter("run", lambda row: f"run {row['run_id']!r}")
def run_from_row(row: Row) -> RunRecord:
    """A RunRecord from a row keyed by column name."""
    return RunRecord(
        run_id=from_text(row["run_id"]),
        workflow=from_text(row["workflow"]),
        status=row["status"],
        input=blob(row["input"]),
        output=blob(row["output"]),
        created_at_ms=row["created_at_ms"],
        updated_at_ms=row["updated_at_ms"],
        parent_id=maybe_from_text(row["parent_id"]),
        forked_from=maybe_from_text(row["forked_from"]),
        fork_seq=row["fork_seq"],
        queue=maybe_from_text(row["queue"]),
        lease_owner=maybe_from_text(row["lease_owner"]),
        lease_expires_at_ms=row["lease_expires_at_ms"],
        fence=row["fence"],
        wake_at_ms=row["wake_at_ms"],
        expires_at_ms=row["expires_at_ms"],
        version=maybe_from_text(row["version"]),
    )


@converter("step", lambda row: f"run {row['run_id']!r} step #{row['seq']}")
def step_from_row(row: Row) -> StepRecord:
    """A StepRecord from a row keyed by column name."""
    return StepRecord(
        run_id=from_text(row["run_id"]),
        seq=row["seq"],
        name=from_text(row["name"]),
        fingerprint=row["fingerprint"],
        status=row["status"],
        output=blob(row["output"]),
        attempts=row["attempts"],
        started_at_ms=row["started_at_ms"],
        finished_at_ms=row["finished_at_ms"],
        usage=blob(row["usage"]),
    )


@converter(
    "feed entry", lambda run_id, channel, rows: f"run {run_id!r} feed {channel!r}"
)
def feed_entries(run_id: str, channel: str, rows: Iterable[Row]) -> list[FeedEntry]:
    """The entries of one feed channel, from rows of offset, payload, created_at_ms."""
    return [
        FeedEntry(
            run_id=run_id,
            channel=channel,
            offset=int(row["offset"]),
            payload=bytes(row["payload"]),
            created_at_ms=int(row["created_at_ms"]),
        )
        for row in rows
    ]


JOURNAL_COLUMNS = STEP_COLUMNS[1:]
"""The columns `journal_records` reads: a step's, but the run id it was asked for."""


@converter("step", lambda run_id, rows: f"run {run_id!r} journal")
def journal_records(run_id: str, rows: Iterable[Sequence[Any]]) -> list[StepRecord]:
    """The StepRecords of one run's journal, from rows of JOURNAL_COLUMNS.

    Every resume reads a journal of thousands of steps, so each record is filled
    through its slots' descriptors (the assignments a frozen dataclass's __init__
    makes, without its keyword call), the run id is the one asked for, and each
    step name is unescaped once. `step_from_row` is the plain version (by keyword,
    from a row by column name); tests/stores/test_protocol.py checks they agree.
    """
    records: list[StepRecord] = []
    append = records.append
    new = object.__new__
    names: dict[str, str] = {}
    for (
        seq,
        name,
        fingerprint,
        status,
        output,
        attempts,
        started,
        finished,
        usage,
    ) in rows:
        record = new(StepRecord)
        set_run_id(record, run_id)
        set_seq(record, seq)
        unescaped = names.get(name)
        if unescaped is None:
            unescaped = names[name] = from_text(name)
        set_name(record, unescaped)
        set_fingerprint(record, fingerprint)
        set_status(record, status)
        set_output(record, output if type(output) is bytes else blob(output))
        set_attempts(record, attempts)
        set_started_at_ms(record, started)
        set_finished_at_ms(record, finished)
        set_usage(record, usage if usage is None else blob(usage))
        append(record)
    return records


@converter("input", lambda row: f"run {row['run_id']!r} input {row['key']!r}")
def input_from_row(row: Row) -> InputRecord:
    """An InputRecord from a row keyed by column name."""
    return InputRecord(
        run_id=from_text(row["run_id"]),
        key=from_text(row["key"]),
        value=blob(row["value"]),
        sent_at_ms=row["sent_at_ms"],
    )


@converter(
    "snapshot",
    lambda row, refs: (
        f"thread {row['thread_id']!r} checkpoint {row['checkpoint_id']!r}"
    ),
)
def snapshot_from_row(row: Row, chunk_refs: Any) -> SnapshotRecord:
    """A SnapshotRecord from a row keyed by column name, plus its chunk references."""
    return SnapshotRecord(
        thread_id=from_text(row["thread_id"]),
        namespace=from_text(row["namespace"]),
        checkpoint_id=from_text(row["checkpoint_id"]),
        parent_id=maybe_from_text(row["parent_id"]),
        manifest=blob(row["manifest"]),
        chunk_refs=_chunk_refs(chunk_refs),
        label=maybe_from_text(row["label"]),
        metadata=blob(row["metadata"]),
        created_at_ms=row["created_at_ms"],
    )


def _chunk_refs(value: Any) -> tuple[str, ...]:
    """A snapshot's chunk hashes: a JSON array (SQLite) or an array (PostgreSQL)."""
    refs = json.loads(value) if isinstance(value, str) else value
    if not isinstance(refs, list | tuple) or not all(type(r) is str for r in refs):
        raise TypeError(f"chunk_refs is {reprlib.repr(value)}, not a list of hashes")
    return tuple(refs)


def schedule_from_row(row: Row) -> ScheduleRecord:
    """A `resumable_schedules` row as its record (SQLite and PostgreSQL)."""
    return ScheduleRecord(
        name=from_text(row["name"]),
        workflow=from_text(row["workflow"]),
        cron=row["cron"],
        tz=row["tz"],
        catch_up=row["catch_up"],
        paused=bool(row["paused"]),
        last_tick_ms=row["last_tick_ms"],
        created_at_ms=row["created_at_ms"],
        updated_at_ms=row["updated_at_ms"],
    )
