"""Large results stream to and from the object store: S3 (moto) and a folder.

A result encoded to more than `STREAM_OVER` bytes is sealed and uploaded a
chunk at a time to a temporary key, hashed as it goes, then moved to its
content address; reads stream it back through the hash check and the frame's
own check (CRC-32 or GCM tag). These tests pin what that path must keep from
the whole-frame one: content addresses, no plaintext in the bucket, the AAD
binding to the row, corrupt and missing objects named by run, step and key, and
crashes that leave only collectable garbage.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from offload.s3server import MotoS3
from offload.stream_kill_app import HUGE, LOG, huge_flow
from offload.stream_kill_app import SIZE as KILL_SIZE
from offload.stream_kill_app import flow as kill_flow
from resumable import Engine, step, wait_for, workflow
from resumable.errors import CheckpointWriteError, CorruptCheckpointError
from resumable.stores.blobs import (
    TEMP_PREFIX,
    BlobStore,
    BlobUnavailable,
    FileBlobs,
    S3Blobs,
    StreamingBlobs,
)
from resumable.stores.offload import BlobRef, OffloadStore, is_reference
from resumable.stores.protocol import Payload, StepRecord
from resumable.stores.segments import SEGMENT_PREFIX

KEY = "k1:" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE="  # 32 bytes, base64
MARKER = "PLAINTEXT-MARKER-"
SIZE = 3_000_000  # past STREAM_OVER (1 MiB) once encoded
APP = Path(__file__).with_name("stream_kill_app.py")


def _large(i: int) -> str:
    return f"{MARKER}{i}:" + os.urandom(SIZE // 2).hex()


@step(name="stream.large")
async def large(i: int) -> str:
    return _large(i)


@workflow(name="stream.waits")
async def waits() -> list[str]:
    texts = [await large(i) for i in range(2)]
    await wait_for("go")
    return [t[: len(MARKER) + 2] for t in texts]


@pytest.fixture(params=["file", "s3"])
def blobs(
    request: pytest.FixtureRequest, tmp_path: Path, moto_s3: MotoS3
) -> StreamingBlobs:
    if request.param == "file":
        return FileBlobs(tmp_path / "objects")
    return moto_s3.blobs(moto_s3.create_bucket())


async def _raw_steps(engine: Engine, run_id: str) -> dict[int, StepRecord]:
    assert isinstance(engine.store, OffloadStore)
    return {r.seq: r for r in await engine.store.inner.load_journal(run_id)}


async def _until_waiting(engine: Engine, run_id: str) -> None:
    for _ in range(500):
        run = await engine.store.get_run(run_id)
        if run is not None and run.status == "waiting":
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{run_id} never reached wait_for")


async def _frame(blobs: BlobStore, key: str) -> bytes:
    return bytes(await blobs.get(key))


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_streamed_results_land_at_their_content_address_and_read_back(
    tmp_path: Path, blobs: StreamingBlobs, encrypted: bool
) -> None:
    key = KEY if encrypted else None
    url = f"sqlite:///{tmp_path}/state.db"
    async with Engine(url, blobs=blobs, encryption_key=key) as engine:
        await engine.start(waits, run_id="s")
        await _until_waiting(engine, "s")
        rows = await _raw_steps(engine, "s")
        refs = [BlobRef.decode(rows[seq].output or b"", place="") for seq in (1, 2)]
        objects = {b.key: b.size for b in await blobs.listing()}
        assert objects == {ref.key: ref.size for ref in refs}  # no temporary left
        for ref in refs:
            frame = await _frame(blobs, ref.key)
            assert hashlib.sha256(frame).digest() == ref.sha256
            assert frame[1] == ref.codec
            assert (MARKER.encode() in frame) is False  # compressed, or encrypted
            assert bool(frame[1] & 0x02) is encrypted
        history = await engine.history("s")
        assert [s.output_bytes for s in history[:2]] == [ref.size for ref in refs]
        assert history[0].output().startswith(f"{MARKER}0:")
        assert len(history[1].output()) == len(MARKER) + 2 + SIZE
        await engine.send("s", "go", True)
        assert await engine.resume("s") == [f"{MARKER}0:", f"{MARKER}1:"]


async def test_a_streamed_object_stays_bound_to_its_row_when_encrypted(
    tmp_path: Path, blobs: StreamingBlobs
) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    async with Engine(url, blobs=blobs, encryption_key=KEY) as engine:
        await engine.start(waits, run_id="enc")
        await _until_waiting(engine, "enc")
        assert isinstance(engine.store, OffloadStore)
        rows = await _raw_steps(engine, "enc")
        first, second = rows[1].output or b"", rows[2].output or b""
        assert await engine.store.inner.replace_payload(
            Payload(kind="step.output", key=("enc", 2, "stream.large"), data=second),
            data=first,
        )
        await engine.send("enc", "go", True)
        with pytest.raises(CorruptCheckpointError) as caught:
            await engine.resume("enc")
    message = str(caught.value)
    assert "run 'enc', step #2" in message
    assert "decryption failed" in message
    assert BlobRef.decode(first, place="").key in message


@pytest.mark.parametrize("damage", ["deleted", "bit-flipped", "truncated"])
async def test_a_damaged_streamed_object_is_corrupt_naming_run_step_and_key(
    tmp_path: Path, blobs: StreamingBlobs, damage: str
) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    async with Engine(url, blobs=blobs) as engine:
        await engine.start(waits, run_id="bad")
        await _until_waiting(engine, "bad")
        ref = BlobRef.decode(
            (await _raw_steps(engine, "bad"))[2].output or b"", place=""
        )
        frame = bytearray(await _frame(blobs, ref.key))
        if damage == "deleted":
            await blobs.delete(ref.key)
        elif damage == "bit-flipped":
            frame[len(frame) // 2] ^= 0x01
            await blobs.put(ref.key, bytes(frame))
        else:
            await blobs.put(ref.key, bytes(frame[:-100]))
        with pytest.raises(CorruptCheckpointError) as caught:
            await engine.history("bad")
    message = str(caught.value)
    assert "run 'bad', step #2" in message
    assert ref.key in message
    assert ("missing" if damage == "deleted" else "hash check") in message


class MoveFails(FileBlobs):
    """A folder whose moves fail: the object store went away mid-upload."""

    async def move(self, key: str, to: str) -> None:
        raise BlobUnavailable("the disk is gone")


async def test_a_failed_move_commits_no_row_and_leaves_only_temporaries(
    tmp_path: Path,
) -> None:
    blobs = MoveFails(tmp_path / "objects")
    url = f"sqlite:///{tmp_path}/state.db"
    async with Engine(url, blobs=blobs, store_retry_s=0.2) as engine:
        with pytest.raises(CheckpointWriteError) as caught:
            await engine.run(waits, run_id="moved")
        assert 1 not in await _raw_steps(engine, "moved")
        # a failed move deletes its temporary; one cut short by the retry
        # window's timeout is left for gc
        left = await blobs.listing()
        assert all(b.key.startswith(TEMP_PREFIX) for b in left)
        assert (await engine.gc(blobs_grace=timedelta(0))).blobs == len(left)
        assert await blobs.listing() == []
    assert "run 'moved'" in str(caught.value)


def _wait_for_line(log: Path, prefix: str, proc: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = log.read_text() if log.exists() else ""
        for line in text.splitlines():
            if line.startswith(prefix):
                return line.removeprefix(prefix)
        if proc.poll() is not None:
            raise AssertionError(
                f"child exited early: {(log.parent / 'err').read_text()}"
            )
        time.sleep(0.02)
    raise AssertionError(f"{prefix!r} never appeared in {log}")


@pytest.fixture
def _log_here(tmp_path: Path) -> Iterator[Path]:
    LOG["path"] = str(tmp_path / "log")
    yield tmp_path / "log"
    LOG["path"] = os.devnull


@pytest.mark.parametrize("when", ["before-move", "after-move"])
@pytest.mark.usefixtures("_log_here")
async def test_a_kill_mid_streamed_upload_leaves_only_collectable_garbage(
    primary_url: str, moto_s3: MotoS3, tmp_path: Path, when: str
) -> None:
    bucket = moto_s3.create_bucket()
    log = tmp_path / "log"
    with (tmp_path / "err").open("wb") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                str(APP),
                primary_url,
                moto_s3.endpoint,
                bucket,
                str(log),
                when,
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        left = _wait_for_line(
            log, "streamed " if when == "before-move" else "moved ", proc
        )
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert left.startswith(TEMP_PREFIX) is (when == "before-move")

    blobs = moto_s3.blobs(bucket, prefix="p")
    async with Engine(primary_url, blobs=blobs) as engine:
        assert 1 not in await _raw_steps(engine, "killed")  # no row points at it
        assert {b.key for b in await blobs.listing()} == {left}
        assert (await engine.gc()).blobs == 0  # younger than the grace period
        assert (await engine.gc(blobs_grace=timedelta(0))).blobs == 1
        assert await blobs.listing() == []

        assert await engine.run(kill_flow, run_id="killed") == KILL_SIZE
        row = (await _raw_steps(engine, "killed"))[1]
        assert is_reference(row.output)
        key = BlobRef.decode(row.output or b"", place="").key
        assert {b.key for b in await blobs.listing()} == {key}
        assert (await engine.gc(blobs_grace=timedelta(0))).blobs == 0


def _kill_child(args: list[str], log: Path, line: str) -> str:
    """Run stream_kill_app with `args` until it notes `line`, then SIGKILL it."""
    with (log.parent / "err").open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, str(APP), *args],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        return _wait_for_line(log, line, proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)


@pytest.mark.usefixtures("_log_here")
async def test_a_kill_mid_upload_of_many_segments_leaves_nothing_after_gc(
    primary_url: str, moto_s3: MotoS3, tmp_path: Path
) -> None:
    bucket = moto_s3.create_bucket()
    blobs = moto_s3.blobs(bucket, prefix="p")
    log = tmp_path / "log"
    args = [primary_url, moto_s3.endpoint, bucket, str(log), "mid-upload"]
    _kill_child(args, log, "midway")
    # what the upload left: whole segments, never an upload S3 keeps hidden
    assert moto_s3.multipart_uploads(bucket) == []
    left = {b.key for b in await blobs.listing()}
    assert left, "the child was killed before any segment was sent"
    assert all(key.startswith(SEGMENT_PREFIX) for key in left)

    async with Engine(primary_url, blobs=blobs) as engine:
        assert 1 not in await _raw_steps(engine, "killed")
        assert (await engine.gc()).blobs == 0  # younger than the grace period
        # listed again: a segment whose request was in flight at the kill may have
        # landed in the object store since
        left = {b.key for b in await blobs.listing()}
        assert all(key.startswith(SEGMENT_PREFIX) for key in left)
        assert (await engine.gc(blobs_grace=timedelta(0))).blobs == len(left)
        assert await blobs.listing() == []

        assert await engine.run(huge_flow, run_id="killed") == HUGE
        # the result is a manifest at its content address and the segments it
        # names, all kept by gc while the row references it
        row = (await _raw_steps(engine, "killed"))[1]
        key = BlobRef.decode(row.output or b"", place="").key
        segments = await blobs.segments(key)
        assert len(segments) == 3
        kept = {b.key for b in await blobs.listing()}
        assert kept == {key, *segments}
        assert (await engine.gc(blobs_grace=timedelta(0))).blobs == 0
        assert {b.key for b in await blobs.listing()} == kept
        assert moto_s3.multipart_uploads(bucket) == []
        await engine.gc(older_than=timedelta(0), blobs_grace=timedelta(0))
        assert await blobs.listing() == []


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def test_put_stream_and_move_keep_objects_whole(blobs: StreamingBlobs) -> None:
    parts = [os.urandom(5_000_000), os.urandom(4_000_000), b"tail"]
    await blobs.put_stream("tmp/abc", _chunks(*parts))
    await blobs.move("tmp/abc", "sha256/ab/abc")
    # on S3, past one segment: a manifest at the key, and the segments it names
    keys = {b.key for b in await blobs.listing()}
    named = (
        set(await blobs.segments("sha256/ab/abc"))
        if isinstance(blobs, S3Blobs)
        else set()
    )
    assert keys == {"sha256/ab/abc", *named}
    assert len(named) == (2 if isinstance(blobs, S3Blobs) else 0)
    got = bytearray()
    async for chunk in await blobs.get_stream("sha256/ab/abc"):
        got += chunk
    assert got == b"".join(parts)


@step(name="stream.repetitive")
async def repetitive(n: int) -> str:
    return "the same line, again and again\n" * n


@workflow(name="stream.compressible")
async def compressible(n: int) -> int:
    return len(await repetitive(n))


async def _sealed_size(engine: Engine, run_id: str) -> tuple[int, bool]:
    """(the stored frame's size, whether the row holds a reference to it)."""
    output = (await _raw_steps(engine, run_id))[1].output or b""
    if is_reference(output):
        return BlobRef.decode(output, place="").size, True
    return len(output), False


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_a_large_result_that_seals_small_stays_in_its_row_and_one_byte_more_goes_out(
    tmp_path: Path, blobs: StreamingBlobs, encrypted: bool
) -> None:
    n = 100_000  # 3.1 MB of text, streamed (past STREAM_OVER); zstd makes it tiny
    key = KEY if encrypted else None
    url = f"sqlite:///{tmp_path}/state.db"
    async with Engine(url, blobs=blobs, encryption_key=key) as engine:
        assert await engine.run(compressible, n, run_id="inline") == 31 * n
        sealed, is_offloaded = await _sealed_size(engine, "inline")
        assert not is_offloaded
        assert sealed < 20_000
        assert await blobs.listing() == []  # no object, no temporary
        assert (await engine.history("inline"))[
            0
        ].output() == "the same line, again and again\n" * n
    # the threshold is the sealed size: at it the frame stays, one byte under it goes out
    for over, offloaded in ((sealed, False), (sealed - 1, True)):
        run_id = f"over-{over}"
        async with Engine(
            url, blobs=blobs, encryption_key=key, offload_over=over
        ) as engine:
            assert await engine.run(compressible, n, run_id=run_id) == 31 * n
            size, is_offloaded = await _sealed_size(engine, run_id)
            assert (size, is_offloaded) == (sealed, offloaded)
            assert len((await engine.history(run_id))[0].output()) == 31 * n
    assert len([b for b in await blobs.listing() if b.key.startswith("sha256/")]) == 1


@workflow(name="stream.compressible_output")
async def compressible_output(n: int) -> str:
    return "the same line, again and again\n" * n


async def test_a_workflow_result_that_seals_small_stays_in_the_run_row(
    tmp_path: Path,
) -> None:
    blobs = FileBlobs(tmp_path / "objects")
    async with Engine(f"sqlite:///{tmp_path}/state.db", blobs=blobs) as engine:
        assert (
            len(await engine.run(compressible_output, 100_000, run_id="o")) == 3_100_000
        )
        assert isinstance(engine.store, OffloadStore)
        run = await engine.store.inner.get_run("o")
        assert run is not None
        assert run.output is not None
        assert not is_reference(run.output)
        assert len(run.output) < 20_000
        assert await blobs.listing() == []
