"""`resumable rerun` and `resumable cache clear`, as a user types them."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

from resumable import Engine
from resumable.cli import main


def test_rerun_serves_cached_steps_and_cache_clear_empties_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "cli_cache_app.py").write_text(
        textwrap.dedent(
            """
            from resumable import current_run, step, workflow

            CALLS = []

            @step(name="tests.cli.cache.ask", cache=True)
            async def ask(q: str) -> str:
                CALLS.append(q)
                current_run().record_usage(
                    model="gpt-5-mini", input_tokens=1000, output_tokens=100
                )
                return q.upper()

            @workflow(name="tests.cli.cache.quiz")
            async def quiz(qs: list[str]) -> list[str]:
                return [await ask(q) for q in qs]
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("cli_cache_app")
    url = f"sqlite:///{tmp_path / 'cache.db'}"
    try:
        assert Engine(url).run_sync(module.quiz, ["a", "b"], run_id="q-1") == ["A", "B"]
        module.CALLS.clear()
        args = ["rerun", "q-1", "--app", "cli_cache_app", "--new-id", "q-2"]
        assert main([*args, "--store", url]) == 0
        out = capsys.readouterr().out
        assert "run q-2 (a rerun of q-1) succeeded: ['A', 'B']" in out
        assert "served from the step cache: 2 steps, 2 calls, $" in out
        assert "incurred: 0 calls" in out
        assert module.CALLS == []
        assert main(["show", "q-2", "--store", url]) == 0
        out = capsys.readouterr().out
        assert out.count("(cached from q-1)") == 2
        assert "of which 2 steps served from the step cache" in out
        assert main(["cache", "clear", "--workflow", "nope", "--store", url]) == 0
        assert "cleared 0 cache entries" in capsys.readouterr().out
        assert main(["cache", "clear", "--store", url]) == 0
        assert "cleared 2 cache entries" in capsys.readouterr().out
        assert main(["rerun", "q-1", "--app", "cli_cache_app", "--store", url]) == 0
        assert module.CALLS == ["a", "b"]  # nothing cached: both asked again
    finally:
        sys.modules.pop("cli_cache_app", None)


def test_cache_clear_on_a_missing_store_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'none.db'}"
    assert main(["cache", "clear", "--store", url]) != 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert not (tmp_path / "none.db").exists()
