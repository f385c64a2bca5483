"""`resumable show RUN --follow` prints each progress event as another process publishes it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from resumable import Engine, RunNotFound
from resumable.cli import main

APP = Path(__file__).with_name("feeds_app.py")


async def test_show_follow_prints_events_live_until_the_run_ends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'follow.db'}"
    async with Engine(url) as engine:
        with pytest.raises(RunNotFound):
            await engine.get("live")
        out = tmp_path / "child.out"
        with out.open("wb") as sink:
            child = subprocess.Popen(
                [sys.executable, str(APP), url, "live", "publish", "20"],
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=os.environ,
            )
        deadline = time.monotonic() + 30
        while True:
            try:
                if (await engine.get("live")).status == "running":
                    break
            except RunNotFound:
                pass
            assert child.poll() is None, out.read_text()
            assert time.monotonic() < deadline, out.read_text()
            await asyncio.sleep(0.01)
    code = await asyncio.to_thread(main, ["show", "live", "--store", url, "--follow"])
    assert code == 0
    assert child.wait(timeout=30) == 0, out.read_text()
    printed = capsys.readouterr().out
    lines = [line for line in printed.splitlines() if line.startswith("event ")]
    # every value once, in order, whichever were published before the show began
    assert [line.rsplit("= ", 1)[1] for line in lines] == [str(i) for i in range(20)]
    assert printed.rstrip().endswith("status    succeeded")
