"""Payload offload against a real S3 API (moto's server on 127.0.0.1), on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from conftest import store_url
from offload.s3server import MotoS3
from resumable import Engine, step, wait_for, workflow
from resumable.cli import main
from resumable.errors import CheckpointWriteError, CorruptCheckpointError, StoreError
from resumable.stores import create_store
from resumable.stores.blobs import FileBlobs
from resumable.stores.offload import BlobRef, OffloadStore, is_reference
from resumable.stores.protocol import Payload, RunQuery, StepRecord, Store

KEY = "k1:" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE="  # 32 bytes, base64
RAN: Counter[str] = Counter()
MARKER = "PLAINTEXT-MARKER-"
OVER = 4096
BIG_LEN = len(MARKER) + 2 + 40_000


def _big(i: int) -> str:
    # random hex compresses to about half: still well over OVER once sealed
    return f"{MARKER}{i}:" + os.urandom(20_000).hex()


@step(name="offload.big")
async def big(i: int) -> str:
    RAN[f"big {i}"] += 1
    return _big(i)


@step(name="offload.small")
async def small(i: int) -> int:
    RAN[f"small {i}"] += 1
    return i * 2


@workflow(name="offload.flow")
async def flow(n: int) -> list[int]:
    texts = [await big(i) for i in range(n)]
    return [len(t) for t in texts] + [await small(n)]


@workflow(name="offload.waits")
async def waits(n: int) -> list[int]:
    texts = [await big(i) for i in range(n)]
    await wait_for("go")
    return [int(t.split(":")[0].removeprefix(MARKER)) for t in texts]


@pytest.fixture(autouse=True)
def _fresh_counts() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


def _offload(engine: Engine) -> OffloadStore:
    assert isinstance(engine.store, OffloadStore)
    return engine.store


async def _raw_steps(engine: Engine, run_id: str) -> list[StepRecord]:
    return await _offload(engine).inner.load_journal(run_id)


async def test_large_results_round_trip_and_rows_keep_only_references(
    primary_url: str, moto_s3: MotoS3, bucket: str
) -> None:
    async with Engine(
        primary_url, blobs=moto_s3.blobs(bucket), offload_over=OVER
    ) as engine:
        assert await engine.run(flow, 3, run_id="rt") == [BIG_LEN] * 3 + [6]
        rows = {r.seq: r for r in await _raw_steps(engine, "rt") if r.seq > 0}
        objects = {b.key for b in await _offload(engine).blobs.listing()}
    big_rows = [rows[1], rows[2], rows[3]]
    assert all(is_reference(r.output) for r in big_rows)
    assert all(len(r.output or b"") == 52 for r in big_rows)
    assert not is_reference(rows[4].output)  # small stays in the row
    assert objects == {BlobRef.decode(r.output or b"", place="").key for r in big_rows}

    # a new engine (nothing cached) replays every step from the two stores
    RAN.clear()
    async with Engine(
        primary_url, blobs=moto_s3.blobs(bucket), offload_over=OVER
    ) as engine:
        assert await engine.run(flow, 3, run_id="rt") == [BIG_LEN] * 3 + [6]
        views = await engine.history("rt")
        assert views[0].output().startswith(f"{MARKER}0:")
    assert not RAN


async def test_blobs_option_on_the_store_url_uses_the_aws_environment(
    primary_url: str, s3_env: MotoS3, bucket: str
) -> None:
    separator = "&" if "?" in primary_url else "?"
    url = f"{primary_url}{separator}blobs=s3://{bucket}/by-url&blobs_over={OVER}"
    async with Engine(url) as engine:
        assert await engine.run(flow, 2, run_id="url") == [BIG_LEN] * 2 + [4]
        assert all(
            is_reference(r.output)
            for r in await _raw_steps(engine, "url")
            if r.seq in (1, 2)
        )
    async with Engine(url) as engine:
        assert (await engine.history("url"))[1].output().startswith(f"{MARKER}1:")
    # the same rows opened without the object store say what is missing
    async with Engine(primary_url) as engine:
        with pytest.raises(CorruptCheckpointError, match=r"\?blobs="):
            (await engine.history("url"))[0].output()


async def test_encrypted_objects_hold_no_plaintext_and_stay_bound_to_their_row(
    primary_url: str, moto_s3: MotoS3, bucket: str
) -> None:
    blobs = moto_s3.blobs(bucket)
    async with Engine(
        primary_url, blobs=blobs, offload_over=OVER, encryption_key=KEY
    ) as engine:
        await engine.start(waits, 2, run_id="enc")
        for _ in range(200):
            if (run := await engine.store.get_run("enc")) and run.status == "waiting":
                break
            await asyncio.sleep(0.02)
        objects = await blobs.listing()
        assert len(objects) >= 2
        for blob in objects:
            frame = await blobs.get(blob.key)
            assert MARKER.encode() not in frame
            assert frame[1] & 0x02  # the encrypted flag of the sealed frame
        # point step 2's row at step 1's object: same key, other row
        inner = _offload(engine).inner
        rows = {r.seq: r for r in await inner.load_journal("enc")}
        first, second = rows[1].output or b"", rows[2].output or b""
        swapped = await inner.replace_payload(
            Payload(kind="step.output", key=("enc", 2, "offload.big"), data=second),
            data=first,
        )
        assert swapped
        await engine.send("enc", "go", True)
        with pytest.raises(CorruptCheckpointError) as caught:
            await engine.resume("enc")
    assert "step #2" in str(caught.value)
    assert "decryption failed" in str(caught.value)


async def test_a_deleted_object_is_a_corrupt_checkpoint_naming_run_step_and_key(
    primary_url: str, moto_s3: MotoS3, bucket: str
) -> None:
    blobs = moto_s3.blobs(bucket)
    async with Engine(primary_url, blobs=blobs, offload_over=OVER) as engine:
        await engine.start(waits, 2, run_id="gone")
        await _until_waiting(engine, "gone")
        row = next(r for r in await _raw_steps(engine, "gone") if r.seq == 2)
        key = BlobRef.decode(row.output or b"", place="").key
        await blobs.delete(key)
        await engine.send("gone", "go", True)
        with pytest.raises(CorruptCheckpointError) as caught:
            await engine.resume("gone")
    message = str(caught.value)
    assert "run 'gone', step #2" in message
    assert key in message
    assert "missing" in message
    assert RAN["big 1"] == 1  # never ran again: the missing object is not a reason to


async def test_a_bit_flipped_object_fails_its_hash_check(
    primary_url: str, moto_s3: MotoS3, bucket: str
) -> None:
    blobs = moto_s3.blobs(bucket)
    async with Engine(primary_url, blobs=blobs, offload_over=OVER) as engine:
        await engine.start(waits, 2, run_id="flip")
        await _until_waiting(engine, "flip")
        row = next(r for r in await _raw_steps(engine, "flip") if r.seq == 1)
        key = BlobRef.decode(row.output or b"", place="").key
        frame = bytearray(await blobs.get(key))
        frame[len(frame) // 2] ^= 0x01
        await blobs.put(key, bytes(frame))
        await engine.send("flip", "go", True)
        with pytest.raises(CorruptCheckpointError) as caught:
            await engine.resume("flip")
    assert "run 'flip', step #1" in str(caught.value)
    assert key in str(caught.value)
    assert "hash check" in str(caught.value)


async def _until_waiting(engine: Engine, run_id: str) -> None:
    for _ in range(500):
        run = await engine.store.get_run(run_id)
        if run is not None and run.status == "waiting":
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{run_id} never reached wait_for")


STOP_AT: dict[str, MotoS3] = {}


@step(name="offload.stops_s3")
async def stops_s3(i: int) -> str:
    RAN[f"stops {i}"] += 1
    server = STOP_AT.pop("server", None)
    if server is not None:
        await asyncio.to_thread(server.stop)
    return _big(i)


@workflow(name="offload.outage")
async def outage() -> list[str]:
    first = await big(0)
    second = await stops_s3(1)
    return [first[:20], second[:20]]


async def test_an_endpoint_down_mid_run_stops_it_cleanly_and_it_resumes_when_back(
    primary_url: str, bucket: str
) -> None:
    server = MotoS3()  # its own port: stopping it leaves the shared one alone
    server.start()
    try:
        name = server.create_bucket()
        STOP_AT["server"] = server
        async with Engine(
            primary_url,
            blobs=server.blobs(name, timeout_s=2.0, retries=0),
            offload_over=OVER,
            store_retry_s=1.0,
        ) as engine:
            with pytest.raises(CheckpointWriteError) as caught:
                await engine.run(outage, run_id="down")
            assert "step #2" in str(caught.value)
            assert "object store" in str(caught.value)
            seqs = [r.seq for r in await _raw_steps(engine, "down") if r.seq > 0]
            assert seqs == [1]  # step 1 kept, step 2 never recorded
        server.start()
        async with Engine(
            primary_url, blobs=server.blobs(name), offload_over=OVER
        ) as engine:
            result = await engine.run(outage, run_id="down")
        assert result[0].startswith(f"{MARKER}0:")
        assert result[1].startswith(f"{MARKER}1:")
        assert Counter({"big 0": 1, "stops 1": 2}) == RAN
    finally:
        STOP_AT.clear()
        server.stop()


async def test_gc_deletes_unreferenced_objects_after_the_grace_period_only(
    primary_url: str, moto_s3: MotoS3, bucket: str
) -> None:
    blobs = moto_s3.blobs(bucket)
    async with Engine(primary_url, blobs=blobs, offload_over=OVER) as engine:
        await engine.run(flow, 2, run_id="keep")
        await engine.run(flow, 2, run_id="drop")
        kept = {
            BlobRef.decode(r.output or b"", place="").key
            for r in await _raw_steps(engine, "keep")
            if is_reference(r.output)
        }
        orphan = BlobRef.of(b"\x01\x00" + os.urandom(5000))
        await blobs.put(orphan.key, b"\x01\x00" + os.urandom(5000))
        assert len(await blobs.listing()) == 5

        assert isinstance(engine.store, Store)
        assert (await engine.store.delete_runs(["drop"])).runs == 1
        young = await engine.gc()
        assert young.blobs == 0  # unreferenced now, but younger than the grace
        assert len(await blobs.listing()) == 5

        report = await engine.gc(blobs_grace=timedelta(0))
        assert report.blobs == 3  # drop's two results and the orphan
        assert {b.key for b in await blobs.listing()} == kept
        assert await engine.run(flow, 2, run_id="keep") == [BIG_LEN] * 2 + [4]


async def test_file_blobs_offload_the_same_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blobs = FileBlobs(tmp_path / "objects")
    url = f"sqlite:///{tmp_path / 'state.db'}"
    async with Engine(url, blobs=blobs, offload_over=OVER) as engine:
        assert await engine.run(flow, 2, run_id="f") == [BIG_LEN] * 2 + [4]
    files = sorted(p for p in (tmp_path / "objects").rglob("*") if p.is_file())
    assert len(files) == 2
    assert all(p.parent.parent.name == "sha256" for p in files)
    with_blobs = f"{url}?blobs={(tmp_path / 'objects').as_uri()}&blobs_over={OVER}"
    async with Engine(with_blobs) as engine:
        assert (await engine.history("f"))[0].output().startswith(f"{MARKER}0:")
    orphan = BlobRef.of(b"\x01\x00orphan")
    await blobs.put(orphan.key, b"\x01\x00orphan")
    argv = ["gc", "--blobs-grace", "0s", "--store", with_blobs]
    assert await asyncio.to_thread(main, argv) == 0
    assert "1 offloaded object " in capsys.readouterr().out
    assert len([p for p in (tmp_path / "objects").rglob("*") if p.is_file()]) == 2


async def test_saved_states_offload_their_large_chunks_and_read_back(
    primary_url: str, moto_s3: MotoS3, bucket: str
) -> None:
    blobs = moto_s3.blobs(bucket)
    state = {"document": _big(0), "turns": [f"turn {i}" for i in range(5)], "n": 0}
    async with Engine(primary_url, blobs=blobs, offload_over=OVER) as engine:
        for n in range(3):
            state["n"] = n
            await engine.save_state("thread-big", state)
        objects = await blobs.listing()
        assert objects  # the document's chunk went to the object store
        assert all(b.size < 30_000 for b in objects)
    async with Engine(
        primary_url, blobs=moto_s3.blobs(bucket), offload_over=OVER
    ) as engine:
        assert await engine.load_state("thread-big") == state
        assert len(await engine.state_history("thread-big")) == 3
        for blob in objects:
            await blobs.delete(blob.key)
    async with Engine(
        primary_url, blobs=moto_s3.blobs(bucket), offload_over=OVER
    ) as engine:
        with pytest.raises(CorruptCheckpointError, match="missing"):
            await engine.load_state("thread-big")


KEY2 = "k2:" + "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI="


async def test_rekey_reseals_offloaded_payloads_and_leaves_the_old_objects_to_gc(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    blobs = FileBlobs(tmp_path / "objects")
    async with Engine(
        url, blobs=blobs, offload_over=OVER, encryption_key=KEY
    ) as engine:
        await engine.run(flow, 2, run_id="rk")
        old = {b.key for b in await blobs.listing()}
    rotated = f"{KEY2},{KEY}"
    async with Engine(
        url, blobs=blobs, offload_over=OVER, encryption_key=rotated
    ) as engine:
        report = await engine.rekey()
        assert report.rewritten.get("step.output", 0) >= 2
        rows = [r for r in await _raw_steps(engine, "rk") if r.seq in (1, 2)]
        assert all(is_reference(r.output) for r in rows)
        new = {BlobRef.decode(r.output or b"", place="").key for r in rows}
        assert not new & old
        for key in new:
            assert (await blobs.get(key))[3:5] == b"k2"  # sealed under the new key
        assert (await engine.gc(blobs_grace=timedelta(0))).blobs == len(old)
    async with Engine(
        url, blobs=blobs, offload_over=OVER, encryption_key=KEY2
    ) as engine:
        assert (await engine.history("rk"))[1].output().startswith(f"{MARKER}1:")


async def test_blob_options_are_checked_where_they_are_given(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="blobs_over"):
        create_store(f"sqlite:///{tmp_path}/a.db?blobs=file:///tmp/x&blobs_over=big")
    with pytest.raises(StoreError, match="smaller than a reference"):
        create_store(f"sqlite:///{tmp_path}/a.db?blobs=file:///tmp/x&blobs_over=10")
    with pytest.raises(StoreError, match="unknown object store scheme"):
        create_store(f"sqlite:///{tmp_path}/a.db?blobs=ftp://host/x")
    with pytest.raises(ValueError, match="not an object key"):
        await FileBlobs(tmp_path).get("../../etc/passwd")


@pytest.mark.redis
async def test_redis_keeps_references_instead_of_megabytes(
    moto_s3: MotoS3, bucket: str, tmp_path: Path
) -> None:
    url = store_url("redis", tmp_path)
    try:
        async with Engine(
            url, blobs=moto_s3.blobs(bucket), offload_over=OVER
        ) as engine:
            assert await engine.run(flow, 2, run_id="rd") == [BIG_LEN] * 2 + [4]
            rows = [r for r in await _raw_steps(engine, "rd") if r.seq in (1, 2)]
            assert all(is_reference(r.output) for r in rows)
        async with Engine(
            url, blobs=moto_s3.blobs(bucket), offload_over=OVER
        ) as engine:
            assert (await engine.history("rd"))[0].output().startswith(f"{MARKER}0:")
    finally:
        store = create_store(url)
        await store.drop()  # type: ignore[attr-defined]  # RedisStore.drop, for tests
        await store.close()


@workflow(name="offload.echo")
async def echo(document: str) -> str:
    return document[::-1]


async def test_large_run_inputs_and_outputs_are_offloaded_and_listed_resolved(
    tmp_path: Path,
) -> None:
    blobs = FileBlobs(tmp_path / "objects")
    url = f"sqlite:///{tmp_path / 'state.db'}"
    documents = [_big(i) for i in range(20)]
    async with Engine(url, blobs=blobs, offload_over=OVER) as engine:
        for i, document in enumerate(documents):
            assert await engine.run(echo, document, run_id=f"in-{i}") == document[::-1]
        store = _offload(engine)
        raw = await store.inner.list_runs(RunQuery(limit=100))
        assert all(is_reference(r.input) and is_reference(r.output) for r in raw)
        listed = await store.list_runs(RunQuery(limit=100))
        assert len(listed) == 20
        assert all(not is_reference(r.input) for r in listed)
        report = await engine.check(status="succeeded")  # decodes each run's input
        assert len(report.runs) == 20
        assert report.ok
        assert len(await blobs.listing()) == 40
