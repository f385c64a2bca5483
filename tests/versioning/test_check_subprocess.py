"""`resumable check` on a store written by v1 code, against v2 variants, in subprocesses.

A v1 process leaves one run in every state (queued, waiting before any step,
waiting for approval, sleeping, failed, killed mid-gather; one succeeded) and
SIGKILLs itself. For each v2 variant, `resumable check --json` must name exactly
the runs that would break and the seq where; it must execute no step (the
side-effect log is unchanged) and write nothing (every table is unchanged). Then
a v2 process resumes every run: the ones check called compatible complete, and
the ones it called breaking stop with NonDeterminismError at the seq it said.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from versioning._support import copy_store, dump, resume, run_check

CHECKED = ["early", "wait", "sleep", "fail", "hang", "queued"]  # "done" succeeded

# variant -> {run that would break: the seq of its first divergence}
BREAKS: dict[str, dict[str, int]] = {
    "v1": {},
    "prompt": {"wait": 3, "sleep": 3, "fail": 3, "hang": 3},
    "insert": {"wait": 6, "sleep": 6},
    "remove": {"wait": 2, "sleep": 2, "fail": 2, "hang": 2},
    "reorder": {"wait": 4, "sleep": 4, "fail": 4, "hang": 5},
    "rename": {"wait": 3, "sleep": 3, "fail": 3, "hang": 3},
    "patched": {},
    "deprecated": {"wait": 3, "sleep": 3, "fail": 3, "hang": 3},
}


def test_the_v1_store_holds_a_run_in_every_state(seeded: tuple[Path, Path]) -> None:
    with contextlib.closing(sqlite3.connect(seeded[0])) as conn:
        status = dict(conn.execute("SELECT run_id, status FROM resumable_runs"))
        hang = {
            seq
            for (seq,) in conn.execute(
                "SELECT seq FROM resumable_steps WHERE run_id = 'hang' AND seq > 0"
            )
        }
    assert status == {
        "done": "succeeded",
        "queued": "queued",
        "early": "waiting",
        "wait": "waiting",
        "sleep": "sleeping",
        "fail": "failed",
        "hang": "running",
    }
    assert hang == {1, 2, 3, 5}  # killed mid-gather: score("x") at seq 4 never ended


@pytest.mark.parametrize("variant", list(BREAKS))
def test_check_names_exactly_the_runs_v2_breaks_and_executes_nothing(
    seeded: tuple[Path, Path], tmp_path: Path, variant: str
) -> None:
    db, log = copy_store(seeded, tmp_path)
    effects, tables = log.read_text(), dump(db)

    code, report = run_check(db, log, variant)

    assert log.read_text() == effects, "check executed a step"
    assert dump(db) == tables, "check wrote to the store"
    runs = {r["run_id"]: r for r in report["runs"]}
    assert sorted(runs) == sorted(CHECKED)
    breaking = {
        run_id: r["divergence"]["seq"] for run_id, r in runs.items() if r["breaking"]
    }
    assert breaking == BREAKS[variant]
    assert code == (1 if BREAKS[variant] else 0)
    assert report["ok"] is (not BREAKS[variant])
    assert all(r["verdict"] == "diverges" for r in runs.values() if r["breaking"])

    # the proof: v2 resumes every run; check was right about each one
    outcomes = resume(db, log, variant, CHECKED)
    for run_id, outcome in outcomes.items():
        if run_id in BREAKS[variant]:
            assert outcome.startswith("NonDeterminismError"), (run_id, outcome)
            assert f"step #{BREAKS[variant][run_id]}:" in outcome, (run_id, outcome)
        else:
            assert outcome.startswith("ok: published: "), (run_id, outcome)


def test_check_reports_the_patch_runs_still_need(
    seeded: tuple[Path, Path], tmp_path: Path
) -> None:
    db, log = copy_store(seeded, tmp_path)
    _, report = run_check(db, log, "patched")
    needed = {k: sorted(v) for k, v in report["patches_needed"].items()}
    assert needed == {"short-prompt": ["fail", "hang", "sleep", "wait"]}
    runs = {r["run_id"]: r for r in report["runs"]}
    # not yet at the patch point: the new code would record the marker there
    assert runs["early"]["new_after_seq"] == 1
    assert runs["queued"]["new_after_seq"] == 0
    assert runs["hang"]["new_after_seq"] == 3  # score("x") at seq 4 runs again


def test_check_summary_table_groups_by_workflow_and_verdict(
    seeded: tuple[Path, Path], tmp_path: Path
) -> None:
    db, log = copy_store(seeded, tmp_path)
    _, report = run_check(db, log, "insert")
    assert report["summary"] == [
        {"workflow": "ver.flow", "verdict": "compatible", "runs": 4},
        {"workflow": "ver.flow", "verdict": "diverges", "runs": 2},
    ]
