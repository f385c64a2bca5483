"""Ctrl-C: an interrupted process gives its run back, so another resumes it at once.

A real process runs a long workflow on a real store; SIGINT reaches it mid-step.
Right after it exits the run must be listed as resumable (queued, no lease holder),
and a new process with a 300 s lease must finish it without waiting: every step
ran once except the interrupted one, which ran again (never recorded as failed).
"""

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

from conftest import store_url
from resumable.stores import create_store
from resumable.stores.protocol import RunRecord, StepRecord

APP = Path(__file__).with_name("runtime_app.py")
RESUMABLE = Path(sys.executable).with_name("resumable")
RUN_ID = "runtime-run"
# each way in once, each store once: the release is one store call, the same on
# every store, and a pair of processes costs seconds
CASES = [
    ("sqlite", "async"),
    pytest.param("postgres", "worker", marks=pytest.mark.postgres),
    pytest.param("redis", "sync", marks=pytest.mark.redis),
]


def app(url: str, log: Path, mode: str) -> list[str]:
    return [sys.executable, str(APP), url, str(log), mode]


def started(log: Path) -> collections.Counter[int]:
    lines = log.read_text().splitlines() if log.exists() else []
    return collections.Counter(
        int(x.split()[1]) for x in lines if x.startswith("start")
    )


def interrupt_mid_step(
    command: list[str], log: Path
) -> subprocess.CompletedProcess[str]:
    """Run `command` until step 2 starts (and hangs), then SIGINT it; its outcome."""
    env = {**os.environ, "HANG": "1", "RUNTIME_LOG": str(log)}
    proc = subprocess.Popen(
        command, env=env, cwd=APP.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 30
    while started(log)[2] == 0:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            _, err = proc.communicate()
            raise AssertionError(f"step 2 never started: {err.decode()}")
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    return subprocess.CompletedProcess(
        command, proc.returncode, out.decode(), err.decode()
    )


def read_back(url: str) -> tuple[RunRecord | None, list[StepRecord]]:
    async def read() -> tuple[RunRecord | None, list[StepRecord]]:
        store = create_store(url)
        try:
            return await store.get_run(RUN_ID), await store.load_journal(RUN_ID)
        finally:
            await store.close()

    return asyncio.run(read())


def drop(url: str) -> None:
    async def drop() -> None:
        store = create_store(url)
        try:
            dropping = getattr(store, "drop", None)
            if dropping is not None:
                await dropping()
        finally:
            await store.close()

    asyncio.run(drop())


@pytest.mark.parametrize(("backend", "entry"), CASES)
def test_a_run_interrupted_by_ctrl_c_is_resumed_at_once_by_another_process(
    backend: str, entry: str, tmp_path: Path
) -> None:
    url, log = store_url(backend, tmp_path), tmp_path / "steps.log"
    try:
        if entry == "worker":
            subprocess.run(app(url, log, "enqueue"), check=True, timeout=60)
            command = [str(RESUMABLE), "worker", "--app", "runtime_app", "--store", url]
        else:
            command = app(url, log, entry)
        interrupted = interrupt_mid_step(command, log)
        # a program ends with KeyboardInterrupt; the worker stops as it was asked
        assert interrupted.returncode == (0 if entry == "worker" else -signal.SIGINT)

        run, journal = read_back(url)
        assert run is not None
        assert (run.status, run.lease_owner) == ("queued", None), interrupted.stderr
        assert [s.status for s in journal] == ["ok", "ok"]  # step 2 is not recorded

        resumed = subprocess.run(
            app(url, log, "async"),
            check=False,
            env={**os.environ, "RUNTIME_LOG": str(log)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert resumed.returncode == 0, resumed.stderr
        assert "done [0, 1, 2, 3, 4]" in log.read_text()
        assert started(log) == {0: 1, 1: 1, 2: 2, 3: 1, 4: 1}
    finally:
        if backend != "sqlite":
            drop(url)
