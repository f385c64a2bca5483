"""A Pydantic AI tool needing approval: the run waits, the process exits, `send` answers."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from resumable import Engine
from resumable.cli import main
from resumable.simulator import SimulatedProvider

CRASH_DIR = Path(__file__).parent
APP = CRASH_DIR / "pydantic_ai_app.py"


@pytest.fixture
def sim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    effects = tmp_path / "effects.log"
    with SimulatedProvider() as provider:
        monkeypatch.setenv("SIM_URL", provider.openai_base_url)
        monkeypatch.setenv("EFFECTS_LOG", str(effects))
        yield effects


def wait_in_another_process(url: str, run_id: str) -> str:
    """Start the refund in a child that exits once the run waits; the awaited key."""
    child = subprocess.run(
        [sys.executable, str(APP), url, run_id],
        env=dict(os.environ),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == 0, child.stderr.decode()

    async def awaited() -> list[str]:
        engine = Engine(url)
        try:
            assert (await engine.get(run_id)).status == "waiting"
            return await engine.awaited_keys(run_id)
        finally:
            await engine.close()

    (key,) = asyncio.run(awaited())
    return key


def resume(url: str, run_id: str) -> None:
    sys.path.insert(0, str(CRASH_DIR))
    try:
        assert main(["resume", run_id, "--app", "pydantic_ai_app", "--store", url]) == 0
    finally:
        sys.path.remove(str(CRASH_DIR))
        sys.modules.pop("pydantic_ai_app", None)


def steps_of(url: str, run_id: str) -> tuple[str, list[str], object]:
    """The run's status, its step names and its result."""

    async def read() -> tuple[str, list[str], object]:
        engine = Engine(url)
        try:
            info = await engine.get(run_id)
            steps = [s.name for s in await engine.history(run_id)]
            return info.status, steps, info.result
        finally:
            await engine.close()

    return asyncio.run(read())


def test_an_approval_sent_from_another_process_runs_the_tool_once(
    tmp_path: Path, sim: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'refund.db'}"
    key = wait_in_another_process(url, "refund-1")
    assert key.startswith("approve:")
    assert not sim.exists()  # nothing refunded while it waits
    assert main(["send", "refund-1", key, "true", "--store", url]) == 0
    resume(url, "refund-1")
    assert sim.read_text().splitlines() == ["refund"]
    status, steps, result = steps_of(url, "refund-1")
    assert status == "succeeded"
    assert "refunds__function_toolset__<agent>.call_tool:issue_refund" in steps
    assert "refunded" in str(result)


def test_a_denial_takes_the_denial_path_and_never_runs_the_tool(
    tmp_path: Path, sim: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'refund.db'}"
    key = wait_in_another_process(url, "refund-2")
    denial = json.dumps({"approved": False, "message": "refunds are frozen"})
    assert main(["send", "refund-2", key, denial, "--store", url]) == 0
    resume(url, "refund-2")
    assert not sim.exists()
    status, steps, result = steps_of(url, "refund-2")
    assert status == "succeeded"
    assert "refunds are frozen" in str(result)  # the model was told why
    assert not any(step.endswith("issue_refund") for step in steps)
