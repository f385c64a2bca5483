"""SIGKILL a LangGraph run on ResumableSaver between steps, resume it in a new process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

APP = Path(__file__).with_name("graph_app.py")
STEPS = 400


def _logged(log: Path) -> list[int]:
    if not log.exists():
        return []
    return [int(line.split()[1]) for line in log.read_text().splitlines()]


def test_a_sync_durability_graph_killed_mid_run_resumes_with_every_returned_step(
    tmp_path: Path,
) -> None:
    """With durability="sync" a step starts only once the previous step's
    checkpoint is saved (put returned), so every step before the last one the
    graph yielded survives the kill: the resumed run goes on from the last one
    yielded or later, runs each later step once, and loses none.

    A SIGKILL leaves the page cache alone: this proves the commits, not the fsyncs
    (tests/stores/test_sqlite_syncs.py and the saver's fsync tests do that)."""
    db, log = tmp_path / "graph.db", tmp_path / "steps.log"
    child = subprocess.Popen(
        [sys.executable, str(APP), str(db), str(log), str(STEPS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while len(_logged(log)) < STEPS // 4:  # kill a quarter of the way in
        assert child.poll() is None, child.communicate()[1].decode()
        assert time.monotonic() < deadline, "the graph never got a quarter in"
        time.sleep(0.005)
    os.kill(child.pid, signal.SIGKILL)
    child.communicate()  # reaps it and closes its pipes
    before = _logged(log)
    assert before == list(range(len(before)))

    resumed = subprocess.run(
        [sys.executable, str(APP), str(db), str(log), str(STEPS), "resume"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert json.loads(resumed.stdout) == list(range(STEPS))
    after = _logged(log)[len(before) :]
    # the resumed run went on from a step at or past the last one yielded
    assert after
    assert after[0] >= before[-1]
    assert after == list(range(after[0], STEPS))
