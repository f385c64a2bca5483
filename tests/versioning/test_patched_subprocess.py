"""`patched()` across processes: v1 runs keep the old branch, new runs and early
forks take the new one, and a v2 run killed after its marker resumes on the new
branch. Every run executes in a real subprocess on a SQLite file."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from versioning._support import (
    FLOWS,
    HERE,
    copy_store,
    env,
    resume,
)

LONG = "Summarize the text in detail."
SHORT = "Summarize in one line."


def journal(db: Path, run_id: str) -> list[tuple[int, str]]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return list(
            conn.execute(
                "SELECT seq, name FROM resumable_steps "
                "WHERE run_id = ? AND seq > 0 ORDER BY seq",
                (run_id,),
            )
        )


def summaries(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.startswith("summ")]


def run_new(db: Path, log: Path, run_id: str, mode: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(FLOWS), "run", str(db), run_id, f"doc-{run_id}", mode],
        env=env("patched", log),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    result: str = json.loads(proc.stdout)["result"]
    return result


def test_a_v1_run_killed_past_the_patch_point_completes_on_the_old_branch(
    seeded: tuple[Path, Path], tmp_path: Path
) -> None:
    db, _ = copy_store(seeded, tmp_path)
    log = tmp_path / "v2.log"
    assert resume(db, log, "patched", ["hang"]) == {
        "hang": f"ok: published: {LONG} -> TEXT OF DOC-HANG"
    }
    assert summaries(log) == []  # step 3 replayed: nothing re-summarized
    assert "score x" in log.read_text().splitlines()  # the step in flight ran again
    assert [name for _, name in journal(db, "hang")] == [
        "fetch",
        "clean",
        "summarize",
        "score",
        "score",
        "publish",
    ]


def test_a_new_run_takes_the_new_branch_and_records_its_marker(
    seeded: tuple[Path, Path], tmp_path: Path
) -> None:
    db, _ = copy_store(seeded, tmp_path)
    log = tmp_path / "v2.log"
    assert run_new(db, log, "fresh", "plain").startswith(f"published: {SHORT}")
    assert journal(db, "fresh")[:4] == [
        (1, "fetch"),
        (2, "clean"),
        (3, "patch:short-prompt"),
        (4, "summarize"),
    ]
    assert summaries(log) == [f"summarize {SHORT}"]


def test_a_fork_before_the_patch_point_takes_the_new_branch_after_it_the_old(
    seeded: tuple[Path, Path], tmp_path: Path
) -> None:
    db, _ = copy_store(seeded, tmp_path)
    log = tmp_path / "v2.log"
    for at_step, new_id in ((2, "early-fork"), (3, "late-fork")):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "resumable.cli",
                "fork",
                "done",
                "--at-step",
                str(at_step),
                "--new-id",
                new_id,
                "--store",
                f"sqlite:///{db}",
            ],
            cwd=HERE,
            env=env("patched", log),
            check=True,
            capture_output=True,
            timeout=60,
        )
    outcomes = resume(db, log, "patched", ["early-fork", "late-fork"])
    assert outcomes == {
        "early-fork": f"ok: published: {SHORT} -> TEXT OF DOC-DONE",
        "late-fork": f"ok: published: {LONG} -> TEXT OF DOC-DONE",
    }
    assert summaries(log) == [f"summarize {SHORT}"]  # only the early fork's


def test_a_v2_run_killed_after_its_marker_resumes_on_the_new_branch(
    seeded: tuple[Path, Path], tmp_path: Path
) -> None:
    db, _ = copy_store(seeded, tmp_path)
    log = tmp_path / "v2.log"
    child = subprocess.Popen(
        [sys.executable, str(FLOWS), "run", str(db), "p2", "doc-p2", "hang"],
        env=env("patched", log, FLOWS_HANG="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while (6, "score") not in journal(db, "p2"):  # score("y") committed; "x" hangs
        assert child.poll() is None, child.communicate()[1].decode()
        assert time.monotonic() < deadline, "the v2 run never got to its gather"
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.communicate()

    assert resume(db, log, "patched", ["p2"]) == {
        "p2": f"ok: published: {SHORT} -> TEXT OF DOC-P2"
    }
    assert summaries(log) == [f"summarize {SHORT}"]  # once, before the kill
    assert journal(db, "p2")[2:4] == [(3, "patch:short-prompt"), (4, "summarize")]
