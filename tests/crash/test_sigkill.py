"""SIGKILL a real process mid-step, resume in a new one, count what ran twice."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from resumable.stores.sqlite import SQLiteStore

APP = Path(__file__).with_name("app.py")


def spawn(
    db: Path, log: Path, mode: str, *, hang_from: int | None
) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.pop("HANG_FROM", None)
    if hang_from is not None:
        env["HANG_FROM"] = str(hang_from)
    return subprocess.Popen(
        [sys.executable, str(APP), str(db), str(log), mode, "crash-run"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def wait_for_line(
    log: Path, line: str, proc: subprocess.Popen[bytes], timeout: float = 30
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and line in log.read_text().splitlines():
            return
        if proc.poll() is not None:
            _, err = proc.communicate()
            raise AssertionError(f"child exited early: {err.decode()}")
        time.sleep(0.01)
    raise AssertionError(f"{line!r} never appeared in {log}")


def wait_for_a_commit(db: Path, timeout: float = 30) -> None:
    """Kill only once a step is durable, so the test sees both sides of the line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            (count,) = conn.execute(
                "SELECT count(*) FROM resumable_steps WHERE status = 'ok'"
            ).fetchone()
        if count:
            return
        time.sleep(0.005)
    raise AssertionError("no step was ever committed")


def committed_seqs(db: Path) -> set[int]:
    async def load() -> set[int]:
        store = await SQLiteStore(f"sqlite:///{db}").open()
        try:
            journal = await store.load_journal("crash-run")
            return {s.seq for s in journal if s.status == "ok" and s.seq > 0}
        finally:
            await store.close()

    return asyncio.run(load())


def starts(log: Path) -> collections.Counter[int]:
    return collections.Counter(
        int(line.split()[1])
        for line in log.read_text().splitlines()
        if line.startswith("start")
    )


@pytest.mark.parametrize(
    ("mode", "hang_from", "killed_after"),
    [
        ("sequential", 6, "start 6"),  # dies inside step #7
        ("gathered", 5, "end 0"),  # 10 steps in flight at once; dies with 5 unfinished
        ("sync", 3, "start 3"),  # a plain-def workflow and steps
    ],
)
def test_sigkill_mid_step_reruns_only_what_was_in_flight(
    tmp_path: Path, mode: str, hang_from: int, killed_after: str
) -> None:
    db, log = tmp_path / "state.db", tmp_path / "effects.log"
    child = spawn(db, log, mode, hang_from=hang_from)
    wait_for_line(log, killed_after, child)
    wait_for_a_commit(db)
    child.send_signal(signal.SIGKILL)
    child.communicate()  # reaps it: a dead, unreaped pid still answers kill(pid, 0)
    before = committed_seqs(db)
    started_before = starts(log)
    assert before, "the kill came before any commit: the test proves nothing"
    assert len(before) < 10

    resumed = spawn(db, log, mode, hang_from=None)
    _, err = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, err.decode()
    assert "done 10" in log.read_text().splitlines()

    counts = starts(log)
    for i in range(10):
        seq = i + 1
        if seq in before:
            assert counts[i] == 1, f"committed step {i} ran again"
        else:
            assert counts[i] == started_before[i] + 1, f"step {i}: {counts[i]} runs"
    ran_twice = {i for i in range(10) if counts[i] == 2}
    assert ran_twice == {
        i for i in range(10) if started_before[i] and i + 1 not in before
    }
    assert committed_seqs(db) == set(range(1, 11))
