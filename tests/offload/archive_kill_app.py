"""Archive or restore killed part way: `python archive_kill_app.py MODE STORE FOLDER LOG`.

MODE "archive": archives every finished run; its object store notes `uploaded <key>`
in LOG after each upload and hangs after the third, before the store swaps that
run's (or thread's) rows for its stub. MODE "restore": restores run "k-0"; its
object store notes `read <key>` once the archive is read and hangs, before the
rows go back. MODE "restore-thread": the same for thread "c-0". The test SIGKILLs
the process while it hangs.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta

from offload.kill_app import LOG, note
from resumable import Engine
from resumable.stores.blobs import BlobInfo, FileBlobs


class Hangs:
    """FileBlobs that stops the process's progress at the point MODE names."""

    def __init__(self, inner: FileBlobs, mode: str) -> None:
        self.inner, self.url, self.mode, self.uploads = inner, inner.url, mode, 0

    async def put(self, key: str, data: bytes) -> None:
        await self.inner.put(key, data)
        self.uploads += 1
        note(f"uploaded {key}")
        if self.mode == "archive" and self.uploads == 3:
            await asyncio.sleep(3600)

    async def get(self, key: str) -> bytes | bytearray:
        data = await self.inner.get(key)
        if self.mode.startswith("restore"):
            note(f"read {key}")
            await asyncio.sleep(3600)
        return data

    async def delete(self, key: str) -> None:
        await self.inner.delete(key)

    async def info(self, key: str) -> BlobInfo:
        return await self.inner.info(key)

    async def listing(self) -> list[BlobInfo]:
        return await self.inner.listing()

    async def close(self) -> None:
        await self.inner.close()


async def main(mode: str, store: str, folder: str) -> None:
    async with Engine(store, blobs=Hangs(FileBlobs(folder), mode)) as engine:
        if mode == "archive":
            await engine.archive(older_than=timedelta(0))
        elif mode == "restore-thread":
            await engine.unarchive_thread("c-0")
        else:
            await engine.unarchive("k-0")
    note("finished")  # never reached: the test kills the process first


if __name__ == "__main__":
    LOG["path"] = sys.argv[4]
    asyncio.run(main(*sys.argv[1:4]))
