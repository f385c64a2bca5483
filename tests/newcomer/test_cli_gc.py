"""`resumable gc --keep-last N` alone keeps the newest N finished runs and deletes the rest (issue 36)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from newcomer.cli_flows import approval, quick
from newcomer.cli_user import resumable
from resumable import Engine


async def _history(url: str) -> None:
    async with Engine(url) as engine:
        for number in range(5):  # created one after the other: run-4 is the newest
            await engine.run(quick, number, run_id=f"run-{number}")
        await engine.enqueue(approval, "pending", run_id="not-finished")


async def _left(url: str) -> list[str]:
    async with Engine(url) as engine:
        return sorted(run.run_id for run in await engine.runs())


def test_keep_last_alone_deletes_every_finished_run_but_the_newest(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    asyncio.run(_history(url))
    done = resumable(tmp_path, "gc", "--keep-last", "2", "--store", url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("gc deleted 3 runs")
    assert asyncio.run(_left(url)) == ["not-finished", "run-3", "run-4"]
