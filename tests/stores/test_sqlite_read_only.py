"""`sqlite:///...?mode=ro`: an existing file, read and never written (issues 36 and 41)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from resumable import Engine, SchemaVersionError, StoreError, step, workflow
from resumable.stores.sqlite import SQLiteStore
from resumable.testing import run_record

# every action code an authorizer is told of that changes the file or its schema
WRITES = {
    sqlite3.SQLITE_INSERT,
    sqlite3.SQLITE_UPDATE,
    sqlite3.SQLITE_DELETE,
    sqlite3.SQLITE_CREATE_TABLE,
    sqlite3.SQLITE_CREATE_INDEX,
    sqlite3.SQLITE_DROP_TABLE,
    sqlite3.SQLITE_ALTER_TABLE,
}


@step
async def double(n: int) -> int:
    return 2 * n


@workflow(name="tests.read_only.twice")
async def twice(n: int) -> int:
    return await double(n)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_reading_a_store_read_only_writes_nothing_and_leaves_no_file(
    tmp_path: Path,
) -> None:
    db = tmp_path / "state.db"
    async with Engine(f"sqlite:///{db}") as engine:
        await engine.run(twice, 21, run_id="done")
    before = (_digest(db), sorted(p.name for p in tmp_path.iterdir()))
    attempted: list[int] = []

    def watch(conn: sqlite3.Connection, _inline: bool) -> None:
        def authorize(action: int, *_: object) -> int:
            if action in WRITES:
                attempted.append(action)
            return sqlite3.SQLITE_OK

        conn.set_authorizer(authorize)

    store = SQLiteStore(f"sqlite:///{db}?mode=ro", on_connect=watch)
    async with Engine(store) as engine:
        assert [run.run_id for run in await engine.runs()] == ["done"]
        assert len(await engine.history("done")) == 1
        await engine.ledger("done")
        with pytest.raises(StoreError, match="read-only"):
            await engine.cancel("done")
    assert attempted == []
    assert (_digest(db), sorted(p.name for p in tmp_path.iterdir())) == before


async def test_a_missing_file_is_an_error_naming_its_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for mode in ("ro", "rw"):
        store = SQLiteStore(f"sqlite:///nowhere/state.db?mode={mode}")
        with pytest.raises(StoreError) as missing:
            await store.open()
        assert f"no database at {tmp_path / 'nowhere' / 'state.db'}" in str(
            missing.value
        )
        await store.close()
    assert list(tmp_path.iterdir()) == []  # no folder either


async def test_a_file_that_is_no_store_or_a_newer_one_is_refused(
    tmp_path: Path,
) -> None:
    other = tmp_path / "other.db"
    other.write_bytes(b"")
    store = SQLiteStore(f"sqlite:///{other}?mode=ro")
    with pytest.raises(StoreError, match="is not a resumable store"):
        await store.open()
    await store.close()
    newer = tmp_path / "newer.db"
    async with Engine(f"sqlite:///{newer}") as engine:
        await engine.store.create_run(run_record("r"))
    with sqlite3.connect(newer) as conn:
        conn.execute(
            "UPDATE resumable_meta SET value = '999' WHERE key = 'schema_version'"
        )
    conn.close()
    store = SQLiteStore(f"sqlite:///{newer}?mode=ro")
    with pytest.raises(SchemaVersionError):
        await store.open()
    await store.close()


async def test_a_read_only_open_sees_what_a_live_writer_committed(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    async with Engine(url) as writer:
        await writer.run(twice, 1, run_id="first")
        assert (tmp_path / "state.db-wal").exists()  # the writer's WAL, in use
        async with Engine(f"{url}?mode=ro") as reader:
            await writer.run(twice, 2, run_id="second")  # only in the WAL so far
            assert {run.run_id for run in await reader.runs()} == {"first", "second"}
        await writer.run(twice, 3, run_id="third")  # the writer carries on
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.db"]


async def test_two_readers_that_overlap_leave_no_file_whichever_closes_last(
    tmp_path: Path,
) -> None:
    # the second reader finds the first one's (empty) WAL beside the file; read as
    # "a writer's WAL" it opened mode=ro and, closing last, could not remove the
    # WAL files: two read-only CLI commands at once left state.db-wal behind
    db = tmp_path / "state.db"
    async with Engine(f"sqlite:///{db}") as engine:
        await engine.run(twice, 21, run_id="done")
    before = (_digest(db), sorted(p.name for p in tmp_path.iterdir()))
    for first_closes_first in (True, False):
        first = Engine(f"sqlite:///{db}?mode=ro")
        await first.__aenter__()
        assert [run.run_id for run in await first.runs()] == ["done"]
        assert (tmp_path / "state.db-wal").stat().st_size == 0  # the empty one
        async with Engine(f"sqlite:///{db}?mode=ro") as second:
            assert [run.run_id for run in await second.runs()] == ["done"]
            if first_closes_first:
                await first.__aexit__(None, None, None)
        if not first_closes_first:
            await first.__aexit__(None, None, None)
        assert (_digest(db), sorted(p.name for p in tmp_path.iterdir())) == before
