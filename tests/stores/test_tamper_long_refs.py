"""A snapshot listing 500,000 chunk hashes fails safe, on every store that keeps lists.

A snapshot's `chunk_refs` names the chunks its state is made of. A damaged store
may list any number of well-formed hashes for one snapshot: every action of the
tamper suite must still end as on a healthy store or with a typed error, within
its time limit and memory bound. Each store keeps the list its own way: SQLite as
a JSON array in the snapshot's row, PostgreSQL as one row per chunk in
`resumable_snapshot_chunks`, Redis as the tail of the snapshot's packed record.
PostgreSQL and Redis refuse a snapshot listing more chunks than the store holds
(before, loading its state allocated 141 MiB on Redis, and took 13 s on PostgreSQL
under load, where the suite allows 20 s per action).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import pytest

from conftest import service_url
from resumable.stores.redis.codec import pack, unpack
from resumable.testing import StoredField, TamperReport, TamperSubject, TamperSuite
from tamper.subjects import postgres_subject, redis_subject, sqlite_subject

HASHES = [f"{i:064x}" for i in range(500_000)]
"""32 MB of hashes: as JSON text, parsed within the suite's memory bound."""


async def _subject(backend: str, folder: Path) -> TamperSubject:
    if backend == "postgres":
        return await postgres_subject(service_url(backend))
    if backend == "redis":
        return await redis_subject(service_url(backend))
    return sqlite_subject(folder)


def _lists_chunks(field: StoredField) -> bool:
    """Whether `field` is where its store lists one snapshot's chunks."""
    if field.column == "chunk_refs":  # SQLite
        return True
    if field.table == "resumable_snapshot_chunks":  # PostgreSQL: one of its rows
        return field.column == "hash"
    # Redis: a packed snapshot record, its chunks after five items
    return field.table == "cp" and len(unpack(field.value)) > 5


async def _damage(subject: TamperSubject, field: StoredField) -> bool:
    """Make the snapshot of `field` list every hash of HASHES."""
    if field.column == "chunk_refs":
        return await subject.write(field, json.dumps(HASHES))
    if field.table == "cp":
        head = unpack(field.value)[:5]
        return await subject.write(field, pack([*head, *(h.encode() for h in HASHES)]))
    return await _add_chunk_rows(subject, field.value)


@runtime_checkable
class _Tables(Protocol):
    """A subject whose store is in SQL tables (tamper.subjects' PostgreSQL one)."""

    def table_name(self, table: str) -> Any:
        """The table's name in its store's schema, as a psycopg identifier."""
        ...


async def _add_chunk_rows(subject: TamperSubject, listed: str) -> bool:
    """PostgreSQL: a row per hash of HASHES for the snapshot that lists `listed`."""
    from psycopg import AsyncConnection, sql

    assert isinstance(subject, _Tables)
    table = subject.table_name("resumable_snapshot_chunks")
    query = sql.SQL(
        "INSERT INTO {table} (thread_id, namespace, checkpoint_id, hash) "
        "SELECT s.thread_id, s.namespace, s.checkpoint_id, h "
        "FROM (SELECT thread_id, namespace, checkpoint_id FROM {table} "
        "      WHERE hash = %s LIMIT 1) s, unnest(%s::text[]) AS h "
        "ON CONFLICT DO NOTHING"
    ).format(table=table)
    async with await AsyncConnection.connect(
        service_url("postgres"), autocommit=True
    ) as db:
        added = await db.execute(query, (listed, HASHES))
        return added.rowcount == len(HASHES)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "backend",
    [
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ],
)
async def test_a_snapshot_listing_500000_chunks_fails_safe(
    backend: str, tmp_path: Path
) -> None:
    template = await _subject(backend, tmp_path)
    report, damaged = TamperReport(), list[str]()
    try:
        await TamperSuite.fill(template)
        for at, stored in enumerate(await template.fields()):
            if not _lists_chunks(stored) or damaged:  # one snapshot is enough
                continue
            subject = await template.clone()
            try:
                field = (await subject.fields())[at]  # its rows (a Redis clone: keys)
                if not await _damage(subject, field):
                    continue  # the store's own types refuse it
                damaged.append(f"{field.table}.{field.column}")
                await TamperSuite(_never).examine(
                    report, subject, field, "500,000 chunk hashes"
                )
            finally:
                await subject.drop()
    finally:
        await template.drop()
    assert damaged, "the fill left no snapshot listing chunks"
    assert not report.failures, "\n".join(
        f"{f.table}.{f.column} / {f.action}: {f.problem}" for f in report.failures
    )
    if backend != "sqlite":  # it lists more chunks than the store holds: refused
        assert report.typed_errors["CorruptCheckpointError"] > 0, report.summary()


async def _never() -> TamperSubject:
    raise AssertionError("examine() makes no subject")
