"""Cold runs: an archived run's journal rows leave the primary store and read back whole."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import Counter
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from offload.s3server import MotoS3
from offload.test_kill import _wait_for_lines
from resumable import Engine, map_steps, step, wait_for, workflow
from resumable.errors import (
    CorruptCheckpointError,
    RunNotFound,
    UsageError,
    WorkflowFailed,
)
from resumable.stores import create_store
from resumable.stores.blobs import FileBlobs
from resumable.stores.cold import ColdRun, decode_cold_run, encode_cold_run
from resumable.stores.kinds import JournalKind, seq_of
from resumable.stores.offload import OffloadStore
from resumable.stores.protocol import InputRecord, StepRecord, Store
from resumable.stores.stubs import ArchiveStub, SupportsArchive
from resumable.ui.app import create_app

RAN: Counter[str] = Counter()
APP = Path(__file__).with_name("archive_kill_app.py")


@step(name="cold.note")
async def note(i: int) -> str:
    RAN[f"note {i}"] += 1
    return f"note {i} " + os.urandom(64).hex()


@step(name="cold.item")
async def item(word: str) -> str:
    RAN[f"item {word}"] += 1
    return word.upper() * 50


@workflow(name="cold.mixed")
async def mixed(words: list[str]) -> list[str]:
    first = await note(0)
    go = await wait_for("go")  # the resume after it replays note 0: a ledger entry
    items = await map_steps(item, words, key=str)
    return [first[:6], str(go), *items]


async def _finished(engine: Engine, run_id: str) -> list[str]:
    handle = await engine.start(mixed, ["a", "b", "c"], run_id=run_id)
    for _ in range(500):
        run = await engine.store.get_run(run_id)
        if run is not None and run.status == "waiting":
            break
        await asyncio.sleep(0.01)
    await engine.send(run_id, "go", {"ok": True})
    result: list[str] = await handle.result()
    await asyncio.sleep(0.005)  # updated strictly before "now"
    return result


def _inner(engine: Engine) -> Store:
    store = engine.store
    assert isinstance(store, OffloadStore)
    return store.inner


async def test_every_record_kind_and_input_moves_and_reads_back_everywhere(
    primary_url: str, moto_s3: MotoS3, bucket: str
) -> None:
    blobs = moto_s3.blobs(bucket, prefix="mixed")
    async with Engine(primary_url, blobs=blobs) as engine:
        expected = await _finished(engine, "m-1")
        inner = _inner(engine)
        journal = await inner.load_journal("m-1")
        kinds = {record.kind for record in journal}
        assert kinds == {JournalKind.STEP, JournalKind.LEDGER, JournalKind.BATCH_ITEM}
        inputs = await inner.list_inputs("m-1")
        assert [i.key for i in inputs] == ["go"]
        before = (
            [v.output() for v in await engine.history("m-1")],
            await engine.ledger("m-1"),
            [r.item_key async for r in engine.export(["m-1"])],
        )
        done = await engine.archive(older_than=timedelta(0))
        assert [(d.kind, d.name, d.payloads) for d in done] == [
            ("run", "m-1", len(journal) + 1)
        ]
        assert await inner.load_journal("m-1") == []
        assert await inner.list_inputs("m-1") == []
        # one stub row; the run row stays and lists
        assert [r.run_id for r in await engine.runs()] == ["m-1"]
        assert await engine.store.load_journal("m-1") == journal
        assert await engine.store.load_journal("m-1", up_to_seq=1) == [
            s for s in journal if s.seq <= 1
        ]
        assert isinstance(engine.store, Store)
        assert await engine.store.list_inputs("m-1") == inputs
        assert await engine.store.get_inputs("m-1") == {"go": inputs[0].value}
    async with Engine(primary_url, blobs=blobs) as engine:  # nothing cached
        after = (
            [v.output() for v in await engine.history("m-1")],
            await engine.ledger("m-1"),
            [r.item_key async for r in engine.export(["m-1"])],
        )
        assert after == before
        assert (await engine.check(run_ids=["m-1"])).ok
        RAN.clear()
        assert await engine.run(mixed, ["a", "b", "c"], run_id="m-1") == expected
        fork = await engine.fork("m-1", at_step=1, run_id="m-fork")
        await engine.send(fork, "go", {"ok": True})
        assert await engine.run(mixed, ["a", "b", "c"], run_id=fork) == expected
        assert "note 0" not in RAN  # the fork read step 1 from the archive
        app = create_app(engine)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1"
        ) as client:
            page = await client.get("/run", params={"id": "m-1"})
        assert page.status_code == 200, page.text
        assert "cold.item" in page.text
        assert "cold.note" in page.text


async def test_gc_keeps_an_archived_runs_object_and_the_payloads_it_references(
    primary_url: str, tmp_path: Path
) -> None:
    blobs = FileBlobs(tmp_path / "objects")
    # every step result is offloaded: the archive holds references to them
    async with Engine(primary_url, blobs=blobs, offload_over=128) as engine:
        await _finished(engine, "g-1")
        offloaded = {b.key for b in await blobs.listing()}
        assert offloaded
        [archived] = await engine.archive(older_than=timedelta(0))
        inner = _inner(engine)
        assert isinstance(inner, SupportsArchive)
        stub = await inner.load_archive_stub("g-1")
        assert stub is not None
        assert set(stub.refers_to) <= offloaded
        assert stub.refers_to
        assert (await engine.gc(blobs_grace=timedelta(0))).blobs == 0
        keys = {b.key for b in await blobs.listing()}
        assert {archived.key, *stub.refers_to} <= keys
        history = [v.output() for v in await engine.history("g-1")]
        assert all(w * 50 in history for w in "ABC")
        # deleting the run deletes its stub: then everything is garbage
        assert (await engine.gc(older_than=timedelta(0))).runs == 1
        assert await inner.load_archive_stub("g-1") is None
        await engine.gc(blobs_grace=timedelta(0))
        assert await blobs.listing() == []


class _FailingSwap:
    """Wraps a store whose `archive_journal` fails: a crash after the upload."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def archive_journal(self, stub: ArchiveStub) -> bool:
        raise ConnectionError("the process died here")


async def test_a_failure_between_upload_and_swap_leaves_the_rows_and_garbage(
    primary_url: str, tmp_path: Path
) -> None:
    blobs = FileBlobs(tmp_path / "objects")
    async with Engine(primary_url, blobs=blobs) as engine:
        await _finished(engine, "f-1")
        journal = await _inner(engine).load_journal("f-1")
    inner = create_store(primary_url)
    store = OffloadStore(_FailingSwap(inner), blobs)  # type: ignore[arg-type]  # a Store by delegation
    try:
        with pytest.raises(ConnectionError):
            await store.archive_finished(
                updated_before_ms=2**62, limit=10, now_ms=2**62
            )
        assert len(await blobs.listing()) == 1  # uploaded, never referenced
        assert await inner.load_journal("f-1") == journal
        assert await store.collect_garbage(older_than_ms=0, now_ms=2**62) == 1
        assert await store.load_journal("f-1") == journal
    finally:
        await store.close()


async def test_a_missing_object_fails_restore_and_keeps_the_stub(
    primary_url: str, tmp_path: Path
) -> None:
    blobs = FileBlobs(tmp_path / "objects")
    async with Engine(primary_url, blobs=blobs) as engine:
        await _finished(engine, "r-1")
        [done] = await engine.archive(older_than=timedelta(0))
        assert done.key is not None
        await blobs.delete(done.key)
        with pytest.raises(CorruptCheckpointError, match="missing") as caught:
            await engine.unarchive("r-1")
        assert "run 'r-1'" in str(caught.value)
        assert done.key in str(caught.value)
        with pytest.raises(CorruptCheckpointError, match="missing"):
            await engine.history("r-1")
        inner = _inner(engine)
        assert isinstance(inner, SupportsArchive)
        assert await inner.load_archive_stub("r-1") is not None
        with pytest.raises(RunNotFound):
            await engine.unarchive("missing-run")


def test_the_object_format_round_trips_and_refuses_damage() -> None:
    steps = [
        StepRecord(
            run_id="x",
            seq=seq,
            name="n\ud800",
            fingerprint="f",
            status="ok",
            output=None if seq == 2 else bytes([seq % 256]) * 3,
            attempts=1,
            started_at_ms=1,
            finished_at_ms=2,
            usage=b"u" if seq == 1 else None,
        )
        for seq in (-3, 1, 2, seq_of(JournalKind.BATCH_ITEM, 7))
    ]
    cold = ColdRun(
        "x", steps, [InputRecord(run_id="x", key="k", value=b"v", sent_at_ms=3)]
    )
    packed = encode_cold_run(cold)
    assert decode_cold_run(packed) == cold
    for damaged in (packed[:-3], b"not zlib", encode_cold_run(cold)[:10]):
        with pytest.raises(ValueError):  # noqa: PT011 - each names its own damage
            decode_cold_run(damaged)


@step(name="cold.plain")
async def plain(i: int) -> str:
    return f"plain {i}"


@workflow(name="cold.three")
async def three(n: int) -> list[str]:
    return [await plain(i) for i in range(n)]


def _kill_at(mode: str, url: str, folder: Path, prefix: str) -> str:
    log = folder.parent / f"{mode}.log"
    with (folder.parent / "stderr").open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, str(APP), mode, url, str(folder), str(log)],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
        )
    try:
        count = 3 if mode == "archive" else 1
        lines = _wait_for_lines(log, prefix, count, proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert "finished" not in log.read_text()
    return lines[count - 1].removeprefix(prefix)  # the upload or read that hung


async def test_a_kill_mid_archive_or_mid_restore_leaves_rows_or_stub_never_neither(
    primary_url: str, tmp_path: Path
) -> None:
    folder = tmp_path / "objects"
    blobs = FileBlobs(folder)
    journals: dict[str, list[StepRecord]] = {}
    async with Engine(primary_url, blobs=blobs) as engine:
        for i in range(5):
            await engine.run(three, 3, run_id=f"k-{i}")
            journals[f"k-{i}"] = await engine.store.load_journal(f"k-{i}")
        await asyncio.sleep(0.005)
    orphan = _kill_at("archive", primary_url, folder, "uploaded ")
    async with Engine(primary_url, blobs=blobs) as engine:
        inner = _inner(engine)
        assert isinstance(inner, SupportsArchive)
        stubs = {r: await inner.load_archive_stub(r) for r in journals}
        rows = {r: await inner.load_journal(r) for r in journals}
        for run_id, journal in journals.items():
            assert (stubs[run_id] is None) == bool(rows[run_id]), run_id
            assert await engine.store.load_journal(run_id) == journal
        archived = {s.key for s in stubs.values() if s is not None}
        assert orphan not in archived  # the third upload's run was not swapped
        assert len(archived) < len(journals)
        store = engine.store
        assert isinstance(store, OffloadStore)
        assert await store.collect_garbage(older_than_ms=0, now_ms=2**62) >= 1
        assert orphan not in {b.key for b in await blobs.listing()}
        assert archived <= {b.key for b in await blobs.listing()}
        rest = await engine.archive(older_than=timedelta(0))
        assert len(rest) == len(journals) - len(archived)
    _kill_at("restore", primary_url, folder, "read ")
    async with Engine(primary_url, blobs=blobs) as engine:
        inner = _inner(engine)
        assert isinstance(inner, SupportsArchive)
        assert await inner.load_archive_stub("k-0") is not None  # still archived
        assert await engine.store.load_journal("k-0") == journals["k-0"]
        assert await engine.unarchive("k-0")
        assert await inner.load_journal("k-0") == journals["k-0"]


FLAKY = {"fail": True}


@step(name="cold.flaky")
async def flaky(i: int) -> str:
    RAN[f"flaky {i}"] += 1
    if i == 2 and FLAKY["fail"]:
        raise ValueError("not yet")
    return f"flaky {i}"


@workflow(name="cold.retried")
async def retried() -> list[str]:
    return [await flaky(i) for i in range(3)]


async def test_retrying_an_archived_failed_run_restores_its_journal_first(
    primary_url: str, tmp_path: Path
) -> None:
    blobs = FileBlobs(tmp_path / "objects")
    FLAKY["fail"] = True
    async with Engine(primary_url, blobs=blobs) as engine:
        with pytest.raises(WorkflowFailed):
            await engine.run(retried, run_id="retry-1")
        await asyncio.sleep(0.005)
        assert len(await engine.archive(older_than=timedelta(0))) == 1
    async with Engine(primary_url) as plain:  # no object store: cannot read it
        with pytest.raises(UsageError, match=r"archived.*\?blobs="):
            await plain.resume("retry-1")
        with pytest.raises(UsageError, match=r"archived.*\?blobs="):
            await plain.history("retry-1")
        with pytest.raises(UsageError, match=r"archived.*\?blobs="):
            await plain.ledger("retry-1")
        assert [r.run_id for r in await plain.runs()] == ["retry-1"]
    FLAKY["fail"] = False
    RAN.clear()
    async with Engine(primary_url, blobs=blobs) as engine:
        assert await engine.resume("retry-1") == ["flaky 0", "flaky 1", "flaky 2"]
        assert dict(RAN) == {"flaky 2": 1}  # steps 1 and 2 replayed from the archive
        inner = _inner(engine)
        assert isinstance(inner, SupportsArchive)
        assert await inner.load_archive_stub("retry-1") is None
        assert [s.seq for s in await inner.load_journal("retry-1") if s.seq > 0] == [
            1,
            2,
            3,
        ]
