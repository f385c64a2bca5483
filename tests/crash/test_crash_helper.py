"""resumable.testing.crash_test on users' workflows: every boundary, every check."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import store_url
from crash import user_app
from resumable.testing import crash_test


def test_every_commit_is_killed_before_and_after_and_only_in_flight_steps_rerun() -> (
    None
):
    report = crash_test(user_app.checkout, ["a", "b"])
    assert report.boundaries == 3  # two charges and an email
    assert report.result == ["charged a 100", "charged b 200", "mailed a,b"]
    assert [(t.kill_at, t.phase) for t in report.trials] == [
        (k, phase) for k in (1, 2, 3) for phase in ("before-commit", "after-commit")
    ]
    for trial in report.trials:
        assert trial.result == report.result
        if trial.phase == "after-commit":
            assert trial.reran == frozenset()
            assert trial.effects == report.effects
            assert len(trial.committed_before) == trial.kill_at
        else:
            # the step whose commit was lost ran its effect again, nothing else did
            (again,) = trial.reran
            assert again[0] == trial.kill_at
            assert len(trial.committed_before) == trial.kill_at - 1


def test_gathered_steps_and_a_plain_def_workflow_pass() -> None:
    gathered = crash_test(user_app.fan_out, 3, phases=("before-commit",))
    assert gathered.boundaries == 3
    assert all(t.result == gathered.result for t in gathered.trials)
    sync = crash_test(user_app.sync_checkout, ["x", "y"], phases=("after-commit",))
    assert sync.result == ["X", "Y"]
    assert len(sync.trials) == 2


def test_an_effect_in_the_workflow_body_is_caught() -> None:
    with pytest.raises(AssertionError, match=r"'audit log' of the workflow body"):
        crash_test(user_app.leaky, "o", phases=("after-commit",))


def test_exactly_once_fails_a_plain_effect_and_passes_an_idempotent_one(
    tmp_path: Path,
) -> None:
    with pytest.raises(
        AssertionError, match=r"effect 'charge a' of step #1 ran 2 times"
    ):
        crash_test(
            user_app.checkout, ["a"], phases=("before-commit",), exactly_once=True
        )
    report = crash_test(
        user_app.idempotent, ["a", "b"], str(tmp_path), exactly_once=True
    )
    assert len(report.trials) == 4
    assert all(t.reran == frozenset() for t in report.trials)


def test_a_wrong_result_and_a_drifting_workflow_are_reported(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="the resumed run returned"):
        crash_test(
            user_app.checkout, ["a"], expected=["nope"], phases=("after-commit",)
        )
    with pytest.raises(AssertionError, match="different number of commits"):
        crash_test(user_app.drifting, str(tmp_path / "count"))


@pytest.mark.postgres
def test_runs_on_a_shared_postgres_store(tmp_path: Path) -> None:
    url = store_url("postgres", tmp_path)
    report = crash_test(user_app.checkout, ["p"], store=url, phases=("before-commit",))
    assert report.boundaries == 2
    assert all(t.result == report.result for t in report.trials)


def test_what_cannot_cross_a_process_is_refused_before_anything_runs() -> None:
    with pytest.raises(ValueError, match="not memory://"):
        crash_test(user_app.checkout, ["a"], store="memory://")
    with pytest.raises(ValueError, match="as JSON"):
        crash_test(user_app.checkout, [object()])
