"""A Pydantic AI agent SIGKILLed at every model call and tool call, then resumed."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path

import pytest

from crash import pydantic_ai_app
from resumable.simulator import SimulatedProvider, read_log
from resumable.testing import crash_test


@pytest.fixture
def sim_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    log = tmp_path / "requests.jsonl"
    with SimulatedProvider(log_path=log) as provider:
        monkeypatch.setenv("SIM_URL", provider.openai_base_url)
        yield log


@pytest.mark.timeout(600)
def test_every_model_and_tool_step_killed_resumes_to_the_same_output_paying_once(
    sim_log: Path,
) -> None:
    report = crash_test(pydantic_ai_app.forecast, "What is the weather?")
    assert report.boundaries == 5  # model, lookup_city, model, get_weather, model
    assert "According to the tool: sunny in" in report.result
    assert sorted(name for _, name in report.effects) == ["get_weather", "lookup_city"]
    assert len(report.trials) == 10
    # per model call (a prompt digest): once per process that finished it, plus
    # once more where a kill before its commit lost it (model steps: #1, #3, #5)
    killed_in_flight = {1, 3, 5}
    paid = collections.Counter(entry.prompt_digest for entry in read_log(sim_log))
    assert len(paid) == 3
    runs = 1 + len(report.trials)
    for trial in report.trials:
        assert trial.result == report.result
        lost = trial.phase == "before-commit" and trial.kill_at in killed_in_flight
        assert trial.reran == frozenset() or not lost  # a model step has no effect
        # each tool's side effect once; the in-flight one at most twice
        effects = collections.Counter(name for _, name in trial.effects.elements())
        assert effects["lookup_city"] + effects["get_weather"] == 2 + len(trial.reran)
        if trial.phase == "after-commit":
            assert trial.reran == frozenset()
    assert sorted(paid.values()) == [runs + 1] * 3, paid
