"""A Pydantic AI agent calling a real MCP server's tool, SIGKILLed at every step.

The MCP tool listing and the tool call are steps: a resumed run takes both from
the store, so the tool's side effect (a line in a notebook, written by the
server process) happens once per run, or twice where the kill lost the call's
result before its commit.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path

import pytest

from crash import pydantic_ai_mcp_app
from resumable import Engine
from resumable.simulator import SimulatedProvider
from resumable.testing import crash_test

pytestmark = pytest.mark.slow


@pytest.fixture
def notebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "notebook.txt"
    monkeypatch.setenv("MCP_NOTEBOOK", str(path))
    with SimulatedProvider() as provider:
        monkeypatch.setenv("SIM_URL", provider.openai_base_url)
        yield path


def notes_by_run(notebook: Path) -> collections.Counter[str]:
    lines = notebook.read_text().splitlines() if notebook.exists() else []
    return collections.Counter(line.split("\t")[0] for line in lines)


async def test_the_mcp_tool_listing_and_call_are_steps_of_the_run(
    notebook: Path, tmp_path: Path
) -> None:
    client = pydantic_ai_mcp_app.client()
    async with Engine(f"sqlite:///{tmp_path / 'r.db'}") as engine:
        first = await engine.run(
            pydantic_ai_mcp_app.remember, "Remember the milk.", run_id="r"
        )
        assert [s.name for s in await engine.history("r")] == [
            "scribe__mcp_server__notes.get_tools",
            "scribe__model.request",
            "scribe__mcp_server__notes.call_tool",
            "scribe__model.request",
        ]
        assert "noted:" in first
        assert notes_by_run(notebook) == {"r": 1}
        # a fork replays every step: no server call, no note, no model call
        forked = await engine.fork("r", at_step=4)
        assert await engine.resume(forked) == first
        assert notes_by_run(notebook) == {"r": 1}
    await client.close()
    pydantic_ai_mcp_app.client.cache_clear()


@pytest.mark.timeout(600)
def test_killed_at_every_step_the_mcp_tool_runs_once_per_run(notebook: Path) -> None:
    report = crash_test(pydantic_ai_mcp_app.remember, "Remember the milk.")
    assert report.boundaries == 4  # get_tools, model, call_tool, model
    assert "noted:" in report.result
    written = notes_by_run(notebook)
    assert len(report.trials) == 8
    for trial in report.trials:
        assert trial.result == report.result
        run_id = next(
            r for r in written if r.endswith(f"-{trial.kill_at}-{trial.phase}")
        )
        # the tool call is step #3: killed before its commit, it runs again once
        lost = trial.kill_at == 3 and trial.phase == "before-commit"
        assert written[run_id] == (2 if lost else 1), (trial, written)
