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


@pytest.mark.timeout(900)
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
    # triage, billing x3 (one per tool, then the answer), billing for the follow-up
    model_calls, tool_calls = 5, 2
    assert report.boundaries == model_calls + tool_calls
    assert sorted(name for _, name in report.effects) == [
        "issue_refund",
        "lookup_invoice",
    ]
    assert len(report.trials) == 2 * report.boundaries
    for trial in report.trials:
        assert trial.result == report.result
        if trial.phase == "after-commit":
            assert trial.reran == frozenset()
    # the reference run, then each trial: every model call once, and the one whose
    # commit a before-commit kill lost once more
    assert calls == model_calls * (1 + len(report.trials)) + model_calls
    before = [t for t in report.trials if t.phase == "before-commit"]
    assert sum(len(t.reran) for t in before) == tool_calls  # each tool's own kill
