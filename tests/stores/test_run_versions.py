"""The migrations that add run versions to SQLite and PostgreSQL stores written
before versions existed (what every store does with versions is in StoreContract)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from pathlib import Path

import pytest

from resumable.stores import _sql
from resumable.stores.protocol import RunQuery
from resumable.stores.sqlite import SQLiteStore, migrations
from resumable.testing import run_record


async def test_a_sqlite_store_written_before_versions_is_migrated(
    tmp_path: Path,
) -> None:
    # what today's main writes: schema 2, runs without a version column
    db = tmp_path / "old.db"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute(
            "CREATE TABLE resumable_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )
        for migration in migrations.in_order():
            if migration.version <= 2:
                for statement in _sql.split_statements(migration.sql):
                    conn.execute(statement)
        conn.execute("INSERT INTO resumable_meta VALUES ('schema_version', '2')")
        conn.execute(
            "INSERT INTO resumable_runs (run_id, workflow, status, input, "
            "created_at_ms, updated_at_ms) VALUES ('old', 'wf', 'queued', x'00', 1, 1)"
        )
        conn.commit()
        columns = {row[1] for row in conn.execute("PRAGMA table_info(resumable_runs)")}
    assert "version" not in columns

    store = await SQLiteStore(f"sqlite:///{db}").open()
    try:
        old = await store.get_run("old")
        assert old is not None
        assert old.version is None
        await store.create_run(run_record("new", version="2"))
        new = await store.get_run("new")
        assert new is not None
        assert new.version == "2"
    finally:
        await store.close()
    with contextlib.closing(sqlite3.connect(db)) as conn:
        (version,) = conn.execute(
            "SELECT value FROM resumable_meta WHERE key = 'schema_version'"
        ).fetchone()
    assert int(version) == migrations.latest_version() == 10


@pytest.mark.postgres
async def test_a_postgres_store_written_before_versions_is_migrated() -> None:
    import psycopg
    from psycopg import sql

    from resumable.stores.postgres import PostgresStore
    from resumable.stores.postgres.migrations import latest_version, migrations

    base = os.environ.get("RESUMABLE_TEST_POSTGRES_URL")
    if not base:
        if os.environ.get("RESUMABLE_REQUIRE_SERVICES") == "1":
            pytest.fail("RESUMABLE_TEST_POSTGRES_URL is not set")
        pytest.skip("RESUMABLE_TEST_POSTGRES_URL is not set")
    schema = f"t{uuid.uuid4().hex[:12]}"
    quoted = f'"{schema}"'
    # what today's main writes: schema 1, runs without a version column
    async with await psycopg.AsyncConnection.connect(base, autocommit=True) as conn:
        await conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        await conn.execute(
            sql.SQL(
                "CREATE TABLE {}.resumable_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            ).format(sql.Identifier(schema))
        )
        first = migrations()[0]
        assert first.version == 1
        await conn.execute(first.sql.replace("{schema}", quoted).encode())
        await conn.execute(
            sql.SQL(
                "INSERT INTO {}.resumable_meta VALUES ('schema_version', '1')"
            ).format(sql.Identifier(schema))
        )
        await conn.execute(
            sql.SQL(
                "INSERT INTO {}.resumable_runs (run_id, workflow, status, input, "
                "created_at_ms, updated_at_ms) VALUES ('old', 'wf', 'queued', "
                "'\\x00'::bytea, 1, 1)"
            ).format(sql.Identifier(schema))
        )
    separator = "&" if "?" in base else "?"
    store = PostgresStore(f"{base}{separator}schema={schema}")
    try:
        await store.open()
        old = await store.get_run("old")
        assert old is not None
        assert old.version is None
        await store.create_run(run_record("new", version="2"))
        assert [r.run_id for r in await store.list_runs(RunQuery(version="2"))] == [
            "new"
        ]
        async with await psycopg.AsyncConnection.connect(base) as conn:
            cur = await conn.execute(
                sql.SQL(
                    "SELECT value FROM {}.resumable_meta WHERE key = 'schema_version'"
                ).format(sql.Identifier(schema))
            )
            row = await cur.fetchone()
        assert row is not None
        assert int(row[0]) == latest_version() == 9
    finally:
        await store.drop()
        await store.close()
