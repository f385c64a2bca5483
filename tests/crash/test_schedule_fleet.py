"""Three worker processes fire a per-second schedule; one is SIGKILLed mid-tick."""

from __future__ import annotations

import asyncio
import collections
import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from resumable import Engine

CRASH_DIR = Path(__file__).parent


def worker(url: str, log: Path, output: Path) -> subprocess.Popen[bytes]:
    with output.open("wb") as sink:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "resumable.cli",
                "worker",
                "--store",
                url,
                "--app",
                "schedule_app",
                "--lease-ttl",
                "1",
            ],
            env={**os.environ, "SCHEDULE_LOG": str(log), "PYTHONPATH": str(CRASH_DIR)},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )


def _lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def fleet_url(backend: str, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'sched.db'}"
    from conftest import store_url

    return store_url(backend, tmp_path)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "backend",
    [
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ],
)
async def test_three_worker_processes_run_each_tick_once_through_a_sigkill(
    backend: str, tmp_path: Path
) -> None:
    url = fleet_url(backend, tmp_path)
    log = tmp_path / "effects.log"
    fleet = [worker(url, log, tmp_path / f"worker-{n}.out") for n in range(3)]
    engine = Engine(url)
    try:
        # wait until a step is in flight, then kill the worker running it
        deadline = time.monotonic() + 30
        victim_pid = None
        while victim_pid is None:
            assert time.monotonic() < deadline, "no tick started"
            for line in _lines(log):
                if line.startswith("start "):
                    victim_pid = int(line.split()[2])
                    break
            await asyncio.sleep(0.01)
        victim = next(p for p in fleet if p.pid == victim_pid)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        await asyncio.sleep(4)  # ticks go on with the two left
        for process in fleet:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in fleet:
            process.wait(timeout=30)
        # the survivors are gone too; one more worker finishes what was in flight
        last = worker(url, log, tmp_path / "worker-last.out")
        try:
            deadline = time.monotonic() + 30
            while True:
                runs = await engine.runs(workflow="sched.every_second", limit=1000)
                if runs and all(r.status == "succeeded" for r in runs):
                    break
                assert time.monotonic() < deadline, [(r.run_id, r.status) for r in runs]
                await asyncio.sleep(0.1)
        finally:
            last.send_signal(signal.SIGTERM)
            last.wait(timeout=30)
    finally:
        for process in fleet:
            if process.poll() is None:
                process.kill()
                process.wait()
    runs = await engine.runs(workflow="sched.every_second", limit=1000)
    ids = sorted(r.run_id for r in runs)
    assert len(ids) >= 4
    assert all(i.startswith("sched:sched.every_second:") for i in ids)
    # consecutive seconds, none missing: catch_up covers the gaps a busy machine makes
    seconds = [int(i[-3:-1]) for i in ids]
    assert all((b - a) % 60 == 1 for a, b in itertools_pairwise(seconds))
    ends = collections.Counter(
        line.split()[1] for line in _lines(log) if line.startswith("end ")
    )
    starts = collections.Counter(
        line.split()[1] for line in _lines(log) if line.startswith("start ")
    )
    # every tick's step completed exactly once; a step in flight when its worker
    # was killed (or stopped, which cancels its runs) started again, at most once.
    # The last worker may fire one more tick between the wait above and its stop:
    # that run is left queued for the next worker, its step not finished anywhere.
    succeeded = {r.run_id for r in runs if r.status == "succeeded"}
    left = [r for r in runs if r.run_id not in succeeded]
    assert len(left) <= 1, [(r.run_id, r.status) for r in left]
    assert all(r.status in ("queued", "running") for r in left), left
    assert all(r.run_id > max(succeeded) for r in left), left  # the newest tick
    assert set(ends) == succeeded
    assert set(ends.values()) == {1}
    assert max(starts.values()) <= 2
    assert starts[_killed(log)] == 2
    (schedule,) = await engine.schedules()
    assert schedule.record.last_tick_ms is not None
    await engine.close()


def itertools_pairwise(items: list[int]) -> list[tuple[int, int]]:
    return list(itertools.pairwise(items))


def _killed(log: Path) -> str:
    return next(line.split()[1] for line in _lines(log) if line.startswith("start "))
