"""Child runs and waiting runs across processes."""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from resumable import Engine
from resumable.cli import main

CRASH_DIR = Path(__file__).parent
APP = CRASH_DIR / "agents_app.py"


def spawn(mode: str, db: Path, log: Path, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(APP), mode, str(db)],
        env={**os.environ, "EFFECTS_LOG": str(log), **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


async def test_a_killed_agent_recovers_alone_while_its_parent_waits(
    tmp_path: Path,
) -> None:
    db, log = tmp_path / "team.db", tmp_path / "effects.log"
    first = spawn("team", db, log, HANG_AGENT="slow")
    deadline = time.monotonic() + 30
    while not {"end fast 2", "end other 2", "start slow 2"} <= set(lines(log)):
        assert time.monotonic() < deadline, lines(log)
        time.sleep(0.01)
    while finished_children(db) < 2:  # so the team replays two of them
        assert time.monotonic() < deadline
        time.sleep(0.01)
    first.send_signal(signal.SIGKILL)
    first.communicate()

    second = spawn("team", db, log)
    _, err = second.communicate(timeout=60)
    assert second.returncode == 0, err.decode()
    starts = collections.Counter(
        line for line in lines(log) if line.startswith("start")
    )
    assert starts["start slow 2"] == 2  # only the crashed agent's in-flight step re-ran
    assert all(count == 1 for line, count in starts.items() if line != "start slow 2")
    engine = Engine(f"sqlite:///{db}")
    children = await engine.runs(parent="team")
    assert sorted(c.status for c in children) == ["succeeded"] * 3
    assert (await engine.get("team")).status == "succeeded"
    await engine.close()


def finished_children(db: Path) -> int:
    """How many children the team's own journal has recorded as finished."""
    if not db.exists():
        return 0
    with contextlib.closing(sqlite3.connect(db)) as conn:
        try:
            (count,) = conn.execute(
                "SELECT count(*) FROM resumable_steps WHERE run_id = 'team' AND seq > 0"
            ).fetchone()
        except sqlite3.OperationalError:  # the schema is not there yet
            return 0
    return int(count)


def test_a_waiting_run_is_resumed_by_a_different_process(tmp_path: Path) -> None:
    db, log = tmp_path / "review.db", tmp_path / "effects.log"
    waiting = spawn("review", db, log)
    _, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, err.decode()  # it exited while the run waits
    url = f"sqlite:///{db}"
    assert main(["send", "review", "verdict", '"approved"', "--store", url]) == 0
    sys.path.insert(0, str(CRASH_DIR))
    try:
        assert main(["resume", "review", "--app", "agents_app", "--store", url]) == 0
    finally:
        sys.path.remove(str(CRASH_DIR))
        sys.modules.pop("agents_app", None)
    assert lines(log) == ["draft"]  # the step before the wait was replayed, not re-run
