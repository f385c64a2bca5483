"""A rolling deploy on PostgreSQL and on Redis: workers of code versions 1 and 2 drain one queue.

A version-1 worker leaves version-1 runs waiting mid-way, then is replaced by a
version-2 worker, and version-2 runs are enqueued. `resumable check` confirms
that version-2 code would break the waiting version-1 runs. Every run is woken:
the version-2 worker (`--version 2`) finishes the new runs and leaves the old
ones queued; a version-1 worker joins, and together they drain the mixed queue
with no run failing, each run executed only by the code it started on.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import store_url
from resumable import Engine, RunView, wait_for, workflow

HERE = Path(__file__).parent
N = 4


@workflow(name="fleet.job", version="1")
async def job_v1(n: int) -> str:  # what version-1 code enqueues (never run here)
    return str(await wait_for("go"))


@workflow(name="fleet.job", version="2")
async def job_v2(n: int) -> str:  # what version-2 code enqueues (never run here)
    return str(await wait_for("go"))


@pytest.fixture(
    params=[
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ]
)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh PostgreSQL schema or Redis prefix, dropped afterwards."""
    url = store_url(str(request.param), tmp_path)
    yield url

    async def drop() -> None:
        engine = Engine(url)
        await engine.store.drop()  # type: ignore[attr-defined]  # the server stores' test helper
        await engine.close()

    asyncio.run(drop())


def worker(url: str, version: str, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, FLEET_VERSION=version, FLEET_LOG=str(log))
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "resumable.cli",
            "worker",
            "--app",
            "fleet",
            "--version",
            version,
            "--store",
            url,
            "--concurrency",
            "4",
        ],
        cwd=HERE,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err.decode()


def check_v1_runs_on_v2_code(url: str, log: Path) -> dict[str, str]:
    """`resumable check --version 1` against version-2 code: verdict per run."""
    check = subprocess.run(
        [
            sys.executable,
            "-m",
            "resumable.cli",
            "check",
            "--app",
            "fleet",
            "--store",
            url,
            "--version",
            "1",
            "--json",
        ],
        cwd=HERE,
        env=dict(os.environ, FLEET_VERSION="2", FLEET_LOG=str(log)),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert check.returncode == 1, check.stderr.decode()
    return {r["run_id"]: r["verdict"] for r in json.loads(check.stdout)["runs"]}


async def send_go(url: str, run_ids: list[str]) -> None:
    async with Engine(url) as engine:
        for run_id in run_ids:
            await engine.send(run_id, "go", "go")


async def until(url: str, run_ids: list[str], status: str, timeout_s: float) -> None:
    runs: list[RunView] = []
    async with Engine(url) as engine:
        for _ in range(int(timeout_s * 20)):
            runs = [await engine.get(run_id) for run_id in run_ids]
            if all(run.status == status for run in runs):
                return
            if any(run.status == "failed" for run in runs):
                raise AssertionError({run.run_id: run.status for run in runs})
            await asyncio.sleep(0.05)
    raise AssertionError(f"runs never all {status}: {[r.status for r in runs]}")


def test_workers_of_two_versions_drain_a_mixed_queue_without_a_failure(
    url: str, tmp_path: Path
) -> None:
    log = tmp_path / "fleet.log"
    old_ids = [f"old-{n}" for n in range(N)]
    new_ids = [f"new-{n}" for n in range(N)]

    async def enqueue(wf: object, ids: list[str]) -> None:
        async with Engine(url) as engine:
            for n, run_id in enumerate(ids):
                await engine.enqueue(wf, n, run_id=run_id)  # type: ignore[arg-type]  # a decorated workflow

    asyncio.run(enqueue(job_v1, old_ids))
    workers = [worker(url, "1", log)]
    try:
        asyncio.run(until(url, old_ids, "waiting", 60))  # in flight on v1
        stop(workers.pop())  # the deploy replaces the version-1 worker...
        workers.append(worker(url, "2", log))  # ...with a version-2 one
        asyncio.run(enqueue(job_v2, new_ids))
        assert check_v1_runs_on_v2_code(url, log) == dict.fromkeys(old_ids, "diverges")

        asyncio.run(send_go(url, old_ids + new_ids))
        asyncio.run(until(url, new_ids, "succeeded", 90))
        # the woken version-1 runs wait for a worker that can run them
        asyncio.run(until(url, old_ids, "queued", 1))
        workers.append(worker(url, "1", log))  # one still on version 1
        asyncio.run(until(url, old_ids + new_ids, "succeeded", 90))
    finally:
        for proc in workers:
            stop(proc)

    lines = sorted(log.read_text().splitlines())
    # each old run ran only on version-1 code, each new one only on version 2
    assert lines == sorted(
        [f"v1 prepare {n}" for n in range(N)]
        + [f"v1 finish {n}" for n in range(N)]
        + [f"v2 prepare {n}" for n in range(N)]
        + [f"v2 enrich {n}" for n in range(N)]
        + [f"v2 finish {n + 1000}" for n in range(N)]
    )

    async def results() -> dict[str, str]:
        async with Engine(url) as engine:
            return {
                run_id: str(
                    await engine.run(
                        job_v1 if run_id.startswith("old") else job_v2,
                        int(run_id[-1]),
                        run_id=run_id,
                    )
                )
                for run_id in old_ids + new_ids
            }

    assert asyncio.run(results()) == {
        **{f"old-{n}": f"go {n}" for n in range(N)},
        **{f"new-{n}": f"go {n + 1000}" for n in range(N)},
    }
