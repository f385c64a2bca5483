"""A run killed between an upload and its row: `python kill_app.py STORE ENDPOINT BUCKET LOG`.

Its object store notes `uploaded <key>` in LOG after each upload, and after the
second one (step 2's result) hangs, before the row that references it commits,
until the test SIGKILLs the process.
"""

from __future__ import annotations

import asyncio
import os
import sys

from resumable import Engine, step, workflow
from resumable.stores.blobs import BlobInfo, BlobStore, S3Blobs

LOG = {"path": os.devnull}
"""Where `note` writes (main sets it from argv; a test importing the module, too)."""


def note(line: str) -> None:
    fd = os.open(LOG["path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


class HangsAfterSecondUpload:
    """An S3Blobs that stops the process's progress right after its 2nd upload."""

    def __init__(self, inner: BlobStore) -> None:
        self.inner, self.url, self.uploads = inner, inner.url, 0

    async def put(self, key: str, data: bytes) -> None:
        await self.inner.put(key, data)
        self.uploads += 1
        note(f"uploaded {key}")
        if self.uploads == 2:
            await asyncio.sleep(3600)

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


@step(name="kill.big")
async def big(i: int) -> str:
    note(f"ran {i}")
    return f"result {i}:" + os.urandom(20_000).hex()


@workflow(name="kill.flow")
async def flow() -> list[str]:
    return [(await big(i))[:8] for i in range(3)]


async def main(store: str, endpoint: str, bucket: str) -> None:
    config = {
        "endpoint": endpoint,
        "region": "us-east-1",
        "access_key_id": "testing",
        "secret_access_key": "testing",
    }
    blobs = HangsAfterSecondUpload(S3Blobs(f"s3://{bucket}/p", config=config))
    async with Engine(store, blobs=blobs, offload_over=4096) as engine:
        await engine.run(flow, run_id="killed")


if __name__ == "__main__":
    LOG["path"] = sys.argv[4]
    asyncio.run(main(*sys.argv[1:4]))
