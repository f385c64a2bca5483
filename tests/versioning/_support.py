"""Helpers for the versioning tests: the flows app in subprocesses, store copies."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
FLOWS = HERE / "flows.py"


def env(variant: str, log: Path, **extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("FLOWS_")}
    out.update(FLOWS_VARIANT=variant, FLOWS_LOG=str(log), **extra)
    return out


def checkpoint(db: Path) -> None:
    """Fold the WAL of a killed writer into the file, so a copy holds everything."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def dump(db: Path) -> dict[str, list[Any]]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
            )
        ]
        return {
            t: sorted(map(repr, conn.execute(f'SELECT * FROM "{t}"')))  # noqa: S608 - names from sqlite_master
            for t in tables
        }


def seed_v1_store(root: Path) -> tuple[Path, Path]:
    """A v1 store with runs in every state; the seeding process killed itself."""
    db, log = root / "state.db", root / "effects.log"
    proc = subprocess.run(
        [sys.executable, str(FLOWS), "seed", str(db)],
        env=env("v1", log, FLOWS_HANG="1", FLOWS_FAIL="1"),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == -9, proc.stderr.decode()  # SIGKILLed mid-gather
    checkpoint(db)
    return db, log


def copy_store(seeded: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    db, log = tmp_path / "state.db", tmp_path / "effects.log"
    shutil.copy(seeded[0], db)
    shutil.copy(seeded[1], log)
    return db, log


def run_check(db: Path, log: Path, variant: str) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "resumable.cli",
            "check",
            "--app",
            "flows",
            "--store",
            f"sqlite:///{db}",
            "--json",
        ],
        cwd=HERE,
        env=env(variant, log),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr.decode()
    return proc.returncode, json.loads(proc.stdout)


def resume(db: Path, log: Path, variant: str, run_ids: list[str]) -> dict[str, str]:
    proc = subprocess.run(
        [sys.executable, str(FLOWS), "resume", str(db), *run_ids],
        env=env(variant, log),
        capture_output=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    outcomes: dict[str, str] = json.loads(proc.stdout)
    return outcomes
