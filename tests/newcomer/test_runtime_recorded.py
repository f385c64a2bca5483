"""`resumable.now()`, `uuid4()`, `random()`: a run killed with SIGKILL resumes with the
values its first execution drew, in `async def` and plain `def` workflows alike."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

APP = Path(__file__).with_name("runtime_app.py")


def lines(log: Path, prefix: str) -> list[str]:
    text = log.read_text() if log.exists() else ""
    return [x.removeprefix(prefix) for x in text.splitlines() if x.startswith(prefix)]


@pytest.mark.parametrize("mode", ["drawn", "drawn-def"])
def test_a_run_killed_after_drawing_values_resumes_with_the_same_values(
    mode: str, tmp_path: Path
) -> None:
    url, log = f"sqlite:///{tmp_path / 'state.db'}", tmp_path / "steps.log"
    command = [sys.executable, str(APP), url, str(log), mode]
    env = {**os.environ, "RUNTIME_LOG": str(log)}
    proc = subprocess.Popen(
        command,
        env={**env, "HANG": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while not lines(log, "hanging"):  # the values are recorded before a step starts
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            _, err = proc.communicate()
            raise AssertionError(f"the step never started: {err.decode()}")
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)

    resumed = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert resumed.returncode == 0, resumed.stderr
    first, second = lines(log, "drawn ")  # the body ran twice, drew once
    assert first == second
    assert lines(log, "done ") == [first]
    assert len(set(first.split())) == 3  # a time, a UUID and a float, all there
