"""PostgreSQL: state snapshots of threads, their chunks, and collecting unused chunks.

The statements of snapshots (save, swap, load, list, delete), of threads (list,
delete) and of chunks (put, get, collect unreferenced ones), each composed once per
store with its schema's name (`SnapshotStatements`); values are always parameters.

`SAVE_SNAPSHOT` (`save_snapshot`) and `SWAP_SNAPSHOTS` (`swap_snapshots`) each
store the new chunks a snapshot names and refuse it if it names a chunk neither
given nor stored, in one statement: the references they insert are what
`delete_unreferenced_chunks` locks before it deletes, so a chunk found here stays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, LiteralString

from psycopg.rows import DictRow

from resumable.errors import ChunksMissing
from resumable.stores import _sql
from resumable.stores._records import converter
from resumable.stores.postgres.connection import composer
from resumable.stores.protocol import SnapshotRecord

_t = _sql.to_text


def _insert_snapshot(condition: LiteralString) -> LiteralString:
    """The CTEs `saved`, `unreferenced` and `referenced`: upsert a snapshot, its refs.

    A replaced row's references to chunks the new one does not name go with it.
    """
    return f"""saved AS (
    INSERT INTO {{schema}}.resumable_snapshots (thread_id, namespace, checkpoint_id,
        parent_id, manifest, label, metadata, created_at_ms)
    SELECT %(thread_id)s, %(namespace)s, %(checkpoint_id)s, %(parent_id)s,
        %(manifest)s, %(label)s, %(metadata)s::bytea, %(created_at_ms)s
     WHERE {condition}
    ON CONFLICT (thread_id, namespace, checkpoint_id) DO UPDATE
       SET parent_id = EXCLUDED.parent_id, manifest = EXCLUDED.manifest,
           label = EXCLUDED.label, metadata = EXCLUDED.metadata,
           created_at_ms = EXCLUDED.created_at_ms
), unreferenced AS (
    DELETE FROM {{schema}}.resumable_snapshot_chunks r
     WHERE {condition}
       AND r.thread_id = %(thread_id)s AND r.namespace = %(namespace)s
       AND r.checkpoint_id = %(checkpoint_id)s
       AND r.hash <> ALL(%(chunk_refs)s::text[])
), referenced AS (
    INSERT INTO {{schema}}.resumable_snapshot_chunks (thread_id, namespace,
        checkpoint_id, hash)
    SELECT %(thread_id)s, %(namespace)s, %(checkpoint_id)s, h
      FROM unnest(%(chunk_refs)s::text[]) AS h
     WHERE {condition}
    ON CONFLICT DO NOTHING
)"""  # noqa: S608 - constant SQL; `condition` is one of the constants below


# `missing`: the chunks the snapshot names (`chunk_refs`) that are neither given
# (`hashes`, with their `chunks`) nor stored
_MISSING: Final = """missing AS (
    SELECT unnest(%(chunk_refs)s::text[]) AS h
    EXCEPT SELECT unnest(%(hashes)s::text[])
    EXCEPT SELECT c.hash FROM {schema}.resumable_chunks c
            WHERE c.hash = ANY(%(chunk_refs)s::text[])
)"""


def _store_chunks(condition: LiteralString) -> LiteralString:
    """The CTE `stored`: the given chunks, if `condition` holds (one present stays)."""
    return f"""stored AS (
    INSERT INTO {{schema}}.resumable_chunks (hash, data)
    SELECT * FROM unnest(%(hashes)s::text[], %(chunks)s::bytea[])
     WHERE {condition}
    ON CONFLICT (hash) DO NOTHING
)"""  # noqa: S608 - constant SQL; `condition` is one of the constants below


SAVE_SNAPSHOT: Final[LiteralString] = f"""
WITH {_MISSING}, {_store_chunks("NOT EXISTS (SELECT 1 FROM missing)")},
{_insert_snapshot("NOT EXISTS (SELECT 1 FROM missing)")}
SELECT ARRAY(SELECT h FROM missing) AS missing
"""  # noqa: S608 - constant SQL
# Nothing changes unless every record of `old` holds the manifest read (rows locked
# here are read again after a concurrent writer commits: a row it deleted drops
# out, a row it rewrote shows its new manifest), no other row holds `by`'s key and
# every chunk `by` names is given or stored (`missing`, as `SAVE_SNAPSHOT` finds
# it: atomic with a collection, which locks the references this inserts to).
SWAP_SNAPSHOTS: Final[LiteralString] = f"""
WITH expected AS (
    SELECT * FROM unnest(%(old_namespaces)s::text[], %(old_ids)s::text[],
                         %(old_manifests)s::bytea[]) AS e(ns, id, manifest)
), held AS (
    SELECT s.namespace AS ns, s.checkpoint_id AS id, s.manifest
      FROM {{schema}}.resumable_snapshots s
     WHERE s.thread_id = %(thread_id)s
       AND ((s.namespace, s.checkpoint_id) IN (SELECT ns, id FROM expected)
            OR (%(has_by)s AND s.namespace = %(namespace)s
                AND s.checkpoint_id = %(checkpoint_id)s))
       FOR UPDATE
), complete AS (
    SELECT NOT EXISTS (
               SELECT 1 FROM expected e
                WHERE NOT EXISTS (SELECT 1 FROM held h WHERE h.ns = e.ns
                                     AND h.id = e.id AND h.manifest = e.manifest))
       AND NOT EXISTS (
               SELECT 1 FROM held h WHERE %(has_by)s AND h.ns = %(namespace)s
                  AND h.id = %(checkpoint_id)s
                  AND (h.ns, h.id) NOT IN (SELECT ns, id FROM expected)) AS ok
), {_MISSING}, swapped AS (
    SELECT ok AND NOT EXISTS (SELECT 1 FROM missing) AS ok FROM complete
), {_store_chunks("(SELECT ok FROM swapped)")}, doomed AS (
    SELECT DISTINCT ns, id FROM expected
     WHERE (SELECT ok FROM swapped)
       AND NOT (%(has_by)s AND ns = %(namespace)s AND id = %(checkpoint_id)s)
), released AS (
    DELETE FROM {{schema}}.resumable_snapshot_chunks r USING doomed
     WHERE r.thread_id = %(thread_id)s
       AND r.namespace = doomed.ns AND r.checkpoint_id = doomed.id
), gone AS (
    DELETE FROM {{schema}}.resumable_snapshots s USING doomed
     WHERE s.thread_id = %(thread_id)s
       AND s.namespace = doomed.ns AND s.checkpoint_id = doomed.id
), {_insert_snapshot("%(has_by)s AND (SELECT ok FROM swapped)")}
SELECT ok, ARRAY(SELECT h FROM missing) AS missing FROM complete
"""  # noqa: S608 - constant SQL


_PUT_CHUNKS: Final = """
INSERT INTO {schema}.resumable_chunks (hash, data)
SELECT * FROM unnest(%s::text[], %s::bytea[]) ON CONFLICT (hash) DO NOTHING
"""
_GET_CHUNKS: Final = (
    "SELECT hash, data FROM {schema}.resumable_chunks WHERE hash = ANY(%s::text[])"
)


# A snapshot lists each chunk once (the primary key) and only stored ones (a save
# naming a missing chunk is refused, a collection deletes only chunks none lists),
# so it lists at most as many as are stored: `listed` counts its rows, `stored`
# the chunks up to the most any row found lists (never the whole table), and its
# hashes are read only if they fit, else NULL (`snapshot_from_row` refuses it).
def _with_chunk_refs(found: LiteralString) -> LiteralString:
    """The snapshots the query `found` selects, each with its chunk_refs."""
    return f"""
WITH found AS ({found}
), counted AS (
    SELECT f.*, (SELECT count(*) FROM {{schema}}.resumable_snapshot_chunks c
                  WHERE c.thread_id = f.thread_id AND c.namespace = f.namespace
                    AND c.checkpoint_id = f.checkpoint_id) AS listed
      FROM found f
), stored AS (
    SELECT count(*) AS stored FROM (
        SELECT k.hash FROM {{schema}}.resumable_chunks k ORDER BY k.hash
         LIMIT (SELECT coalesce(max(listed), 0) FROM counted)) k
)
SELECT f.*, stored.stored,
       CASE WHEN f.listed <= stored.stored THEN ARRAY(
           SELECT c.hash FROM {{schema}}.resumable_snapshot_chunks c
            WHERE c.thread_id = f.thread_id AND c.namespace = f.namespace
              AND c.checkpoint_id = f.checkpoint_id ORDER BY c.hash) END AS chunk_refs
  FROM counted f CROSS JOIN stored
 ORDER BY f.checkpoint_id DESC, f.namespace DESC
"""  # noqa: S608 - constant SQL; `found` is one of the constants below


_LOAD_SNAPSHOT: Final = _with_chunk_refs(
    """
    SELECT * FROM {schema}.resumable_snapshots s
     WHERE s.thread_id = %(thread_id)s AND s.namespace = %(namespace)s
       AND (%(checkpoint_id)s::text IS NULL
            OR s.checkpoint_id = %(checkpoint_id)s::text)
     ORDER BY s.checkpoint_id DESC LIMIT 1"""
)
_LIST_SNAPSHOTS: Final = _with_chunk_refs(
    """
    SELECT * FROM {schema}.resumable_snapshots s
     WHERE s.thread_id = %(thread_id)s
       AND (%(namespace)s::text IS NULL OR s.namespace = %(namespace)s::text)
       AND (%(before)s::text IS NULL OR s.checkpoint_id < %(before)s::text)
     ORDER BY s.checkpoint_id DESC, s.namespace DESC
     LIMIT %(limit)s::bigint"""
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


class SnapshotStatements:
    """The snapshot, thread and chunk statements of one store, composed with its schema."""

    def __init__(self, schema: str) -> None:
        compose = composer(schema)
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


@converter(
    "snapshot",
    lambda row: f"thread {row['thread_id']!r} checkpoint {row['checkpoint_id']!r}",
)
def snapshot_from_row(row: DictRow) -> SnapshotRecord:
    """The snapshot a row of `_with_chunk_refs` holds.

    Raises:
        CorruptCheckpointError: it lists more chunks than the store holds.
    """
    if row["chunk_refs"] is None:
        raise ValueError(
            f"{row['listed']:,} chunks listed, more than the {row['stored']:,} "
            "the store holds"
        )
    return _sql.snapshot_from_row(row, row["chunk_refs"])


def snapshot_params(snapshot: SnapshotRecord) -> dict[str, Any]:
    """The named parameters of the row `_insert_snapshot` inserts."""
    return {
        "thread_id": _t(snapshot.thread_id),
        "namespace": _t(snapshot.namespace),
        "checkpoint_id": _t(snapshot.checkpoint_id),
        "parent_id": _sql.maybe_text(snapshot.parent_id),
        "manifest": snapshot.manifest,
        "label": _sql.maybe_text(snapshot.label),
        "metadata": snapshot.metadata,
        "created_at_ms": snapshot.created_at_ms,
        "chunk_refs": list(snapshot.chunk_refs),
    }


def swap_params(
    thread_id: str,
    old: Sequence[SnapshotRecord],
    by: SnapshotRecord | None,
    chunks: Mapping[str, bytes],
) -> dict[str, Any]:
    """The named parameters of `SWAP_SNAPSHOTS`."""
    # without `by`, typed stand-ins fill its parameters, each use guarded by has_by
    row = by or SnapshotRecord(
        thread_id=thread_id,
        checkpoint_id="",
        parent_id=None,
        manifest=b"",
        chunk_refs=(),
        created_at_ms=0,
    )
    return {
        **snapshot_params(row),
        "has_by": by is not None,
        "hashes": list(chunks),
        "chunks": list(chunks.values()),
        "old_namespaces": [_t(record.namespace) for record in old],
        "old_ids": [_t(record.checkpoint_id) for record in old],
        "old_manifests": [record.manifest for record in old],
    }


def refuse_missing(row: DictRow | None, *, store: str, thread_id: str) -> None:
    """Raise ChunksMissing if the row of a statement above names missing chunks.

    It then changed nothing.
    """
    if row is not None and row["missing"]:
        raise ChunksMissing(
            store=store, thread_id=thread_id, hashes=tuple(row["missing"])
        )
