"""A store and a bucket archived by an earlier resumable read, restore and archive again.

`archived_data/<commit>/` holds a SQLite file and the folder of its object store
that `archived_data/make.py` wrote with the resumable of that commit: a run and a
thread archived by row (RCOLD1 and RCOLDT1 objects, a stub row each), a run and a
thread whose payloads the payload-level archive of that code moved into RARCH1
objects (which today's code reads but no longer writes), and a waiting run.
Each test opens a fresh copy through the public API.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from offload.archived_data.flows import BIG, CALLS, book
from resumable import CorruptCheckpointError, Engine
from resumable.stores.blobref import is_member
from resumable.stores.cold import (
    decode_cold_run,
    decode_cold_thread,
    encode_cold_run,
    encode_cold_thread,
)
from resumable.stores.offload import OffloadStore
from resumable.stores.stubs import SupportsArchive, SupportsThreadArchive

STORED = Path(__file__).parent / "archived_data"
WRITTEN_BY = sorted(p.name for p in STORED.iterdir() if (p / "version.txt").exists())
BOOK = ["chapter 0", "chapter 1", "chapter 2"]


@pytest.fixture(params=WRITTEN_BY)
async def engine(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Engine]:
    written = STORED / str(request.param)
    shutil.copy(written / "sqlite.db", tmp_path / "state.db")
    shutil.copytree(written / "bucket", tmp_path / "bucket")
    bucket = (tmp_path / "bucket").as_uri()
    CALLS.clear()
    async with Engine(f"sqlite:///{tmp_path / 'state.db'}?blobs={bucket}") as opened:
        yield opened


def _offload(engine: Engine) -> OffloadStore:
    store = engine.store
    assert isinstance(store, OffloadStore)
    return store


def _bucket(engine: Engine) -> set[str]:
    root = Path(_offload(engine).blobs.url.removeprefix("file://"))
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_there_is_an_archive_written_by_an_earlier_version() -> None:
    assert WRITTEN_BY, "archived_data/ holds no store; run archived_data/make.py"


async def test_the_store_holds_what_each_archive_left(engine: Engine) -> None:
    inner = _offload(engine).inner
    assert isinstance(inner, SupportsArchive)
    assert isinstance(inner, SupportsThreadArchive)
    assert [s.run_id for s in await inner.list_archive_stubs(after=None, limit=9)] == [
        "cold-1"
    ]
    assert [
        t.thread_id for t in await inner.list_thread_stubs(after=None, limit=9)
    ] == ["chat"]
    assert any(is_member(s.output) for s in await inner.load_journal("payload-1"))
    notes = await inner.list_snapshots("notes", namespace=None)
    chunks = await inner.get_chunks([h for s in notes for h in s.chunk_refs])
    assert any(is_member(data) for data in chunks.values())
    kinds = {key.split("/")[0] for key in _bucket(engine)}
    assert kinds == {"runs", "threads", "archive", "sha256"}


@pytest.mark.parametrize("run_id", ["cold-1", "payload-1"])
async def test_an_archived_run_replays_its_result_and_history(
    engine: Engine, run_id: str
) -> None:
    result = await engine.run(book, 3, run_id=run_id)
    assert result == [*BOOK, run_id, BIG[:4]]
    assert CALLS == {}
    history = await engine.history(run_id)
    assert [view.name for view in history].count("archived.write") == 3
    assert any(view.output() == BIG for view in history)
    ledger = await engine.ledger(run_id)
    assert (ledger.incurred.input_tokens, ledger.incurred.output_tokens) == (300, 60)
    report = await engine.check(run_ids=[run_id])
    assert report.ok
    assert [check.replayed for check in report.runs] == [5]


@pytest.mark.parametrize("thread_id", ["chat", "notes"])
async def test_an_archived_threads_states_read_back_oldest_too(
    engine: Engine, thread_id: str
) -> None:
    assert (await engine.load_state(thread_id))["turn"] == 2
    history = await engine.state_history(thread_id)
    assert [c.label for c in history] == [f"{thread_id}-{t}" for t in (2, 1, 0)]
    oldest = await engine.load_state(thread_id, checkpoint_id=history[-1].checkpoint_id)
    assert oldest["turn"] == 0


async def test_restoring_puts_the_rows_back_and_they_read_the_same(
    engine: Engine,
) -> None:
    before = await engine.history("cold-1")
    states = await engine.state_history("chat")
    assert await engine.unarchive("cold-1")
    assert await engine.unarchive_thread("chat")
    inner = _offload(engine).inner
    assert isinstance(inner, SupportsArchive)
    assert await inner.load_archive_stub("cold-1") is None
    assert [v.output() for v in await engine.history("cold-1")] == [
        v.output() for v in before
    ]
    assert await engine.state_history("chat") == states
    assert not await engine.unarchive("payload-1")  # archived in place: no stub


async def test_archiving_again_moves_the_in_place_archive_into_a_row_archive(
    engine: Engine,
) -> None:
    done = await engine.archive(older_than=timedelta(0))
    assert {(a.kind, a.name) for a in done} >= {
        ("run", "payload-1"),
        ("thread", "notes"),
    }
    assert "live-1" not in {a.name for a in done}
    result = await engine.run(book, 3, run_id="payload-1")
    assert result == [*BOOK, "payload-1", BIG[:4]]
    history = await engine.state_history("notes")
    oldest = await engine.load_state("notes", checkpoint_id=history[-1].checkpoint_id)
    assert oldest["turn"] == 0
    assert CALLS == {}


async def test_a_collection_keeps_every_object_the_archives_reference(
    engine: Engine,
) -> None:
    objects = _bucket(engine)
    assert objects <= await _offload(engine).referenced_keys()
    await engine.gc(older_than=timedelta(days=3650), blobs_grace=timedelta(0))
    assert _bucket(engine) == objects


def _objects(kind: str) -> list[bytes]:
    paths = sorted(
        p for w in WRITTEN_BY for p in (STORED / w / "bucket" / kind).rglob("*")
    )
    return [p.read_bytes() for p in paths if p.is_file()]


def test_todays_codec_writes_the_objects_byte_for_byte_as_they_were_written() -> None:
    runs, threads = _objects("runs"), _objects("threads")
    assert runs
    assert threads
    assert all(encode_cold_run(decode_cold_run(packed)) == packed for packed in runs)
    assert all(
        encode_cold_thread(decode_cold_thread(packed)) == packed for packed in threads
    )


@pytest.mark.parametrize("damage", ["flip a byte", "delete"])
async def test_a_damaged_or_missing_in_place_archive_object_is_a_corrupt_checkpoint(
    engine: Engine, damage: str
) -> None:
    root = Path(_offload(engine).blobs.url.removeprefix("file://"))
    for path in (root / "archive").rglob("*"):
        if not path.is_file():
            continue
        if damage == "delete":
            path.unlink()
        else:
            data = bytearray(path.read_bytes())
            data[len(data) // 2] ^= 0xFF
            path.write_bytes(bytes(data))
    with pytest.raises(CorruptCheckpointError, match="archive object archive/"):
        await engine.history("payload-1")
    oldest = (await engine.state_history("notes"))[-1].checkpoint_id
    with pytest.raises(CorruptCheckpointError, match="archive object archive/"):
        await engine.load_state("notes", checkpoint_id=oldest)
