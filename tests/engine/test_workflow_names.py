"""A workflow's name does not depend on how its module was loaded."""

from __future__ import annotations

import importlib.machinery
from typing import Any

import pytest

from resumable._engine import replay
from resumable._engine.specs import (
    WorkflowRegistry,
    WorkflowSpec,
    default_workflow_name,
    legacy_names,
)
from resumable.errors import NonDeterminismError
from resumable.stores.protocol import StepRecord


def _defined_in(namespace: dict[str, Any]) -> Any:
    exec("def research(topic):\n    return topic\n", namespace)  # noqa: S102 - a module body
    return namespace["research"]


def _spec(fn: Any, name: str) -> WorkflowSpec:
    return WorkflowSpec(
        name=name, aliases=legacy_names(fn, name), fn=fn, is_async=False
    )


def test_a_script_run_by_path_is_named_after_its_file() -> None:
    fn = _defined_in({"__name__": "__main__", "__file__": "/home/me/agent.py"})
    assert default_workflow_name(fn) == "agent:research"


def test_a_module_run_with_dash_m_is_named_as_it_is_imported() -> None:
    spec = importlib.machinery.ModuleSpec("tools.agent", None)
    fn = _defined_in({"__name__": "__main__", "__spec__": spec, "__file__": "x.py"})
    assert default_workflow_name(fn) == "tools.agent:research"


def test_an_imported_module_keeps_its_module_name() -> None:
    fn = _defined_in({"__name__": "tools.agent"})
    assert default_workflow_name(fn) == "tools.agent:research"
    assert legacy_names(fn, "tools.agent:research") == ("__main__:research",)


def test_an_interactive_definition_stays_main() -> None:
    fn = _defined_in({"__name__": "__main__"})
    assert default_workflow_name(fn) == "__main__:research"


def test_a_run_recorded_as_main_finds_the_workflow_by_its_alias() -> None:
    registry = WorkflowRegistry()
    fn = _defined_in({"__name__": "agent"})
    spec = _spec(fn, "agent:research")
    registry.add(spec)
    assert registry.get("__main__:research") is spec
    assert registry.get("agent:research") is spec
    assert registry.claimable() == ["__main__:research", "agent:research"]
    assert spec.answers_to("__main__:research")
    assert not spec.answers_to("other:research")


def test_an_explicit_name_keeps_runs_of_the_default_name_resumable() -> None:
    registry = WorkflowRegistry()
    fn = _defined_in({"__name__": "agent"})
    spec = _spec(fn, "research")
    registry.add(spec)
    assert registry.get("agent:research") is spec
    assert registry.get("__main__:research") is spec


def test_an_alias_two_workflows_share_finds_neither() -> None:
    registry = WorkflowRegistry()
    registry.add(_spec(_defined_in({"__name__": "a"}), "a:research"))
    registry.add(_spec(_defined_in({"__name__": "b"}), "b:research"))
    assert registry.get("__main__:research") is None
    assert registry.claimable() == ["a:research", "b:research"]


def _child_call(recorded_name: str, spec: WorkflowSpec) -> StepRecord | replay.Execute:
    """Replay's decision for a call of child `spec` where `recorded_name` is recorded."""
    recorded = StepRecord(
        run_id="parent",
        seq=1,
        name=recorded_name,
        fingerprint="f",
        status="ok",
        output=b"x",
        attempts=1,
        started_at_ms=0,
        finished_at_ms=0,
    )
    return replay.decide(
        recorded,
        run_id="parent",
        seq=1,
        name=spec.journal_name,
        fingerprint="f",
        attempts=1,
        retry_failed=False,
        aliases=spec.journal_aliases,
    )


def test_a_child_call_recorded_under_its_main_name_replays_after_the_rename() -> None:
    spec = _spec(_defined_in({"__name__": "agent"}), "agent:research")
    decision = _child_call("child:__main__:research", spec)
    assert isinstance(decision, StepRecord)
    assert decision.name == "child:__main__:research"


@pytest.mark.parametrize(
    "recorded",
    ["child:__main__:summarize", "child:other:research", "__main__:research"],
)
def test_a_child_call_recorded_for_another_workflow_is_still_refused(
    recorded: str,
) -> None:
    spec = _spec(_defined_in({"__name__": "agent"}), "agent:research")
    with pytest.raises(NonDeterminismError, match="another step") as caught:
        _child_call(recorded, spec)
    assert caught.value.called == "child:agent:research"
