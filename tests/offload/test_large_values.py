"""A 100 MB step result, offloaded, round-trips within per-type bounds of extra copies.

Peak memory is what `tracemalloc` traces (Python objects) beyond the value itself,
during the write (`engine.run`: encode, seal, upload, commit) and during the read
(`history()[0].output()`: download, check, open, decode), to a folder and to S3,
with encryption off and on. The frame is never whole on either side: a write
holds the slices in flight, a read one buffer of the body (a str is made from
its whole UTF-8, `bytes` from its base64), beside the value; the write bound adds what is in flight, a constant.
The bounds refuse
the whole-frame path this replaced (traced, 100 MB, to a folder: text 0.68 to
1.01 copies written and 1.50 read, `bytes` 1.22 to 2.01 written and 2.33 read,
a dict 2.00 written and 2.50 read). A dict's long text is written from the
value a slice at a time (`serde.json_stream`), or, when json must escape it,
escaped once and held (1 copy); the streamed path before made the whole JSON
text (2.00 copies written). A read frees the body's buffer before parsing its
text (`Opened.take_text`); the streamed read before did not (2.00 copies).
json parses an escaped string into a buffer that grows by a quarter (1.25).
The S3 server runs in a subprocess so that its own buffers are
not traced here.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import tracemalloc
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from resumable import Engine, step, workflow
from resumable.stores.blobs import PART_BYTES, BlobStore, S3Blobs
from resumable.stores.segments import SEGMENT_PREFIX

SIZE = 100_000_000
KEY = "k1:" + base64.b64encode(os.urandom(32)).decode()
IN_FLIGHT = 7 * PART_BYTES
"""What a streamed write holds whatever the value's size: the slice being sealed
and the segments on their way to S3, each PART_BYTES (`segments.put_segmented`:
4 being sent, 1 hashed while it waits for room, 1 being cut)."""
WRITE_COPIES = {"str": 0.05, "bytes": 0.05, "dict": 0.05, "dict-escaped": 1.2}
READ_COPIES = {"str": 1.2, "bytes": 1.5, "dict": 1.2, "dict-escaped": 1.4}
VALUE: list[Any] = []


@step(name="large.produce")
async def produce() -> Any:
    return VALUE[0]


@workflow(name="large.one")
async def one_large() -> int:
    return 1 if await produce() is not None else 0


def _value(kind: str) -> Any:
    if kind == "bytes":
        return os.urandom(SIZE)
    text = os.urandom(SIZE // 2).hex()
    if kind == "dict-escaped":  # json escapes it: its JSON is made whole, once
        return {"text": text[:-2] + '"\n', "n": 1}
    return text if kind == "str" else {"text": text, "n": 1}


@pytest.fixture(scope="module")
def moto_process() -> Iterator[str]:
    """moto's S3 server in a subprocess on 127.0.0.1: its endpoint."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            with contextlib.suppress(OSError):
                urllib.request.urlopen(endpoint + "/", timeout=1).close()  # noqa: S310 - our own loopback URL
                break
            time.sleep(0.05)
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=10)


def _s3(endpoint: str) -> BlobStore:
    bucket = f"large-{uuid.uuid4().hex[:10]}"
    request = urllib.request.Request(f"{endpoint}/{bucket}", method="PUT")  # noqa: S310 - our own loopback URL
    urllib.request.urlopen(request, timeout=10).close()  # noqa: S310 - our own loopback URL
    return S3Blobs(
        f"s3://{bucket}/p",
        config={
            "endpoint": endpoint,
            "region": "us-east-1",
            "access_key_id": "testing",
            "secret_access_key": "testing",
        },
        timeout_s=120,
    )


async def _round_trip(
    url: str, blobs: Any, kind: str, key: str | None
) -> tuple[float, float]:
    """(copies held by the write, copies held by the read), beyond the value."""
    VALUE[:] = [_value(kind)]
    options: dict[str, Any] = {
        "blobs": blobs,
        "max_payload_bytes": None,
        "encryption_key": key,
        "store_retry_s": 120,
    }
    async with Engine(url, **options) as engine:
        tracemalloc.start()
        try:
            assert await engine.run(one_large, run_id="large") == 1
            write = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        objects = await engine.store.blobs.listing()  # type: ignore[attr-defined]  # OffloadStore.blobs
        # one object, or on S3 a manifest and the segments it names
        assert len([o for o in objects if not o.key.startswith(SEGMENT_PREFIX)]) == 1
        stored = sum(o.size for o in objects)
        assert stored > SIZE // 3  # the value went there, not to the row
    async with Engine(url, **options) as engine:
        tracemalloc.start()
        try:
            value = (await engine.history("large"))[0].output()
            read = tracemalloc.get_traced_memory()[1] - SIZE
        finally:
            tracemalloc.stop()
        assert value == VALUE[0]
    VALUE.clear()
    return write / SIZE, read / SIZE


@pytest.mark.timeout(120)
@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
@pytest.mark.parametrize("kind", ["str", "bytes", "dict", "dict-escaped"])
@pytest.mark.parametrize("backend", ["file", "s3"])
async def test_a_large_result_round_trips_within_its_bound_of_copies(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    backend: str,
    kind: str,
    encrypted: bool,
) -> None:
    blobs: Any = (
        (tmp_path / "objects").as_uri()
        if backend == "file"
        else _s3(request.getfixturevalue("moto_process"))
    )
    write, read = await _round_trip(
        f"sqlite:///{tmp_path}/state.db", blobs, kind, KEY if encrypted else None
    )
    bound = WRITE_COPIES[kind] + IN_FLIGHT / SIZE
    assert write < bound, f"the write held {write:.2f} copies"
    assert read < READ_COPIES[kind], f"the read held {read:.2f} copies"


async def test_s3_objects_past_one_part_go_up_in_one_put_and_come_back_whole(
    moto_process: str,
) -> None:
    blobs = _s3(moto_process)
    data = os.urandom(PART_BYTES * 2 + 12345)  # three parts, the last one short
    small = os.urandom(1000)
    await blobs.put("sha256/aa/big", data)
    await blobs.put("sha256/aa/small", small)
    got = await blobs.get("sha256/aa/big")
    assert isinstance(got, bytearray)  # read into one buffer of its size
    assert got == data
    assert await blobs.get("sha256/aa/small") == small
    assert (await blobs.info("sha256/aa/big")).size == len(data)
    import obstore
    from obstore.store import S3Store

    client = S3Store.from_url(
        blobs.url,
        config={
            "endpoint": moto_process,
            "region": "us-east-1",
            "access_key_id": "testing",
            "secret_access_key": "testing",
        },
        client_options={"allow_http": True},
    )
    etag = (await obstore.head_async(client, "sha256/aa/big"))["e_tag"] or ""
    assert "-" not in etag.strip('"')


LIST_SIZE = 20_000_000
"""JSON bytes of a list of small dicts: enough that the pieces in flight are small beside it."""


@pytest.mark.timeout(120)
async def test_a_list_of_many_small_items_is_written_holding_its_text_once(
    tmp_path: Path,
) -> None:
    # the whole text joined from json's pieces held 2.0 copies (2.16 traced for
    # this shape at 200 MB); slices of items, never joined, hold one
    VALUE[:] = [
        [
            {"id": i, "text": os.urandom(40).hex(), "ok": True}
            for i in range(LIST_SIZE // 110)
        ]
    ]
    text_size = len(json.dumps(VALUE[0], separators=(",", ":")))
    url = f"sqlite:///{tmp_path}/state.db"
    async with Engine(url, blobs=(tmp_path / "objects").as_uri()) as engine:
        tracemalloc.start()
        try:
            assert await engine.run(one_large, run_id="list") == 1
            write = tracemalloc.get_traced_memory()[1] / text_size
        finally:
            tracemalloc.stop()
        assert (await engine.history("list"))[0].output() == VALUE[0]
    VALUE.clear()
    assert write < 1.3, f"the write held {write:.2f} copies"
