"""`resumable check`'s human output, options and exit status (in-process)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from resumable import Engine, WorkflowFailed
from resumable.cli import main
from resumable.cli.check import parse_since, parse_statuses

APP = """
from resumable import patched, step, workflow

@step(name="cli.check.work")
async def work(text: str) -> str:
    return text.upper()

@workflow(name="cli.check.flow")
async def flow(doc: str) -> str:
    first = await work(doc)
    {middle}
    {end}
"""


def write_app(tmp_path: Path, name: str, middle: str) -> None:
    end = (
        'raise RuntimeError("v1 stops here")' if name.endswith("v1") else "return first"
    )
    (tmp_path / f"{name}.py").write_text(APP.format(middle=middle, end=end))


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    write_app(tmp_path, "cli_check_v1", "await work(first + ' again')")
    import importlib

    v1 = importlib.import_module("cli_check_v1")
    url = f"sqlite:///{tmp_path / 'check.db'}"

    async def seed() -> None:
        async with Engine(url) as engine:
            for n in range(2):
                with pytest.raises(WorkflowFailed):
                    await engine.run(v1.flow, f"doc {n}", run_id=f"run-{n}")

    asyncio.run(seed())
    yield url
    for module in ("cli_check_v1", "cli_check_v2", "cli_check_v3"):
        sys.modules.pop(module, None)


def test_breaking_runs_are_described_with_a_summary_and_exit_1(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_app(tmp_path, "cli_check_v2", "await work(first + ' changed')")
    assert main(["check", "--app", "cli_check_v2", "--store", url]) == 1
    captured = capsys.readouterr()
    assert "run-1 (cli.check.flow, failed): DIVERGES at step #2" in captured.out
    assert "new code: cli.check.work, args fingerprint" in captured.out
    assert "('DOC 1 changed')" in captured.out
    assert "cli.check.flow  diverges     2" in captured.out
    assert "BREAKS (2 runs checked)" in captured.out
    assert "2 of 2 runs would break" in captured.err


def test_a_patched_change_passes_and_lists_the_runs_needing_the_patch(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_app(
        tmp_path,
        "cli_check_v3",
        "await (work(first + ' changed') if await patched('p1') "
        "else work(first + ' again'))",
    )
    assert main(["check", "--app", "cli_check_v3", "--store", url, "--all"]) == 0
    out = capsys.readouterr().out
    assert "run-0 (cli.check.flow, failed): COMPATIBLE" in out
    assert "patches still needed (runs that took the old branch):" in out
    assert "p1: run-1, run-0" in out
    assert "OK: no run would break (2 runs checked)" in out


def test_statuses_and_since_are_parsed_or_refused() -> None:
    assert parse_statuses("running, waiting") == ("running", "waiting")
    assert parse_since("7d") == timedelta(days=7)
    assert parse_since("90m") == timedelta(minutes=90)
    with pytest.raises(argparse.ArgumentTypeError, match="unknown status"):
        parse_statuses("runing")
    with pytest.raises(argparse.ArgumentTypeError, match=r"e\.g\. 30m"):
        parse_since("a week")


def test_bad_options_exit_2(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["check", "--app", "x", "--store", url, "--since", "soon"])
    assert exited.value.code == 2
    assert "--since 'soon'" in capsys.readouterr().err
