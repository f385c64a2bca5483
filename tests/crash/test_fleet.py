"""A fleet of worker processes on one store; one is SIGKILLed mid-way."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crash.fleet_app import STEPS, fleet_job
from resumable import Engine

CRASH_DIR = Path(__file__).parent
QUEUE_LIMIT = 6


def worker(url: str, log: Path, output: Path) -> subprocess.Popen[bytes]:
    with output.open("wb") as sink:  # a file, not a pipe nobody drains while we wait
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "resumable.cli",
                "worker",
                "--store",
                url,
                "--app",
                "fleet_app",
                "--concurrency",
                "4",
                "--queue",
                f"fleet={QUEUE_LIMIT}",
                "--lease-ttl",
                "1",
            ],
            env={**os.environ, "FLEET_LOG": str(log), "PYTHONPATH": str(CRASH_DIR)},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )


def fleet_url(backend: str, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'fleet.db'}?durability=normal"
    from conftest import store_url

    return store_url(backend, tmp_path)


@pytest.mark.parametrize(
    ("backend", "runs"),
    [("sqlite", 60), pytest.param("postgres", 200, marks=pytest.mark.postgres)],
)
async def test_a_fleet_finishes_every_run_after_losing_a_worker(
    backend: str, runs: int, tmp_path: Path
) -> None:
    url = fleet_url(backend, tmp_path)
    log = tmp_path / "effects.log"
    engine = Engine(url)
    for run in range(runs):
        await engine.enqueue(fleet_job, run, queue="fleet", run_id=f"fleet-{run}")
    fleet = [worker(url, log, tmp_path / f"worker-{n}.out") for n in range(3)]
    try:
        victim = await _busy_worker(fleet, log, after_steps=runs * STEPS // 3)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        (tmp_path / "kill.marker").write_text(str(len(_lines(log))))

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            done = await engine.runs(status="succeeded", limit=runs + 1)
            if len(done) == runs:
                break
            await asyncio.sleep(0.1)
    finally:
        _stop(fleet)
    for n, proc in enumerate(fleet):
        if proc is not victim:
            assert proc.returncode == 0, (tmp_path / f"worker-{n}.out").read_text()
    try:
        assert len(await engine.runs(status="succeeded", limit=runs + 1)) == runs
        for run in range(runs):
            expected = sum(run * 100 + i for i in range(STEPS))
            assert await engine.run(fleet_job, run, run_id=f"fleet-{run}") == expected
    finally:
        drop = getattr(engine.store, "drop", None)
        if drop is not None:  # a PostgreSQL schema made for this test
            await drop()
        await engine.close()

    events = [line.split() for line in _lines(log)]
    kill_at = int((tmp_path / "kill.marker").read_text())
    starts = collections.Counter((e[1], e[2]) for e in events if e[0] == "start")
    assert set(starts) == {(str(r), str(i)) for r in range(runs) for i in range(STEPS)}
    twice = {key for key, count in starts.items() if count > 1}
    victim_pid = str(victim.pid)
    frontier = _frontier(events[:kill_at], victim_pid)
    # a step the victim ended but had not committed was still in flight: only the
    # last step it started in each run can run again (commit before continue)
    assert twice <= frontier, "a step ran twice that the dead worker was not running"
    assert all(starts[key] == 2 for key in twice)
    assert len(twice) <= 4  # at most the victim's concurrency was in flight

    peak = _peak_runs_in_flight(events, kill_at, victim_pid)
    assert 1 < peak <= QUEUE_LIMIT


async def _busy_worker(
    fleet: list[subprocess.Popen[bytes]], log: Path, *, after_steps: int
) -> subprocess.Popen[bytes]:
    """Once `after_steps` steps have ended, the worker with the most steps in flight."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        events = [line.split() for line in _lines(log)]
        if sum(1 for e in events if e[0] == "end") >= after_steps:
            busy = {str(p.pid): len(_open_steps(events, str(p.pid))) for p in fleet}
            pid, open_count = max(busy.items(), key=lambda item: item[1])
            if open_count:
                return next(p for p in fleet if str(p.pid) == pid)
        await asyncio.sleep(0.002)
    raise AssertionError("the fleet never got a third of the way")


def _stop(fleet: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every worker (they drain and release their leases), then SIGKILL any
    that does not exit, so no test leaves a process behind."""
    for proc in fleet:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in fleet:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def _frontier(events: list[list[str]], pid: str) -> set[tuple[str, str]]:
    """The last step `pid` started in each run it worked on."""
    last: dict[str, int] = {}
    for kind, run, seq, who in events:
        if who == pid and kind == "start":
            last[run] = max(last.get(run, -1), int(seq))
    return {(run, str(seq)) for run, seq in last.items()}


def _open_steps(events: list[list[str]], pid: str) -> set[tuple[str, str]]:
    open_steps: set[tuple[str, str]] = set()
    for kind, run, seq, who in events:
        if who != pid:
            continue
        if kind == "start":
            open_steps.add((run, seq))
        else:
            open_steps.discard((run, seq))
    return open_steps


def _peak_runs_in_flight(events: list[list[str]], kill_at: int, victim: str) -> int:
    """Most runs with a step executing at one moment (the log's order is the truth)."""
    open_steps: dict[tuple[str, str, str], int] = {}
    peak = 0
    for index, (kind, run, seq, pid) in enumerate(events):
        if index == kill_at:  # the victim's unfinished steps stopped when it died
            open_steps = {k: v for k, v in open_steps.items() if k[2] != victim}
        key = (run, seq, pid)
        if kind == "start":
            open_steps[key] = 1
        else:
            open_steps.pop(key, None)
        peak = max(peak, len({k[0] for k in open_steps}))
    return peak
