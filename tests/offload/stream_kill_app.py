"""A run killed mid streamed upload: `python stream_kill_app.py STORE ENDPOINT BUCKET LOG WHEN`.

Its step returns a result past `STREAM_OVER`, which is sealed and uploaded a
chunk at a time to a temporary key, then moved to its content address. WHEN
says where the process stops until the test SIGKILLs it: `before-move` (the
temporary object is whole, the move never happens), `after-move` (the object
is at its key, the row that references it never commits), or `mid-upload` (a
result of several segments, see `stores.segments`, stops once two are sent). It
notes `streamed <temporary key>`, `moved <key>` and `midway` in LOG.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator

from resumable import Engine, step, workflow
from resumable.stores.blobs import BlobInfo, S3Blobs

SIZE = 3_000_000
HUGE = 24_000_000
"""Random bytes: about 24 MB sealed, three segments."""
MIDWAY = 17 * 1024 * 1024
"""Bytes of the frame made before a `mid-upload` run stops: two segments."""
WHEN = {"at": ""}
LOG = {"path": os.devnull}
"""Where `note` writes (main sets it from argv; a test importing the module, too)."""


def note(line: str) -> None:
    fd = os.open(LOG["path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


class StopsAroundTheMove:
    """An S3Blobs (streaming) that hangs before or after its first move."""

    def __init__(self, inner: S3Blobs) -> None:
        self.inner, self.url = inner, inner.url

    async def put(self, key: str, data: bytes) -> None:
        await self.inner.put(key, data)

    async def put_stream(self, key: str, chunks: AsyncIterator[bytes]) -> None:
        if WHEN["at"] == "mid-upload":
            chunks = _stops_midway(chunks)
        await self.inner.put_stream(key, chunks)
        note(f"streamed {key}")

    async def move(self, key: str, to: str) -> None:
        if WHEN["at"] == "before-move":
            await asyncio.sleep(3600)
        await self.inner.move(key, to)
        note(f"moved {to}")
        if WHEN["at"] == "after-move":
            await asyncio.sleep(3600)

    async def get_stream(self, key: str) -> AsyncIterator[bytes | memoryview]:
        return await self.inner.get_stream(key)

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


async def _stops_midway(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    made = 0
    async for chunk in chunks:
        yield chunk
        made += len(chunk)
        if made >= MIDWAY:
            note("midway")
            await asyncio.sleep(3600)


@step(name="streamkill.big")
async def big() -> str:
    note("ran")
    return os.urandom(SIZE // 2).hex()


@workflow(name="streamkill.flow")
async def flow() -> int:
    return len(await big())


@step(name="streamkill.huge")
async def huge() -> bytes:
    note("ran")
    return os.urandom(HUGE)


@workflow(name="streamkill.huge_flow")
async def huge_flow() -> int:
    return len(await huge())


async def main(store: str, endpoint: str, bucket: str) -> None:
    config = {
        "endpoint": endpoint,
        "region": "us-east-1",
        "access_key_id": "testing",
        "secret_access_key": "testing",
    }
    blobs = StopsAroundTheMove(S3Blobs(f"s3://{bucket}/p", config=config))
    async with Engine(store, blobs=blobs) as engine:
        chosen = huge_flow if WHEN["at"] == "mid-upload" else flow
        await engine.run(chosen, run_id="killed")


if __name__ == "__main__":
    LOG["path"], WHEN["at"] = sys.argv[4], sys.argv[5]
    asyncio.run(main(*sys.argv[1:4]))
