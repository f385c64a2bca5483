"""Which S3 client the offload uses: obstore, aioboto3, or boto3 in a thread.

Each client uploads, then downloads, OBJECTS objects of SIZE bytes to moto's S3
server (a subprocess on 127.0.0.1), one at a time and CONCURRENT at a time, and
the figures are the median MB/s of ROUNDS rounds. Install size is what the
client adds to a fresh virtual environment: the files of its distribution and
of every distribution it requires, as installed here. Clients not installed are
reported as such; to compare all three:

    python -m venv /tmp/s3c && /tmp/s3c/bin/pip install obstore aioboto3 boto3 'moto[server]'
    /tmp/s3c/bin/python benchmarks/s3_clients.py

moto's server is Python, so absolute figures say as much about it as about the
clients; what matters is the ratio between clients against the same server.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.metadata
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

SIZE = 5 * 1024 * 1024
OBJECTS = 8
CONCURRENT = 4
ROUNDS = 3
CREDENTIALS = {"access_key_id": "testing", "secret_access_key": "testing"}
CLIENT_PACKAGES = {
    "obstore": "obstore",
    "aioboto3": "aioboto3",
    "boto3 (thread)": "boto3",
}


def installed_size_mb(name: str) -> float:
    """MB on disk of a distribution and everything it requires (not extras)."""
    seen: set[str] = set()
    todo = [name]
    total = 0
    while todo:
        dist_name = re.split(r"[<>=!~;\[ ]", todo.pop(), maxsplit=1)[0].lower()
        if dist_name in seen:
            continue
        seen.add(dist_name)
        try:
            dist = importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for file in dist.files or ():
            with contextlib.suppress(OSError):
                total += os.path.getsize(str(file.locate()))
        todo.extend(r for r in dist.requires or () if "extra ==" not in r)
    return total / 1e6


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            with contextlib.suppress(OSError):
                urllib.request.urlopen(endpoint + "/", timeout=1).close()
                break
            time.sleep(0.05)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def create_bucket(endpoint: str) -> str:
    name = f"bench-{uuid.uuid4().hex[:10]}"
    request = urllib.request.Request(f"{endpoint}/{name}", method="PUT")
    urllib.request.urlopen(request, timeout=10).close()
    return name


Put = Callable[[str, bytes], Awaitable[None]]
Get = Callable[[str], Awaitable[bytes]]


@contextlib.asynccontextmanager
async def obstore_client(endpoint: str, bucket: str) -> Any:
    obstore = importlib.import_module("obstore")
    store = importlib.import_module("obstore.store").S3Store(
        bucket,
        endpoint=endpoint,
        region="us-east-1",
        client_options={"allow_http": True},
        **CREDENTIALS,
    )

    async def put(key: str, data: bytes) -> None:
        await obstore.put_async(store, key, data)

    async def get(key: str) -> bytes:
        return bytes(await (await obstore.get_async(store, key)).bytes_async())

    yield put, get


@contextlib.asynccontextmanager
async def aioboto3_client(endpoint: str, bucket: str) -> Any:
    session = importlib.import_module("aioboto3").Session()
    async with session.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    ) as s3:

        async def put(key: str, data: bytes) -> None:
            await s3.put_object(Bucket=bucket, Key=key, Body=data)

        async def get(key: str) -> bytes:
            response = await s3.get_object(Bucket=bucket, Key=key)
            async with response["Body"] as body:
                return bytes(await body.read())

        yield put, get


@contextlib.asynccontextmanager
async def boto3_client(endpoint: str, bucket: str) -> Any:
    s3 = importlib.import_module("boto3").client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )

    async def put(key: str, data: bytes) -> None:
        await asyncio.to_thread(s3.put_object, Bucket=bucket, Key=key, Body=data)

    async def get(key: str) -> bytes:
        response = await asyncio.to_thread(s3.get_object, Bucket=bucket, Key=key)
        return bytes(await asyncio.to_thread(response["Body"].read))

    yield put, get


CLIENTS = {
    "obstore": obstore_client,
    "aioboto3": aioboto3_client,
    "boto3 (thread)": boto3_client,
}


async def one_round(
    put: Put, get: Get, payload: bytes, concurrent: int
) -> tuple[float, float]:
    """(upload MB/s, download MB/s) for OBJECTS objects, `concurrent` at a time."""
    keys = [f"r/{uuid.uuid4().hex}" for _ in range(OBJECTS)]
    limit = asyncio.Semaphore(concurrent)

    async def bounded(job: Awaitable[Any]) -> Any:
        async with limit:
            return await job

    start = time.perf_counter()
    await asyncio.gather(*(bounded(put(k, payload)) for k in keys))
    up = time.perf_counter() - start
    start = time.perf_counter()
    got = await asyncio.gather(*(bounded(get(k)) for k in keys))
    down = time.perf_counter() - start
    assert all(g == payload for g in got)
    mb = OBJECTS * len(payload) / 1e6
    return mb / up, mb / down


async def measure(name: str, endpoint: str) -> list[str]:
    bucket = create_bucket(endpoint)
    payload = os.urandom(SIZE)
    row = [name, f"{installed_size_mb(CLIENT_PACKAGES[name]):.1f}"]
    async with CLIENTS[name](endpoint, bucket) as (put, get):
        await one_round(put, get, payload[:1024], 1)  # connect, warm up
        for concurrent in (1, CONCURRENT):
            rounds = [
                await one_round(put, get, payload, concurrent) for _ in range(ROUNDS)
            ]
            row.append(f"{statistics.median(r[0] for r in rounds):.0f}")
            row.append(f"{statistics.median(r[1] for r in rounds):.0f}")
    return row


def main() -> None:
    rows = [
        [
            "client",
            "install MB",
            "up MB/s x1",
            "down MB/s x1",
            f"up MB/s x{CONCURRENT}",
            f"down MB/s x{CONCURRENT}",
        ]
    ]
    with moto_server() as endpoint:
        for name, package in CLIENT_PACKAGES.items():
            try:
                importlib.import_module(package)
            except ImportError:
                rows.append([name, "not installed", "", "", "", ""])
                continue
            rows.append(asyncio.run(measure(name, endpoint)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print(
        f"{OBJECTS} objects of {SIZE // 2**20} MiB to moto on 127.0.0.1, "
        f"median of {ROUNDS} rounds"
    )
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    base = next((r for r in rows if r[0] == "boto3 (thread)" and r[2]), None)
    for r in rows[1:]:
        if base is not None and r is not base and r[2]:
            ratios = [float(a) / float(b) for a, b in zip(r[1:], base[1:], strict=True)]
            print(
                f"{r[0]} / boto3 (thread), same columns: "
                + ", ".join(f"{x:.2f}x" for x in ratios)
            )


if __name__ == "__main__":
    main()
