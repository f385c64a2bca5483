"""The PostgreSQL store's SQL: constants with `{schema}` and placeholders.

`Statements` composes every one of them once per store with its schema's quoted
name; values are always parameters, never pasted in. The claim statements are in
`_postgres_claims`, the archive statements in `_postgres_archive` and
`_postgres_thread_archive`.
"""

from __future__ import annotations

from typing import Final, LiteralString

from psycopg import sql
from psycopg.rows import DictRow

from resumable.stores import _sql
from resumable.stores._postgres_snapshot_sql import SAVE_SNAPSHOT, SWAP_SNAPSHOTS
from resumable.stores.protocol import Payload, PayloadKind, RunQuery, SnapshotRecord

_t = _sql.to_text

__all__ = ["MIGRATION_STATE", "Statements"]

MIGRATION_STATE: Final = """
SELECT to_regnamespace(quote_ident(%(schema)s)) IS NOT NULL AS has_schema,
       to_regclass(quote_ident(%(schema)s) || '.resumable_meta') IS NOT NULL AS has_meta
"""

_SELECT_RUN: Final = "SELECT * FROM {schema}.resumable_runs WHERE run_id = %s"
_CREATE_RUN: Final = """
WITH inserted AS (
    INSERT INTO {schema}.resumable_runs (run_id, workflow, status, input, output,
        created_at_ms, updated_at_ms, parent_id, forked_from, fork_seq, queue,
        lease_owner, lease_expires_at_ms, fence, wake_at_ms, expires_at_ms, version)
    VALUES (%(run_id)s, %(workflow)s, %(status)s, %(input)s, %(output)s::bytea,
        %(created_at_ms)s, %(updated_at_ms)s, %(parent_id)s, %(forked_from)s,
        %(fork_seq)s::bigint, %(queue)s, %(lease_owner)s, %(lease_expires_at_ms)s,
        %(fence)s, %(wake_at_ms)s::bigint, %(expires_at_ms)s::bigint, %(version)s::text)
    ON CONFLICT (run_id) DO NOTHING
    RETURNING *
), announced AS (
    SELECT pg_notify('resumable_work', %(schema)s) FROM inserted WHERE status = 'queued'
)
SELECT inserted.*, (SELECT count(*) FROM announced) AS announced FROM inserted
"""
_RUN_FILTERS: Final = """
 WHERE (cardinality(%(status)s::text[]) = 0 OR status = ANY(%(status)s::text[]))
   AND (%(workflow)s::text IS NULL OR workflow = %(workflow)s::text)
   AND (%(parent_id)s::text IS NULL OR parent_id = %(parent_id)s::text)
   AND (%(forked_from)s::text IS NULL OR forked_from = %(forked_from)s::text)
   AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
   AND (%(updated_before_ms)s::bigint IS NULL OR updated_at_ms < %(updated_before_ms)s::bigint)
   AND (%(version)s::text IS NULL OR version = %(version)s::text)
   AND (%(run_id_prefix)s::text IS NULL OR starts_with(run_id, %(run_id_prefix)s::text))
   AND (%(created_since_ms)s::bigint IS NULL OR created_at_ms >= %(created_since_ms)s::bigint)
   AND (%(created_before_ms)s::bigint IS NULL OR created_at_ms < %(created_before_ms)s::bigint)
"""
_LIST_RUNS: Final = (
    "SELECT * FROM {schema}.resumable_runs"  # noqa: S608 - constants; values are parameters
    + _RUN_FILTERS
    + """   AND (%(after_ms)s::bigint IS NULL
        OR (created_at_ms, run_id) < (%(after_ms)s::bigint, %(after_id)s::text))
 ORDER BY created_at_ms DESC, run_id DESC
 LIMIT %(limit)s
"""
)
_COUNT_RUNS: Final = (
    "SELECT status, queue, count(*) AS n FROM {schema}.resumable_runs"  # noqa: S608 - constants; values are parameters
    + _RUN_FILTERS
    + " GROUP BY status, queue"
)
# one statement: `locked` locks the row (waiting for a concurrent lease change) and
# reads it as it stands, so the UPDATE re-checks that version and RETURNING can say
# whose lease it replaced
_ACQUIRE: Final = """
WITH locked AS (
    SELECT run_id, status, lease_owner FROM {schema}.resumable_runs
     WHERE run_id = %(run_id)s
       FOR UPDATE
), leased AS (
    UPDATE {schema}.resumable_runs AS r
       SET status = 'running', lease_owner = %(owner)s,
           lease_expires_at_ms = %(expires_at_ms)s, fence = r.fence + 1,
           updated_at_ms = %(now_ms)s
      FROM locked
     WHERE r.run_id = locked.run_id
       AND r.status NOT IN ('succeeded', 'failed', 'cancelled')
       AND (r.status <> 'running' OR r.lease_owner IS NULL
            OR r.lease_expires_at_ms <= %(now_ms)s
            OR r.lease_owner = %(owner)s OR r.lease_owner = %(take_over)s::text)
    RETURNING r.fence, locked.status AS before_status,
              locked.lease_owner AS before_owner
)
SELECT leased.fence, leased.before_status, leased.before_owner,
       EXISTS (SELECT 1 FROM locked) AS found
  FROM (SELECT 1) AS one LEFT JOIN leased ON true
"""
_RENEW: Final = """
UPDATE {schema}.resumable_runs SET lease_expires_at_ms = %s
 WHERE run_id = %s AND fence = %s AND status = 'running'
"""
_UPDATE_RUN: Final = """
UPDATE {schema}.resumable_runs
   SET status = %(status)s, output = COALESCE(%(output)s::bytea, output),
       wake_at_ms = %(wake_at_ms)s::bigint,
       expires_at_ms = COALESCE(%(expires_at_ms)s::bigint, expires_at_ms),
       updated_at_ms = %(now_ms)s,
       lease_owner = CASE WHEN %(status)s = 'running' THEN lease_owner END,
       lease_expires_at_ms = CASE WHEN %(status)s = 'running' THEN lease_expires_at_ms ELSE 0 END
 WHERE run_id = %(run_id)s AND fence = %(fence)s
"""
_CANCEL: Final = """
WITH cancelled AS (
    UPDATE {schema}.resumable_runs
       SET status = 'cancelled', lease_owner = NULL, lease_expires_at_ms = 0,
           fence = fence + 1, wake_at_ms = NULL, updated_at_ms = %(now_ms)s
     WHERE run_id = %(run_id)s AND status NOT IN ('succeeded', 'failed', 'cancelled')
    RETURNING *
), announced AS (
    SELECT pg_notify('resumable_work', %(schema)s) FROM cancelled
)
SELECT cancelled.*, (SELECT count(*) FROM announced) AS announced FROM cancelled
"""
_REOPEN: Final = """
WITH reopened AS (
    UPDATE {schema}.resumable_runs SET status = 'queued', updated_at_ms = %(now_ms)s
     WHERE run_id = %(run_id)s AND status = 'failed'
    RETURNING run_id
), announced AS (
    SELECT pg_notify('resumable_work', %(schema)s) FROM reopened
)
SELECT (SELECT count(*) FROM reopened) AS reopened,
       (SELECT count(*) FROM announced) AS announced,
       EXISTS (SELECT 1 FROM {schema}.resumable_runs WHERE run_id = %(run_id)s) AS found
"""
_DELETE_RUNS: Final = """
WITH runs AS (
    DELETE FROM {schema}.resumable_runs
     WHERE run_id = ANY(%s::text[]) AND status IN ('succeeded', 'failed', 'cancelled')
    RETURNING run_id,
              octet_length(input) + coalesce(octet_length(output), 0) AS size
), steps AS (
    DELETE FROM {schema}.resumable_steps WHERE run_id IN (SELECT run_id FROM runs)
    RETURNING coalesce(octet_length(output), 0) + coalesce(octet_length(usage), 0)
              AS size
), inputs AS (
    DELETE FROM {schema}.resumable_inputs WHERE run_id IN (SELECT run_id FROM runs)
    RETURNING octet_length(value) AS size
), stubs AS (
    DELETE FROM {schema}.resumable_archived_runs
     WHERE run_id IN (SELECT run_id FROM runs)
)
SELECT ARRAY(SELECT run_id FROM runs ORDER BY run_id) AS run_ids,
       (SELECT count(*) FROM steps) AS steps, (SELECT count(*) FROM inputs) AS inputs,
       (SELECT coalesce(sum(size), 0) FROM runs)
       + (SELECT coalesce(sum(size), 0) FROM steps)
       + (SELECT coalesce(sum(size), 0) FROM inputs) AS size
"""
_LOAD_JOURNAL: Final = """
SELECT * FROM {schema}.resumable_steps WHERE run_id = %s AND seq <= %s ORDER BY seq
"""
# the fence check and the write, in one function (see the migration for why)
_COMMIT_STEP: Final = """
SELECT {schema}.resumable_commit_step(%s::text, %s::bigint, %s::text, %s::text,
    %s::text, %s::bytea, %s::integer, %s::bigint, %s::bigint, %s::bytea, %s::bigint)
    AS written
"""
# the group commit: the same check for many records in one statement, locking the
# run rows in one order. FOR SHARE: a lease change (fence + 1) waits until this write
# commits, or, if it committed first, this statement re-reads the row, sees the new
# fence and leaves that record out
_COMMIT_STEPS: Final = """
INSERT INTO {schema}.resumable_steps AS s (run_id, seq, name, fingerprint, status,
    output, attempts, started_at_ms, finished_at_ms, usage)
SELECT b.run_id, b.seq, b.name, b.fingerprint, b.status, b.output, b.attempts,
       b.started_at_ms, b.finished_at_ms, b.usage
  FROM unnest(%s::text[], %s::bigint[], %s::text[], %s::text[], %s::text[],
              %s::bytea[], %s::integer[], %s::bigint[], %s::bigint[], %s::bytea[],
              %s::bigint[])
       AS b(run_id, seq, name, fingerprint, status, output, attempts, started_at_ms,
            finished_at_ms, usage, fence)
  JOIN {schema}.resumable_runs r ON r.run_id = b.run_id AND r.fence = b.fence
 ORDER BY b.run_id, b.seq
   FOR SHARE OF r
ON CONFLICT (run_id, seq) DO UPDATE
   SET name = EXCLUDED.name, fingerprint = EXCLUDED.fingerprint,
       status = EXCLUDED.status, output = EXCLUDED.output, attempts = EXCLUDED.attempts,
       started_at_ms = EXCLUDED.started_at_ms, finished_at_ms = EXCLUDED.finished_at_ms,
       usage = EXCLUDED.usage
RETURNING s.run_id, s.seq
"""
_SEND_INPUT: Final = """
WITH run AS (
    SELECT run_id FROM {schema}.resumable_runs WHERE run_id = %(run_id)s
), sent AS (
    INSERT INTO {schema}.resumable_inputs (run_id, key, value, sent_at_ms)
    SELECT run_id, %(key)s::text, %(value)s::bytea, %(sent_at_ms)s::bigint FROM run
    ON CONFLICT (run_id, key) DO NOTHING
    RETURNING run_id
), woken AS (
    UPDATE {schema}.resumable_runs
       SET status = 'queued', wake_at_ms = NULL, updated_at_ms = %(sent_at_ms)s
     WHERE run_id IN (SELECT run_id FROM sent) AND status = 'waiting'
    RETURNING run_id
), announced AS (
    SELECT pg_notify('resumable_work', %(schema)s) FROM woken
)
SELECT EXISTS (SELECT 1 FROM run) AS found, EXISTS (SELECT 1 FROM sent) AS sent,
       (SELECT count(*) FROM announced) AS announced
"""
_GET_INPUTS: Final = (
    "SELECT key, value FROM {schema}.resumable_inputs WHERE run_id = %s"
)
_LIST_INPUTS: Final = (
    "SELECT key, value, sent_at_ms FROM {schema}.resumable_inputs WHERE run_id = %s "
    "ORDER BY sent_at_ms, key"
)
_PUT_CHUNKS: Final = """
INSERT INTO {schema}.resumable_chunks (hash, data)
SELECT * FROM unnest(%s::text[], %s::bytea[]) ON CONFLICT (hash) DO NOTHING
"""
_GET_CHUNKS: Final = (
    "SELECT hash, data FROM {schema}.resumable_chunks WHERE hash = ANY(%s::text[])"
)


_SNAPSHOT_COLUMNS: Final = """
SELECT s.*, ARRAY(SELECT c.hash FROM {schema}.resumable_snapshot_chunks c
                   WHERE c.thread_id = s.thread_id AND c.namespace = s.namespace
                     AND c.checkpoint_id = s.checkpoint_id ORDER BY c.hash) AS chunk_refs
  FROM {schema}.resumable_snapshots s
"""
_LOAD_SNAPSHOT: Final = (
    _SNAPSHOT_COLUMNS
    + """
 WHERE s.thread_id = %(thread_id)s AND s.namespace = %(namespace)s
   AND (%(checkpoint_id)s::text IS NULL OR s.checkpoint_id = %(checkpoint_id)s::text)
 ORDER BY s.checkpoint_id DESC LIMIT 1
"""
)
_LIST_SNAPSHOTS: Final = (
    _SNAPSHOT_COLUMNS
    + """
 WHERE s.thread_id = %(thread_id)s
   AND (%(namespace)s::text IS NULL OR s.namespace = %(namespace)s::text)
   AND (%(before)s::text IS NULL OR s.checkpoint_id < %(before)s::text)
 ORDER BY s.checkpoint_id DESC, s.namespace DESC
 LIMIT %(limit)s::bigint
"""
)
# one row per thread, grouped off the primary key's (thread_id, ...) order
_LIST_THREADS: Final = """
SELECT thread_id, max(created_at_ms) AS updated_at_ms
  FROM {schema}.resumable_snapshots
 WHERE %(prefix)s::text IS NULL OR starts_with(thread_id, %(prefix)s::text)
 GROUP BY thread_id
HAVING %(after_ms)s::bigint IS NULL
    OR (max(created_at_ms), thread_id) < (%(after_ms)s::bigint, %(after_id)s::text)
 ORDER BY updated_at_ms DESC, thread_id DESC
 LIMIT %(limit)s
"""
_DELETE_THREAD: Final = """
WITH refs AS (
    DELETE FROM {schema}.resumable_snapshot_chunks WHERE thread_id = %(thread_id)s
), stub AS (
    DELETE FROM {schema}.resumable_archived_threads WHERE thread_id = %(thread_id)s
)
DELETE FROM {schema}.resumable_snapshots WHERE thread_id = %(thread_id)s
"""
_DELETE_SNAPSHOTS: Final = """
WITH doomed AS (
    SELECT * FROM unnest(%(namespaces)s::text[], %(ids)s::text[]) AS d(ns, id)
), refs AS (
    DELETE FROM {schema}.resumable_snapshot_chunks r USING doomed
     WHERE r.thread_id = %(thread_id)s
       AND r.namespace = doomed.ns AND r.checkpoint_id = doomed.id
)
DELETE FROM {schema}.resumable_snapshots s USING doomed
 WHERE s.thread_id = %(thread_id)s
   AND s.namespace = doomed.ns AND s.checkpoint_id = doomed.id
"""
# A collection finds candidates first, then takes SHARE on the references (waiting
# for saves in flight, which hold ROW EXCLUSIVE, and holding new ones back) only to
# delete those candidates still unreferenced: its DELETE reads a snapshot taken
# after the lock, so no save can reference a chunk it deletes, and saves wait for
# a short delete by key, never for the search.
_UNREFERENCED_CANDIDATES: Final = """
SELECT c.hash FROM {schema}.resumable_chunks c
 WHERE NOT EXISTS (SELECT 1 FROM {schema}.resumable_snapshot_chunks r
                    WHERE r.hash = c.hash)
 LIMIT %s
"""
_LOCK_REFERENCES: Final = "LOCK TABLE {schema}.resumable_snapshot_chunks IN SHARE MODE"
_DELETE_UNREFERENCED: Final = """
DELETE FROM {schema}.resumable_chunks c
 WHERE c.hash = ANY(%s::text[])
   AND NOT EXISTS (SELECT 1 FROM {schema}.resumable_snapshot_chunks r
                    WHERE r.hash = c.hash)
"""


class Statements:
    """Every statement of one store, composed once with its schema's quoted name."""

    def __init__(self, schema: str) -> None:
        self.schema = schema
        name = sql.Identifier(schema)

        def compose(template: LiteralString) -> bytes:
            return sql.SQL(template).format(schema=name).as_bytes(None)

        self.compose = compose
        # rekey's payload scans and swaps: identifiers composed, values parameters
        self.payloads = {
            kind: _payload_statements(name, *columns)
            for kind, columns in _sql.PAYLOAD_COLUMNS.items()
        }
        self.select_run = compose(_SELECT_RUN)
        self.create_run = compose(_CREATE_RUN)
        self.list_runs = compose(_LIST_RUNS)
        self.count_runs = compose(_COUNT_RUNS)
        self.acquire = compose(_ACQUIRE)
        self.renew = compose(_RENEW)
        self.update_run = compose(_UPDATE_RUN)
        self.cancel = compose(_CANCEL)
        self.reopen = compose(_REOPEN)
        self.delete_runs = compose(_DELETE_RUNS)
        self.load_journal = compose(_LOAD_JOURNAL)
        self.commit_step = compose(_COMMIT_STEP)
        self.commit_steps = compose(_COMMIT_STEPS)
        self.send_input = compose(_SEND_INPUT)
        self.get_inputs = compose(_GET_INPUTS)
        self.list_inputs = compose(_LIST_INPUTS)
        self.put_chunks = compose(_PUT_CHUNKS)
        self.get_chunks = compose(_GET_CHUNKS)
        self.save_snapshot = compose(SAVE_SNAPSHOT)
        self.swap_snapshots = compose(SWAP_SNAPSHOTS)
        self.load_snapshot = compose(_LOAD_SNAPSHOT)
        self.list_snapshots = compose(_LIST_SNAPSHOTS)
        self.delete_snapshots = compose(_DELETE_SNAPSHOTS)
        self.delete_thread = compose(_DELETE_THREAD)
        self.list_threads = compose(_LIST_THREADS)
        self.unreferenced_candidates = compose(_UNREFERENCED_CANDIDATES)
        self.lock_references = compose(_LOCK_REFERENCES)
        self.delete_unreferenced = compose(_DELETE_UNREFERENCED)
        self.drop = compose("DROP SCHEMA IF EXISTS {schema} CASCADE")


def _payload_statements(
    name: sql.Identifier,
    table: str,
    ids: tuple[str, ...],
    extra: tuple[str, ...],
    column: str,
) -> tuple[bytes, bytes, bytes]:
    """A payload kind's first-page scan, next-page scan and compare-and-swap."""
    keys = sql.SQL(", ").join(map(sql.Identifier, ids))
    target = sql.SQL("{schema}.{table}").format(
        schema=name, table=sql.Identifier(table)
    )
    selected = sql.SQL("SELECT {cols} FROM {target} WHERE {col} IS NOT NULL").format(
        cols=sql.SQL(", ").join(map(sql.Identifier, (*ids, *extra, column))),
        target=target,
        col=sql.Identifier(column),
    )
    order = sql.SQL(" ORDER BY {keys} LIMIT %s").format(keys=keys)
    after = sql.SQL(" AND ({keys}) > ({marks})").format(
        keys=keys, marks=sql.SQL(", ").join(sql.Placeholder() * len(ids))
    )
    replace = sql.SQL(
        "UPDATE {target} SET {col} = %s WHERE {match} AND {col} = %s"
    ).format(
        target=target,
        col=sql.Identifier(column),
        match=sql.SQL(" AND ").join(
            sql.SQL("{} = %s").format(sql.Identifier(part)) for part in ids
        ),
    )
    return (
        sql.Composed([selected, order]).as_bytes(None),
        sql.Composed([selected, after, order]).as_bytes(None),
        replace.as_bytes(None),
    )


def snapshot_from_row(row: DictRow) -> SnapshotRecord:
    """The snapshot a row of resumable_snapshots holds."""
    return _sql.snapshot_from_row(row, row["chunk_refs"])


def run_filters(query: RunQuery) -> dict[str, object]:
    """The parameters of `_RUN_FILTERS` for a run query."""
    return {
        "status": list(query.status),
        "workflow": _sql.maybe_text(query.workflow),
        "parent_id": _sql.maybe_text(query.parent_id),
        "forked_from": _sql.maybe_text(query.forked_from),
        "queue": _sql.maybe_text(query.queue),
        "updated_before_ms": query.updated_before_ms,
        "version": _sql.maybe_text(query.version),
        "run_id_prefix": _sql.maybe_text(query.run_id_prefix),
        "created_since_ms": query.created_since_ms,
        "created_before_ms": query.created_before_ms,
    }


def payloads_from_rows(kind: PayloadKind, rows: list[DictRow]) -> list[Payload]:
    """The payloads of `kind` a scan read: key columns first, the payload last."""
    return [
        Payload(
            kind=kind,
            key=tuple(_sql.key_from_sql(value) for value in list(row.values())[:-1]),
            data=bytes(list(row.values())[-1]),
        )
        for row in rows
    ]
