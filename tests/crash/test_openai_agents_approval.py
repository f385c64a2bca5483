"""A tool that needs approval suspends the Agents SDK run; `resumable send` answers it.

The first process runs the agent until the tool asks for approval and exits;
the answer comes from the CLI (another process's view of the store), and a third
resumes the run: approved, the tool runs once; rejected, the model is told why
(the SDK's rejection path) and the tool never runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from resumable import Engine
from resumable.cli import main
from resumable.simulator import SimulatedProvider

pytest.importorskip("agents")

CRASH_DIR = Path(__file__).parent
APP = CRASH_DIR / "openai_agents_app.py"


def wait_in_a_child(
    db: Path, run_id: str, log: Path, provider: SimulatedProvider
) -> None:
    child = subprocess.run(
        [sys.executable, str(APP), str(db), run_id],
        env={**os.environ, "EFFECTS_LOG": str(log), "LLM_BASE_URL": provider.base_url},
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 0, child.stderr.decode()


def resume(run_id: str, url: str) -> int:
    sys.path.insert(0, str(CRASH_DIR))
    try:
        return main(["resume", run_id, "--app", "openai_agents_app", "--store", url])
    finally:
        sys.path.remove(str(CRASH_DIR))
        sys.modules.pop("openai_agents_app", None)


async def awaited_keys(url: str, run_id: str) -> list[str]:
    engine = Engine(url)
    try:
        return await engine.awaited_keys(run_id)
    finally:
        await engine.close()


async def outcome(url: str, run_id: str) -> tuple[Any, list[str]]:
    engine = Engine(url)
    try:
        run = await engine.get(run_id)
        return run, [step.name for step in await engine.history(run_id)]
    finally:
        await engine.close()


def effects(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize("approve", [True, False])
@pytest.mark.timeout(300)
def test_an_approval_suspends_the_run_and_a_send_from_another_process_decides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, approve: bool
) -> None:
    db, log, run_id = tmp_path / "agents.db", tmp_path / "effects.log", "refund-1"
    url = f"sqlite:///{db}"
    with SimulatedProvider() as provider:
        wait_in_a_child(db, run_id, log, provider)
        assert provider.count() == 1  # the model asked for the tool; it waits unrun
        assert effects(log) == []
        (key,) = asyncio.run(awaited_keys(url, run_id))
        assert key.startswith("approval:refund_with_approval:")
        answer = (
            "true"
            if approve
            else json.dumps({"approve": False, "message": "no refunds on Sundays"})
        )
        assert main(["send", run_id, key, answer, "--store", url]) == 0

        monkeypatch.setenv("EFFECTS_LOG", str(log))
        monkeypatch.setenv("LLM_BASE_URL", provider.base_url)
        assert resume(run_id, url) == 0
        assert provider.count() == 2  # the first call replayed; one more to answer
        run, steps = asyncio.run(outcome(url, run_id))
    assert run.status == "succeeded"
    if approve:
        assert effects(log) == ["refund"]
        assert steps == [
            "model:refunds",
            "wait_for:" + key,
            "tool:refund_with_approval",
            "model:refunds",
        ]
    else:
        assert effects(log) == []
        assert "no refunds on Sundays" in str(run.result)
        assert steps == ["model:refunds", "wait_for:" + key, "model:refunds"]
