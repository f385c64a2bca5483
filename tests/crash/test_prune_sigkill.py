"""SIGKILL the LangGraph saver's prune at each of its store writes, then prune again."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("langgraph")

APP = Path(__file__).with_name("prune_app.py")
SRC = Path(__file__).resolve().parents[2] / "src"


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(APP), *args],
        capture_output=True,
        text=True,
        check=check,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        timeout=120,
    )


def copy_db(source: Path, target: Path) -> str:
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{source}{suffix}").exists():
            shutil.copy(f"{source}{suffix}", f"{target}{suffix}")
    return f"sqlite:///{target}"


def test_a_prune_killed_at_any_write_loses_no_kept_checkpoint(tmp_path: Path) -> None:
    base = tmp_path / "base.db"
    written = run("write", f"sqlite:///{base}").stdout
    assert int(written.split()[-1]) > 40  # many checkpoints: loose and packed
    counted = run("prune", copy_db(base, tmp_path / "count.db"), "0").stdout
    writes = int(counted.split()[-1])
    assert writes >= 2  # the latest rewritten whole, then the deletions
    for k in range(1, writes + 1):
        url = copy_db(base, tmp_path / f"k{k}.db")
        killed = run("prune", url, str(k), check=False)
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        # every checkpoint still listed loads; pruning again leaves the latest, whole
        assert run("check", url).stdout.startswith("ok"), k
