"""An Agents SDK run killed at every model call and tool call resumes to the same end.

The real `openai-agents` SDK talks to the simulator; `crash_test` SIGKILLs the
child at each step commit, before and after the store takes it, and resumes.
"""

from __future__ import annotations

import pytest

from crash import openai_agents_app
from resumable.simulator import SimulatedProvider
from resumable.testing import crash_test

pytest.importorskip("agents")


@pytest.mark.timeout(1500)  # ~30 child processes, each importing the SDK
def test_every_model_and_tool_call_killed_in_turn_resumes_with_each_paid_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with SimulatedProvider() as provider:
        monkeypatch.setenv("LLM_BASE_URL", provider.base_url)
        report = crash_test(
            openai_agents_app.support,
            "I want a refund for my last invoice",
            "Thanks. Is that all done?",
            timeout=120,
        )
        calls = provider.count()
    # turn 1: triage hands off, billing calls each tool and answers; turn 2: closing
    tool_calls = {"lookup_invoice": 1, "issue_refund": 1}
    model_calls = 1 + 3 + 1
    assert report.boundaries == model_calls + sum(tool_calls.values())
    effects: dict[str, int] = {}
    for (_, name), count in report.effects.items():
        effects[name] = effects.get(name, 0) + count
    assert effects == tool_calls  # each tool call's side effect once
    assert len(report.trials) == 2 * report.boundaries
    for trial in report.trials:
        assert trial.result == report.result
        if trial.phase == "after-commit":
            assert trial.reran == frozenset()
        else:  # a tool killed before its commit ran once more; nothing else did
            assert len(trial.reran) <= 1
    # the reference run, then each trial: every model call once, and the one whose
    # commit a before-commit kill lost once more
    assert calls == model_calls * (1 + len(report.trials)) + model_calls
