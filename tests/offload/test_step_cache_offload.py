"""The step cache on a store that offloads large values (a real S3 API: moto's server).

A hit on an offloaded value copies it, as it copies an inline one: the value is
read through the offloading store, sealed again for the hit's row and uploaded
again, so deleting the source run and collecting its objects strands nothing.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta

import pytest

from offload.s3server import MotoS3
from resumable import Engine, step, workflow
from resumable.stores.offload import BlobRef, OffloadStore, is_reference
from resumable.stores.offload_stream import STREAM_READ_OVER
from resumable.stores.protocol import Store

KEY = "k1:" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE="  # 32 bytes, base64
OVER = 4096
RAN: Counter[str] = Counter()


def _big(i: int, size: int) -> str:
    # random hex compresses to about half: still well over OVER once sealed
    return f"doc {i}:" + os.urandom(size).hex()


# the second is read back a chunk at a time (over STREAM_READ_OVER once sealed)
VALUES = {0: _big(0, 20_000), 1: _big(1, STREAM_READ_OVER + 100_000)}


@step(name="offload.cache.big", cache=True)
async def big(i: int) -> str:
    RAN[f"big {i}"] += 1
    return VALUES[i]


@workflow(name="offload.cache.flow")
async def flow(n: int) -> list[str]:
    return [await big(i) for i in range(n)]


@pytest.fixture(autouse=True)
def _fresh_counts() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


async def _object_keys(engine: Engine, run_id: str) -> set[str]:
    assert isinstance(engine.store, OffloadStore)
    rows = await engine.store.inner.load_journal(run_id)
    assert all(is_reference(r.output) for r in rows if r.seq > 0)
    return {BlobRef.decode(r.output or b"", place="").key for r in rows if r.seq > 0}


@pytest.mark.parametrize("key", [None, KEY], ids=["plain", "encrypted"])
async def test_an_offloaded_value_is_served_and_outlives_its_source_run(
    primary_url: str, moto_s3: MotoS3, bucket: str, key: str | None
) -> None:
    expected = [VALUES[0], VALUES[1]]
    blobs = moto_s3.blobs(bucket)
    async with Engine(
        primary_url, blobs=blobs, offload_over=OVER, encryption_key=key
    ) as engine:
        assert await engine.run(flow, 2, run_id="src") == expected
        assert Counter({"big 0": 1, "big 1": 1}) == RAN
        RAN.clear()
        assert await engine.run(flow, 2, run_id="hit") == expected
        assert not RAN  # both served from src's journal
        ledger = await engine.ledger("hit")
        assert ledger.cached_steps == 2
        src_objects = await _object_keys(engine, "src")
        hit_objects = await _object_keys(engine, "hit")
        if key is not None:  # sealed again for its own row: objects of its own
            assert not src_objects & hit_objects
        assert isinstance(engine.store, Store)
        assert (await engine.store.delete_runs(["src"])).runs == 1
        report = await engine.gc(blobs_grace=timedelta(0))
        assert report.blobs >= len(src_objects - hit_objects)  # and src's output
        left = {b.key for b in await blobs.listing()}
        assert hit_objects <= left
        assert not (src_objects - hit_objects) & left

    # a new engine replays the hit's run from its own rows and objects
    async with Engine(
        primary_url, blobs=moto_s3.blobs(bucket), offload_over=OVER, encryption_key=key
    ) as engine:
        views = await engine.history("hit")
        assert [v.output() for v in views] == expected
        assert await engine.run(flow, 2, run_id="hit") == expected
        assert not RAN
        # the entries named src's rows, which are gone: a new run executes
        assert await engine.run(flow, 2, run_id="after") == expected
        assert Counter({"big 0": 1, "big 1": 1}) == RAN


async def test_an_offloaded_value_that_cannot_be_read_is_a_miss_not_an_error(
    primary_url: str, moto_s3: MotoS3, bucket: str
) -> None:
    expected = [VALUES[0], VALUES[1]]
    blobs = moto_s3.blobs(bucket)
    async with Engine(
        primary_url, blobs=blobs, offload_over=OVER, encryption_key=KEY
    ) as engine:
        await engine.run(flow, 2, run_id="src")
        RAN.clear()
        # its objects are gone: each call executes (and its entry names this run)
        for key in await _object_keys(engine, "src"):
            await blobs.delete(key)
        assert await engine.run(flow, 2, run_id="lost") == expected
        assert Counter({"big 0": 1, "big 1": 1}) == RAN
        RAN.clear()
        # another key cannot open this run's objects: each call executes
        other = "k2:" + "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI="
        async with Engine(
            primary_url, blobs=blobs, offload_over=OVER, encryption_key=other
        ) as stranger:
            assert await stranger.run(flow, 2, run_id="stranger") == expected
        assert Counter({"big 0": 1, "big 1": 1}) == RAN
