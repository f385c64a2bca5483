"""What the SQL stores share: migrations on disk, and rows mapped to records by name."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any, Protocol

from resumable.stores.protocol import (
    InputRecord,
    RunRecord,
    SnapshotRecord,
    StepRecord,
)


class Row(Protocol):
    """A result row readable by column name (sqlite3.Row, psycopg's dict_row)."""

    def __getitem__(self, key: str, /) -> Any: ...


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
    """One numbered schema change, as read from `migrations/<dialect>/NNNN_name.sql`."""

    version: int
    name: str
    sql: str


def migrations(dialect: str) -> list[Migration]:
    """The dialect's migrations in version order."""
    folder = resources.files("resumable.stores.migrations") / dialect
    found = []
    for entry in folder.iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append(
                Migration(int(match.group(1)), entry.name, entry.read_text("utf-8"))
            )
    found.sort(key=lambda m: m.version)
    return found


def latest_version(dialect: str) -> int:
    """The schema version this resumable writes for `dialect`."""
    return max(m.version for m in migrations(dialect))


def split_statements(sql: str) -> list[str]:
    """Split a migration file into statements (none of ours holds a literal `;`)."""
    lines = [line for line in sql.splitlines() if not line.lstrip().startswith("--")]
    return [stmt.strip() for stmt in "\n".join(lines).split(";") if stmt.strip()]


def run_values(run: RunRecord) -> tuple[object, ...]:
    """A run's values in RUN_COLUMNS order, for an INSERT."""
    return tuple(getattr(run, column) for column in RUN_COLUMNS)


def step_values(step: StepRecord) -> tuple[object, ...]:
    """A step's values in STEP_COLUMNS order, for an INSERT."""
    return (
        step.run_id,
        step.seq,
        step.name,
        step.fingerprint,
        step.status,
        step.output,
        step.attempts,
        step.started_at_ms,
        step.finished_at_ms,
        step.usage,
    )


def _blob(value: Any) -> bytes | None:
    # drivers hand back bytes, memoryview or bytearray depending on type and version
    return None if value is None else bytes(value)


def run_from_row(row: Row) -> RunRecord:
    """A RunRecord from a row keyed by column name."""
    return RunRecord(
        run_id=row["run_id"],
        workflow=row["workflow"],
        status=row["status"],
        input=bytes(row["input"]),
        output=_blob(row["output"]),
        created_at_ms=row["created_at_ms"],
        updated_at_ms=row["updated_at_ms"],
        parent_id=row["parent_id"],
        forked_from=row["forked_from"],
        fork_seq=row["fork_seq"],
        queue=row["queue"],
        lease_owner=row["lease_owner"],
        lease_expires_at_ms=row["lease_expires_at_ms"],
        fence=row["fence"],
        wake_at_ms=row["wake_at_ms"],
        expires_at_ms=row["expires_at_ms"],
    )


def step_from_row(row: Row) -> StepRecord:
    """A StepRecord from a row keyed by column name."""
    return StepRecord(
        run_id=row["run_id"],
        seq=row["seq"],
        name=row["name"],
        fingerprint=row["fingerprint"],
        status=row["status"],
        output=_blob(row["output"]),
        attempts=row["attempts"],
        started_at_ms=row["started_at_ms"],
        finished_at_ms=row["finished_at_ms"],
        usage=_blob(row["usage"]),
    )


def input_from_row(row: Row) -> InputRecord:
    """An InputRecord from a row keyed by column name."""
    return InputRecord(
        run_id=row["run_id"],
        key=row["key"],
        value=bytes(row["value"]),
        sent_at_ms=row["sent_at_ms"],
    )


def snapshot_from_row(row: Row, chunk_refs: tuple[str, ...]) -> SnapshotRecord:
    """A SnapshotRecord from a row keyed by column name, plus its chunk references."""
    return SnapshotRecord(
        thread_id=row["thread_id"],
        namespace=row["namespace"],
        checkpoint_id=row["checkpoint_id"],
        parent_id=row["parent_id"],
        manifest=bytes(row["manifest"]),
        chunk_refs=chunk_refs,
        label=row["label"],
        metadata=_blob(row["metadata"]),
        created_at_ms=row["created_at_ms"],
    )
