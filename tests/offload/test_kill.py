"""SIGKILL between an upload and the commit of the row that references it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from offload.kill_app import LOG, flow
from offload.s3server import MotoS3
from resumable import Engine
from resumable.stores.offload import BlobRef, OffloadStore, is_reference

APP = Path(__file__).with_name("kill_app.py")


def _wait_for_lines(
    log: Path, prefix: str, count: int, proc: subprocess.Popen[bytes]
) -> list[str]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        lines = [
            line
            for line in (log.read_text().splitlines() if log.exists() else [])
            if line.startswith(prefix)
        ]
        if len(lines) >= count:
            return lines
        if proc.poll() is not None:
            err = (log.parent / "stderr").read_text()
            raise AssertionError(f"child exited early: {err}")
        time.sleep(0.01)
    raise AssertionError(f"{count} {prefix!r} lines never appeared in {log}")


async def test_a_kill_between_upload_and_commit_leaves_only_collectable_garbage(
    primary_url: str, moto_s3: MotoS3, bucket: str, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    with (tmp_path / "stderr").open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, str(APP), primary_url, moto_s3.endpoint, bucket, str(log)],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        uploads = _wait_for_lines(log, "uploaded ", 2, proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    orphan = uploads[1].removeprefix("uploaded ")

    LOG["path"] = str(log)  # the steps this process runs note there too
    blobs = moto_s3.blobs(bucket, prefix="p")
    async with Engine(primary_url, blobs=blobs, offload_over=4096) as engine:
        store = engine.store
        assert isinstance(store, OffloadStore)
        rows = [r for r in await store.inner.load_journal("killed") if r.seq > 0]
        # step 1 committed; step 2's object is stored but no row points at it
        assert [r.seq for r in rows] == [1]
        assert orphan in {b.key for b in await blobs.listing()}
        assert orphan not in await store.referenced_keys()

        result = await engine.run(flow, run_id="killed")
        assert result == ["result 0", "result 1", "result 2"]
        ran = [line for line in log.read_text().splitlines() if line.startswith("ran")]
        assert ran == ["ran 0", "ran 1", "ran 1", "ran 2"]  # only step 2 ran twice

        report = await engine.gc(blobs_grace=timedelta(0))
        assert report.blobs == 1
        remaining = {b.key for b in await blobs.listing()}
        assert orphan not in remaining
        referenced = {
            BlobRef.decode(r.output or b"", place="").key
            for r in await store.inner.load_journal("killed")
            if is_reference(r.output)
        }
        assert remaining == referenced
        assert len(referenced) == 3
        assert await engine.run(flow, run_id="killed") == result
    LOG["path"] = os.devnull
