"""Streamed S3 objects as plain segments and a manifest (stores/segments.py).

No multipart upload is ever opened, so a crash leaves only whole objects that a
listing shows and `gc` deletes (tests/offload/test_stream.py SIGKILLs one).
These pin the manifest's format, the write's shape, reads of damaged segments,
and that `gc` keeps the segments a referenced manifest names.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable
from datetime import timedelta
from pathlib import Path

import pytest

from offload.s3server import MotoS3
from resumable import Engine, step, workflow
from resumable.errors import CorruptCheckpointError
from resumable.stores import segments
from resumable.stores.blobs import BlobInfo, S3Blobs
from resumable.stores.offload import BlobRef, OffloadStore
from resumable.stores.segments import (
    SEGMENT_PREFIX,
    Manifest,
    put_segmented,
    segment_chunks,
)

SMALL_SEGMENT = 1 << 20
SIZE = 3_000_000  # random bytes: about 3 MB sealed, three segments of 1 MiB


@pytest.fixture
def _small_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segments, "SEGMENT_BYTES", SMALL_SEGMENT)


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def test_a_manifest_reads_back_and_nothing_else_parses_as_one() -> None:
    manifest = Manifest((Manifest.entry(b"a" * 10), Manifest.entry(b"b" * 3)))
    data = manifest.encode()
    assert Manifest.parse(data) == manifest
    assert manifest.size == 13
    assert all(key.startswith(SEGMENT_PREFIX) for key in manifest.keys)
    assert Manifest.parse(b"\x01\x04" + data) is None  # a frame: version byte 1
    flipped = bytearray(data)
    flipped[20] ^= 0x01
    assert Manifest.parse(flipped) is None
    assert Manifest.parse(data[:-1]) is None


@pytest.mark.usefixtures("_small_segments")
async def test_put_segmented_puts_small_objects_whole_and_large_ones_as_segments() -> (
    None
):
    stored: dict[str, bytes] = {}

    async def put(key: str, data: bytes | bytearray) -> None:
        stored[key] = bytes(data)

    await put_segmented(put, "tmp/a", _chunks(b"x" * 1000, b"y"), in_flight=2)
    assert stored == {"tmp/a": b"x" * 1000 + b"y"}

    parts = [os.urandom(700_000) for _ in range(5)]
    await put_segmented(put, "tmp/b", _chunks(*parts), in_flight=2)
    manifest = Manifest.parse(stored["tmp/b"])
    assert manifest is not None
    assert [size for size, _ in manifest.segments] == [SMALL_SEGMENT] * 3 + [
        3_500_000 - 3 * SMALL_SEGMENT
    ]
    assert b"".join(stored[key] for key in manifest.keys) == b"".join(parts)


@pytest.mark.usefixtures("_small_segments")
async def test_a_failed_segment_leaves_no_manifest() -> None:
    stored: dict[str, bytes] = {}

    async def put(key: str, data: bytes | bytearray) -> None:
        if len(stored) == 1:
            raise OSError("the endpoint went away")
        await asyncio.sleep(0)
        stored[key] = bytes(data)

    with pytest.raises(OSError, match="went away"):
        await put_segmented(
            put, "tmp/c", _chunks(*[os.urandom(SMALL_SEGMENT)] * 4), in_flight=1
        )
    assert "tmp/c" not in stored
    assert all(key.startswith(SEGMENT_PREFIX) for key in stored)


@pytest.mark.parametrize("ahead", [1, 3])
async def test_a_read_holds_no_more_than_ahead_segments_and_keeps_that_many_coming(
    ahead: int,
) -> None:
    parts = [os.urandom(1000 + i) for i in range(7)]
    manifest = Manifest(tuple(Manifest.entry(part) for part in parts))
    by_key = dict(zip(manifest.keys, parts, strict=True))
    requested: list[str] = []

    async def slow(key: str) -> bytearray:
        await asyncio.sleep(0.001)
        return bytearray(by_key[key])

    def get(key: str) -> Awaitable[bytearray]:
        requested.append(key)  # counted when asked for, before it is answered
        return slow(key)

    got: list[bytes] = []
    async for chunk in segment_chunks(get, manifest, ahead=ahead):
        held = len(requested) - len(got)  # requested, not yet let go by the caller
        assert held == min(ahead, len(parts) - len(got)), len(got)
        assert isinstance(chunk, memoryview)  # given without a copy
        got.append(bytes(chunk))
    assert got == parts
    assert requested == manifest.keys  # in order, each once


@step(name="segments.bytes")
async def blob() -> bytes:
    return os.urandom(SIZE)


@workflow(name="segments.flow")
async def flow() -> int:
    return len(await blob())


async def _segmented_run(engine: Engine, blobs: S3Blobs) -> tuple[str, list[str]]:
    assert await engine.run(flow, run_id="seg") == SIZE
    assert isinstance(engine.store, OffloadStore)
    row = (await engine.store.inner.load_journal("seg"))[0]
    key = BlobRef.decode(row.output or b"", place="").key
    named = await blobs.segments(key)
    assert len(named) == 3
    return key, named


@pytest.mark.usefixtures("_small_segments")
@pytest.mark.parametrize("damage", ["segment deleted", "segment bit-flipped"])
async def test_a_damaged_segment_is_corrupt_naming_run_step_and_key(
    tmp_path: Path, moto_s3: MotoS3, damage: str
) -> None:
    blobs = moto_s3.blobs(moto_s3.create_bucket())
    async with Engine(f"sqlite:///{tmp_path}/state.db", blobs=blobs) as engine:
        key, named = await _segmented_run(engine, blobs)
        assert len((await engine.history("seg"))[0].output()) == SIZE
        if damage == "segment deleted":
            await blobs.delete(named[1])
        else:
            data = bytearray(await blobs.get(named[1]))
            data[len(data) // 2] ^= 0x01
            await blobs.put(named[1], bytes(data))
        with pytest.raises(CorruptCheckpointError) as caught:
            await engine.history("seg")
    message = str(caught.value)
    assert "run 'seg', step #1" in message
    assert key in message
    assert ("missing" if damage == "segment deleted" else "hash check") in message


class Forwarding:
    """An S3Blobs behind a wrapper that cannot say which segments an object has."""

    def __init__(self, inner: S3Blobs) -> None:
        self.inner, self.url = inner, inner.url

    async def put(self, key: str, data: bytes) -> None:
        await self.inner.put(key, data)

    async def get(self, key: str) -> bytes | bytearray:
        return await self.inner.get(key)

    async def delete(self, key: str) -> None:
        await self.inner.delete(key)

    async def info(self, key: str) -> BlobInfo:
        return await self.inner.info(key)

    async def listing(self) -> list[BlobInfo]:
        return await self.inner.listing()

    async def close(self) -> None:
        await self.inner.close()


@pytest.mark.usefixtures("_small_segments")
async def test_gc_keeps_named_segments_and_every_one_it_cannot_account_for(
    tmp_path: Path, moto_s3: MotoS3
) -> None:
    blobs = moto_s3.blobs(moto_s3.create_bucket())
    url = f"sqlite:///{tmp_path}/state.db"
    async with Engine(url, blobs=blobs) as engine:
        key, named = await _segmented_run(engine, blobs)
        stray = "seg/00/" + "00" * 32
        await blobs.put(stray, b"left by a crash")
        assert (await engine.gc(blobs_grace=timedelta(0))).blobs == 1
        assert {b.key for b in await blobs.listing()} == {key, *named}
        await engine.gc(older_than=timedelta(0), blobs_grace=timedelta(0))
        assert await blobs.listing() == []

    await blobs.put(stray, b"left by a crash")
    async with Engine(url, blobs=Forwarding(blobs)) as engine:
        # a store that cannot read manifests deletes no segment
        assert (await engine.gc(blobs_grace=timedelta(0))).blobs == 0
    assert {b.key for b in await blobs.listing()} == {stray}
