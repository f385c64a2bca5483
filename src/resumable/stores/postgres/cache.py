"""PostgreSQL: the step cache's index (`SupportsStepCache`, `resumable_step_cache`)."""

from __future__ import annotations

from typing import Final

from psycopg.rows import DictRow

from resumable.stores import _sql
from resumable.stores.postgres.connection import composer
from resumable.stores.step_cache import CacheEntry

_t = _sql.to_text

_PUT: Final = """
INSERT INTO {schema}.resumable_step_cache
    (key, step, workflow, run_id, seq, created_at_ms, expires_at_ms)
VALUES (%s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (key) DO UPDATE SET step = excluded.step, workflow = excluded.workflow,
    run_id = excluded.run_id, seq = excluded.seq,
    created_at_ms = excluded.created_at_ms, expires_at_ms = excluded.expires_at_ms
"""
# the entry and its row in one statement: a row deleted since is a miss
_LOOKUP: Final = """
SELECT c.key AS cache_key, c.step AS cache_step, c.workflow AS cache_workflow,
       c.created_at_ms AS cache_created_at_ms, c.expires_at_ms AS cache_expires_at_ms,
       s.*
  FROM {schema}.resumable_step_cache c
  JOIN {schema}.resumable_steps s ON s.run_id = c.run_id AND s.seq = c.seq
 WHERE c.key = %s AND (c.expires_at_ms IS NULL OR c.expires_at_ms > %s)
"""
_CLEAR: Final = """
DELETE FROM {schema}.resumable_step_cache
 WHERE (%(step)s::text IS NULL OR step = %(step)s::text)
   AND (%(workflow)s::text IS NULL OR workflow = %(workflow)s::text)
"""


class CacheStatements:
    """The step cache statements of one store, composed with its schema."""

    def __init__(self, schema: str) -> None:
        compose = composer(schema)
        self.put = compose(_PUT)
        self.lookup = compose(_LOOKUP)
        self.clear = compose(_CLEAR)


def entry_params(entry: CacheEntry) -> tuple[object, ...]:
    """`_PUT`'s parameters."""
    return (
        entry.key,
        _t(entry.step),
        _t(entry.workflow),
        _t(entry.run_id),
        entry.seq,
        entry.created_at_ms,
        entry.expires_at_ms,
    )


def entry_from_row(row: DictRow) -> CacheEntry:
    """The CacheEntry of a `_LOOKUP` row."""
    return CacheEntry(
        key=row["cache_key"],
        step=_sql.from_text(row["cache_step"]),
        workflow=_sql.from_text(row["cache_workflow"]),
        run_id=_sql.from_text(row["run_id"]),
        seq=row["seq"],
        created_at_ms=row["cache_created_at_ms"],
        expires_at_ms=row["cache_expires_at_ms"],
    )


def clear_params(step: str | None, workflow: str | None) -> dict[str, object]:
    """`_CLEAR`'s parameters."""
    return {
        "step": None if step is None else _t(step),
        "workflow": None if workflow is None else _t(workflow),
    }
