"""Cold threads: a thread's older snapshots leave the primary store and read back whole."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import logging
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from conftest import store_url
from offload.test_cold_runs import _kill_at
from resumable import Engine
from resumable.cli import main
from resumable.errors import CheckpointNotFound, CorruptCheckpointError, StoreError
from resumable.stores import create_store
from resumable.stores.blobs import BlobUnavailable, FileBlobs
from resumable.stores.offload import OffloadStore
from resumable.stores.protocol import Store
from resumable.stores.stubs import SupportsThreadArchive


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ]
)
async def any_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh SQLite, PostgreSQL or Redis store URL (dropped after)."""
    url = store_url(str(request.param), tmp_path)
    yield url
    if request.param != "sqlite":
        store = create_store(url)
        try:
            await store.drop()  # type: ignore[attr-defined]  # PostgresStore/RedisStore.drop, for tests
        finally:
            await store.close()


def _inner(engine: Engine) -> Store:
    store = engine.store
    assert isinstance(store, OffloadStore)
    return store.inner


async def _conversation(engine: Engine, thread_id: str, saves: int) -> list[object]:
    states: list[object] = []
    messages: list[str] = []
    for i in range(saves):
        messages.append(f"message {i} " + "x" * 200)
        state = {"messages": list(messages), "turn": i}
        await engine.save_state(thread_id, state)
        states.append(state)
    return states


class _Unreachable(FileBlobs):
    """An object store that stops answering reads once told to."""

    down = False

    async def get(self, key: str) -> bytes | bytearray:
        if self.down:
            raise BlobUnavailable(f"{key}: down for this test")
        return await super().get(key)


async def test_an_archived_thread_keeps_its_latest_live_and_reads_history_through_its_stub(
    any_url: str, tmp_path: Path
) -> None:
    blobs = _Unreachable(tmp_path / "objects")
    async with Engine(any_url, blobs=blobs) as engine:
        states = await _conversation(engine, "chat", 40)
        history = await engine.state_history("chat")
        ids = [c.checkpoint_id for c in history]
        inner = _inner(engine)
        assert isinstance(inner, SupportsThreadArchive)
        rows_before = len(await inner.list_snapshots("chat", namespace=None))
        done = await engine.archive(older_than=timedelta(0))
        assert [(a.kind, a.name) for a in done] == [("thread", "chat")]
        stub = await inner.load_thread_stub("chat")
        assert stub is not None
        live = await inner.list_snapshots("chat", namespace=None)
        assert [s.checkpoint_id for s in live] == [ids[0]]
        assert rows_before > 1
    async with Engine(any_url, blobs=blobs) as engine:  # nothing cached
        blobs.down = True
        # the latest state loads from live rows alone; history needs the object
        assert await engine.load_state("chat") == states[-1]
        with pytest.raises(StoreError, match="try again"):
            await engine.load_state("chat", checkpoint_id=ids[10])
        blobs.down = False
        assert [c.checkpoint_id for c in await engine.state_history("chat")] == ids
        assert await engine.load_state("chat", checkpoint_id=ids[10]) == states[-11]
        # fork from an archived checkpoint, save on the archived thread
        await engine.fork_state("chat", ids[20], to_thread="forked")
        assert await engine.load_state("forked") == states[-21]
        await engine.save_state("chat", {"messages": [], "turn": 99})
        assert await engine.load_state("chat") == {"messages": [], "turn": 99}
        assert len(await engine.state_history("chat")) == 41
        # gc keeps the stub's object; restoring puts every row back
        assert isinstance(engine.store, OffloadStore)
        assert stub.key in await engine.store.referenced_keys()
        await engine.gc(blobs_grace=timedelta(0))
        assert await engine.unarchive_thread("chat")
        assert not await engine.unarchive_thread("chat")
        assert await _inner(engine).load_thread_stub("chat") is None  # type: ignore[attr-defined]  # SupportsThreadArchive, checked above
        blobs.down = True
        assert await engine.load_state("chat", checkpoint_id=ids[10]) == states[-11]
        assert len(await engine.state_history("chat")) == 41


async def test_archiving_again_carries_the_earlier_object_into_one(
    any_url: str, tmp_path: Path
) -> None:
    blobs = FileBlobs(tmp_path / "objects")
    async with Engine(any_url, blobs=blobs) as engine:
        states = await _conversation(engine, "t", 20)
        await engine.archive(older_than=timedelta(0))
        more = await _conversation(engine, "t", 20)
        ids = [c.checkpoint_id for c in await engine.state_history("t")]
        assert len(ids) == 40
        done = await engine.archive(older_than=timedelta(0))
        assert [a.name for a in done] == ["t"]
        inner = _inner(engine)
        assert isinstance(inner, SupportsThreadArchive)
        stub = await inner.load_thread_stub("t")
        assert stub is not None
        assert len(await inner.list_snapshots("t", namespace=None)) == 1
    async with Engine(any_url, blobs=blobs) as engine:
        assert [c.checkpoint_id for c in await engine.state_history("t")] == ids
        assert await engine.load_state("t") == more[-1]
        assert await engine.load_state("t", checkpoint_id=ids[-1]) == states[0]
    async with Engine(any_url) as engine:  # without ?blobs=: the live rows only
        assert [c.checkpoint_id for c in await engine.state_history("t")] == ids[:1]
        with pytest.raises(CheckpointNotFound):
            await engine.load_state("t", checkpoint_id=ids[-1])


async def test_a_kill_mid_archive_or_mid_restore_leaves_rows_or_stub_never_neither(
    primary_url: str, tmp_path: Path
) -> None:
    folder = tmp_path / "objects"
    blobs = FileBlobs(folder)
    saved: dict[str, list[object]] = {}
    ids: dict[str, list[str]] = {}
    async with Engine(primary_url, blobs=blobs) as engine:
        for i in range(5):
            saved[f"c-{i}"] = await _conversation(engine, f"c-{i}", 12)
            history = await engine.state_history(f"c-{i}")
            ids[f"c-{i}"] = [c.checkpoint_id for c in history]
        await asyncio.sleep(0.005)  # saved strictly before "now"

    async def every_state_loads(engine: Engine) -> None:
        for thread_id, states in saved.items():
            history = await engine.state_history(thread_id)
            assert [c.checkpoint_id for c in history] == ids[thread_id], thread_id
            for checkpoint_id, state in zip(
                ids[thread_id], reversed(states), strict=True
            ):
                loaded = await engine.load_state(thread_id, checkpoint_id=checkpoint_id)
                assert loaded == state, (thread_id, checkpoint_id)
            assert await engine.load_state(thread_id) == states[-1]

    # killed after the third thread's object was uploaded, before its swap
    orphan = _kill_at("archive", primary_url, folder, "uploaded ")
    async with Engine(primary_url, blobs=blobs) as engine:
        inner = _inner(engine)
        assert isinstance(inner, SupportsThreadArchive)
        stubs = {t: await inner.load_thread_stub(t) for t in saved}
        for thread_id, stub in stubs.items():
            rows = await inner.list_snapshots(thread_id, namespace=None)
            # a stub leaves the newest live; without one every state is a row
            assert (stub is not None) == (len(rows) == 1), (thread_id, len(rows))
        archived = {s.key for s in stubs.values() if s is not None}
        assert orphan not in archived  # the third upload's thread was not swapped
        assert 0 < len(archived) < len(saved)
        await every_state_loads(engine)
        store = engine.store
        assert isinstance(store, OffloadStore)
        assert await store.collect_garbage(older_than_ms=0, now_ms=2**62) >= 1
        listed = {b.key for b in await blobs.listing()}
        assert orphan not in listed
        assert archived <= listed
        rest = await engine.archive(older_than=timedelta(0))
        assert len(rest) == len(saved) - len(archived)
        for thread_id in saved:
            assert await inner.load_thread_stub(thread_id) is not None, thread_id
        await every_state_loads(engine)

    # killed once the restore read the object, before the rows went back
    _kill_at("restore-thread", primary_url, folder, "read ")
    async with Engine(primary_url, blobs=blobs) as engine:
        inner = _inner(engine)
        assert isinstance(inner, SupportsThreadArchive)
        assert await inner.load_thread_stub("c-0") is not None  # still archived
        assert len(await inner.list_snapshots("c-0", namespace=None)) == 1
        await every_state_loads(engine)
        assert await engine.unarchive_thread("c-0")
        assert await inner.load_thread_stub("c-0") is None
        rows = await inner.list_snapshots("c-0", namespace=None)
        assert len(rows) > 1
        await every_state_loads(engine)


async def test_a_thread_whose_newest_snapshot_is_damaged_is_archived_all_the_same(
    any_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with Engine(any_url, blobs=FileBlobs(tmp_path / "objects")) as engine:
        states = await _conversation(engine, "bad", 6)
        await _conversation(engine, "good", 6)
        ids = [c.checkpoint_id for c in await engine.state_history("bad")]
        inner = _inner(engine)
        newest = (await inner.list_snapshots("bad", limit=1))[0]
        assert newest.parent_id is not None  # a delta
        # its chain now never ends (as a delta saved on its own id left it)
        await inner.save_snapshot(
            dataclasses.replace(newest, parent_id=newest.checkpoint_id)
        )
        await asyncio.sleep(0.005)
        with caplog.at_level(logging.WARNING, logger="resumable"):
            done = await engine.archive(older_than=timedelta(0))
        assert sorted(a.name for a in done) == ["bad", "good"]
        assert "archiving thread 'bad'" in caplog.text
    async with Engine(any_url, blobs=FileBlobs(tmp_path / "objects")) as engine:
        with pytest.raises(CorruptCheckpointError):
            await engine.load_state("bad")
        assert await engine.load_state("bad", checkpoint_id=ids[1]) == states[-2]
        assert [c.checkpoint_id for c in await engine.state_history("bad")] == ids


CHECK_APP = """
from resumable import step, workflow

ENGINES = []


@step(name="cold.check.turn")
async def turn(thread: str, i: int) -> str:
    await ENGINES[0].save_state(thread, {"turn": i, "text": "x" * 200})
    return f"turn {i}"


@workflow(name="cold.check.chat")
async def chat(thread: str) -> list[str]:
    return [await turn(thread, i) for i in range(8)]
"""


async def test_check_passes_on_a_run_whose_thread_and_journal_are_archived(
    primary_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "cold_check_app.py").write_text(CHECK_APP)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "cold_check_app", raising=False)
    app = importlib.import_module("cold_check_app")
    separator = "&" if "?" in primary_url else "?"
    url = f"{primary_url}{separator}blobs=file://{tmp_path / 'objects'}"
    async with Engine(url) as engine:
        app.ENGINES.append(engine)
        await engine.run(app.chat, "chat", run_id="c-1")
        history = [c.checkpoint_id for c in await engine.state_history("chat")]
        await asyncio.sleep(0.005)
        done = await engine.archive(older_than=timedelta(0))
        assert sorted((a.kind, a.name) for a in done) == [
            ("run", "c-1"),
            ("thread", "chat"),
        ]
    argv = ["check", "--app", "cold_check_app", "--store", url, "--all"]
    argv += ["--status", "succeeded"]
    assert await asyncio.to_thread(main, argv) == 0
    assert "c-1" in capsys.readouterr().out
    async with Engine(url) as engine:
        assert (await engine.check(run_ids=["c-1"])).ok
        assert [c.checkpoint_id for c in await engine.state_history("chat")] == history
        assert await engine.load_state("chat", checkpoint_id=history[-1]) == {
            "turn": 0,
            "text": "x" * 200,
        }
    sys.modules.pop("cold_check_app", None)


async def test_the_latest_state_keeps_every_chunk_when_its_thread_is_archived(
    any_url: str, tmp_path: Path
) -> None:
    # the newest snapshot is made full under its own id before the others move:
    # the chunks it shares with the delta it was must stay (PostgreSQL lost them)
    blobs = FileBlobs(tmp_path / "objects")
    threads = [f"d-{i}" for i in range(4)]
    states: dict[str, dict[str, object]] = {}

    async def drafts(engine: Engine, thread_id: str) -> None:
        messages: list[str] = []
        for i in range(20):
            messages.append(f"{thread_id} message {i} " + "m" * 300)
            states[thread_id] = {"messages": list(messages), "draft": f"{i} " * 400}
            await engine.save_state(thread_id, states[thread_id])

    async with Engine(any_url, blobs=blobs) as engine:
        await asyncio.gather(*(drafts(engine, t) for t in threads))
    async with Engine(any_url, blobs=blobs) as engine:
        for thread_id in threads:
            assert await engine.load_state(thread_id) == states[thread_id]
    await asyncio.sleep(0.005)
    async with Engine(any_url, blobs=blobs) as engine:
        assert len(await engine.archive(older_than=timedelta(0))) == len(threads)
        await engine.gc(blobs_grace=timedelta(0))
    async with Engine(any_url, blobs=blobs) as engine:
        for thread_id in threads:
            assert await engine.load_state(thread_id) == states[thread_id]
            history = await engine.state_history(thread_id)
            old = await engine.load_state(
                thread_id, checkpoint_id=history[-5].checkpoint_id
            )
            assert old["draft"] == "4 " * 400
