"""What the CLI says on its own: warnings only where they apply, and a worker's
runs at the default level (issue 36)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from conftest import store_url
from newcomer.cli_flows import quick
from newcomer.cli_user import APP, finish, resumable, start


async def _queued(url: str, run_id: str) -> None:
    from resumable import Engine

    async with Engine(url) as engine:
        await engine.enqueue(quick, 7, run_id=run_id)


def test_a_worker_logs_each_run_it_claims_and_finishes_by_default(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    asyncio.run(_queued(url, "job-1"))
    worker = start(tmp_path, "worker", "--app", APP, "--store", url)
    lines: list[str] = []
    try:
        assert worker.stderr is not None
        deadline = time.monotonic() + 30
        while not any("run 'job-1' succeeded" in line for line in lines):
            assert time.monotonic() < deadline, lines
            line = worker.stderr.readline()
            assert line, (lines, worker.poll())
            lines.append(line)
    finally:
        worker.terminate()
        finish(worker)
    assert [line.split(": ", 1)[1].strip() for line in lines if "job-1" in line] == [
        "run 'job-1' claimed",
        "run 'job-1' succeeded",
    ]
    assert all(" INFO resumable" in line for line in lines if "job-1" in line)


@pytest.mark.redis
def test_reading_a_redis_store_that_does_not_persist_says_nothing_about_it(
    tmp_path: Path,
) -> None:
    url = store_url("redis", tmp_path)
    asyncio.run(_queued(url, "on-redis"))
    listed = resumable(tmp_path, "runs", "--store", url)
    assert listed.returncode == 0, listed.stderr
    assert "on-redis" in listed.stdout
    assert "does not persist" not in listed.stderr
    assert listed.stderr == ""
