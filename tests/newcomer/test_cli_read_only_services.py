"""Commands that only read never create, migrate or change a PostgreSQL or Redis store.

Issue 36, as `test_cli_read_only` for SQLite: a schema or prefix that holds no
store (a typo) is an error naming it, and is still absent afterwards; an existing
store is read and left as it was, one an older version wrote is refused (reading
does not migrate), one a newer version wrote too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
import redis
from psycopg import sql

from conftest import service_url, store_url
from newcomer.cli_flows import quick
from newcomer.cli_user import APP
from resumable import Engine
from resumable.cli import main
from resumable.cli.opening import for_reading
from resumable.errors import StoreError
from resumable.stores.postgres import PostgresStore
from resumable.stores.postgres import migrations as postgres_migrations
from resumable.stores.postgres import parse_url as parse_postgres_url
from resumable.stores.redis import RedisStore
from resumable.stores.redis.connection import SCHEMA_VERSION, parse_url

READERS = [
    ["runs"],
    ["show", "kept"],
    ["threads"],
    ["export"],
    ["check", "--app", APP],
]


async def _one_run(url: str) -> None:
    async with Engine(url) as engine:
        await engine.run(quick, 1, run_id="kept")


def _read_all(
    url: str, capsys: pytest.CaptureFixture[str], *, ui: bool = False
) -> list[tuple[int, str]]:
    """Each reading command's exit status and output, in process (and `ui`'s)."""
    outcomes = []
    for args in [*READERS, *([["ui", "--port", "0"]] if ui else [])]:
        status = main([*args, "--store", url])
        captured = capsys.readouterr()
        outcomes.append((status, captured.out + captured.err))
    return outcomes


# --- PostgreSQL ------------------------------------------------------------------
def _pg(url: str) -> tuple[str, str]:
    """libpq's URL (no schema option) and the schema a store URL names."""
    base, _, query = url.partition("?")
    options = dict(part.split("=", 1) for part in query.split("&") if part)
    schema = options.pop("schema")
    rest = "&".join(f"{k}={v}" for k, v in options.items())
    return (f"{base}?{rest}" if rest else base), schema


def _schema_exists(url: str) -> bool:
    conninfo, schema = _pg(url)
    with psycopg.connect(conninfo) as conn:
        row = conn.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s",
            (schema,),
        ).fetchone()
    return row is not None and row[0] == 1


def _pg_state(url: str) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table in the schema, with its xmin and ctid.

    An updated row gets a new xmin and ctid even when its values stay the same, so
    two equal states mean no row was added, changed or deleted, no table created.
    """
    conninfo, schema = _pg(url)
    with psycopg.connect(conninfo) as conn:
        tables = [
            str(row[0])
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = %s ORDER BY table_name",
                (schema,),
            )
        ]
        return {
            table: conn.execute(
                sql.SQL(
                    "SELECT xmin::text, ctid::text, t::text FROM {}.{} AS t ORDER BY 2"
                ).format(sql.Identifier(schema), sql.Identifier(table))
            ).fetchall()
            for table in tables
        }


def _pg_set_version(url: str, version: int) -> None:
    conninfo, schema = _pg(url)
    with psycopg.connect(conninfo) as conn:
        conn.execute(
            sql.SQL(
                "UPDATE {}.resumable_meta SET value = %s WHERE key = 'schema_version'"
            ).format(sql.Identifier(schema)),
            (str(version),),
        )


def _pg_drop(url: str) -> None:
    conninfo, schema = _pg(url)
    with psycopg.connect(conninfo) as conn:
        conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )


@pytest.mark.postgres
def test_reading_commands_never_create_a_postgresql_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = store_url("postgres", tmp_path)
    schema = _pg(url)[1]
    try:
        for status, output in _read_all(url, capsys, ui=True):
            assert status != 0, output
            assert f"no resumable store in schema '{schema}'" in output
            assert "a writing command" in output
            assert "Traceback" not in output
        assert not _schema_exists(url)
    finally:
        _pg_drop(url)


@pytest.mark.postgres
def test_reading_a_postgresql_store_writes_nothing_and_migrates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = store_url("postgres", tmp_path)
    try:
        asyncio.run(_one_run(url))
        before = _pg_state(url)
        for status, output in _read_all(url, capsys):
            assert status == 0, output
        assert _pg_state(url) == before
        _expect_refusals(url, capsys, set_version=_pg_set_version, state=_pg_state)
    finally:
        _pg_drop(url)


async def _delete_read_only(url: str) -> None:
    opened = for_reading(url)
    store = PostgresStore(opened) if url.startswith("postgres") else RedisStore(opened)
    try:
        with pytest.raises(StoreError, match="read-only"):
            await store.delete_runs(["kept"])
        assert await store.get_run("kept") is not None
    finally:
        await store.close()


@pytest.mark.postgres
def test_a_store_opened_for_reading_takes_no_write_on_postgresql(
    tmp_path: Path,
) -> None:
    url = store_url("postgres", tmp_path)
    try:
        asyncio.run(_one_run(url))
        asyncio.run(_delete_read_only(url))
    finally:
        _pg_drop(url)


def _expect_refusals(
    url: str,
    capsys: pytest.CaptureFixture[str],
    *,
    set_version: Callable[[str, int], None],
    state: Callable[[str], object],
) -> None:
    """An older store is refused, not migrated; a newer one is refused."""
    supported = (
        postgres_migrations.latest_version()
        if url.startswith("postgres")
        else SCHEMA_VERSION
    )
    set_version(url, supported - 1)
    older = state(url)
    for status, output in _read_all(url, capsys):
        assert status != 0, output
        assert "open it once with a writing command" in output
    assert state(url) == older
    set_version(url, supported + 1)
    status = main(["runs", "--store", url])
    assert status != 0
    assert "newer" in capsys.readouterr().err.lower()


# --- Redis -----------------------------------------------------------------------
def _redis_state(url: str) -> dict[bytes, bytes | None]:
    """Every key under the store's prefix, with its DUMP (same DUMP: same value)."""
    plain, prefix = parse_url(url)
    with redis.Redis.from_url(plain) as client:
        keys = sorted(client.scan_iter(match=f"{{{prefix}}}*", count=1000))
        return {key: client.dump(key) for key in keys}


def _redis_set_version(url: str, version: int) -> None:
    plain, prefix = parse_url(url)
    with redis.Redis.from_url(plain) as client:
        client.hset(f"{{{prefix}}}meta", "schema_version", str(version))


def _redis_drop(url: str) -> None:
    plain, prefix = parse_url(url)
    with redis.Redis.from_url(plain) as client:
        keys = list(client.scan_iter(match=f"{{{prefix}}}*", count=1000))
        if keys:
            client.unlink(*keys)


@pytest.mark.redis
def test_reading_commands_never_create_a_redis_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = store_url("redis", tmp_path)
    prefix = parse_url(url)[1]
    try:
        for status, output in _read_all(url, capsys, ui=True):
            assert status != 0, output
            assert f"no resumable store under prefix '{prefix}'" in output
            assert "a writing command" in output
            assert "Traceback" not in output
        assert _redis_state(url) == {}
    finally:
        _redis_drop(url)


@pytest.mark.redis
def test_reading_a_redis_store_writes_nothing_and_migrates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = store_url("redis", tmp_path)
    try:
        asyncio.run(_one_run(url))
        before = _redis_state(url)
        assert before
        for status, output in _read_all(url, capsys):
            assert status == 0, output
        assert _redis_state(url) == before
        _expect_refusals(
            url, capsys, set_version=_redis_set_version, state=_redis_state
        )
    finally:
        _redis_drop(url)


@pytest.mark.redis
def test_a_store_opened_for_reading_takes_no_write_on_redis(tmp_path: Path) -> None:
    url = store_url("redis", tmp_path)
    try:
        asyncio.run(_one_run(url))
        before = _redis_state(url)
        asyncio.run(_delete_read_only(url))
        assert _redis_state(url) == before
    finally:
        _redis_drop(url)


@pytest.mark.postgres
def test_reading_keeps_the_users_own_libpq_options_on_postgresql() -> None:
    base = (
        f"{service_url('postgres')}?schema=unused&options=-c%20statement_timeout%3D4321"
    )
    conninfo = parse_postgres_url(for_reading(base)).conninfo
    with psycopg.connect(conninfo) as conn:
        shown = conn.execute(
            "SELECT current_setting('default_transaction_read_only'), "
            "current_setting('statement_timeout')"
        ).fetchone()
    assert shown == ("on", "4321ms")
