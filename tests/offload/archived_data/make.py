"""Write the archived store that test_archived_data.py opens with today's code.

Run it with the resumable whose archives the test should carry forward, e.g. from
a checkout of a release: `PYTHONPATH=src:tests python
tests/offload/archived_data/make.py OUT_DIR`. It writes `sqlite.db` and the
folder `bucket/` of its object store (`?blobs=file://...&blobs_over=1024`), plus
`version.txt` naming the commit that wrote them:

- run `cold-1` and thread `chat`, archived by row (`engine.archive`): RCOLD1 and
  RCOLDT1 objects under `runs/` and `threads/`, one stub row each;
- run `payload-1` and thread `notes`, whose payloads were archived in place by the
  payload-level archive of resumable before #37 (RARCH1 member references in
  their rows, objects under `archive/`), which only that code can write;
- run `live-1`, waiting for its input, archived by neither.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import shutil
import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from offload.archived_data.flows import book, noise
from resumable import Engine


async def _finish(engine: Engine, run_id: str) -> None:
    handle = await engine.start(book, 3, run_id=run_id)
    while (await engine.get(run_id)).status != "waiting":
        await asyncio.sleep(0.01)
    await engine.send(run_id, "go", run_id)
    await handle.result()


def state(thread_id: str, turn: int) -> dict[str, Any]:
    """A saved state long enough for the payload-level archive to move."""
    return {"turn": turn, "text": noise(f"{thread_id} {turn}", 400)}


async def write(url: str) -> None:
    async with Engine(url) as engine:
        await _finish(engine, "cold-1")
        for turn in range(3):
            await engine.save_state("chat", state("chat", turn), label=f"chat-{turn}")
        await asyncio.sleep(0.01)
        await engine.archive(older_than=timedelta(0))
        await _finish(engine, "payload-1")
        for turn in range(3):
            await engine.save_state(
                "notes", state("notes", turn), label=f"notes-{turn}"
            )
        await engine.start(book, 1, run_id="live-1")
        while (await engine.get("live-1")).status != "waiting":
            await asyncio.sleep(0.01)
        # the payload-level archive: gone from today's code, so looked up by name
        legacy: Any = importlib.import_module("resumable.stores.archive")
        offload: Any = engine.store
        await legacy.archive_run(offload.inner, offload.blobs, "payload-1")
        await legacy.archive_thread(offload.inner, offload.blobs, "notes")


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    db, bucket = out / "sqlite.db", out / "bucket"
    db.unlink(missing_ok=True)
    shutil.rmtree(bucket, ignore_errors=True)
    asyncio.run(
        write(f"sqlite:///{db}?blobs={bucket.resolve().as_uri()}&blobs_over=1024")
    )
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode=DELETE")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    (out / "version.txt").write_text(f"{commit}\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
