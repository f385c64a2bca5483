"""`resumable --version`, `--store` anywhere, and help for every option (issue 36)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from newcomer.cli_flows import quick
from newcomer.cli_user import finish, resumable, start, user_env
from resumable import Engine, __version__
from resumable.cli import build_parser


def test_version_prints_the_installed_version(tmp_path: Path) -> None:
    done = resumable(tmp_path, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"resumable {__version__}"


async def _one_run(url: str) -> None:
    async with Engine(url) as engine:
        await engine.run(quick, 1, run_id="only-here")


def test_the_store_is_taken_before_or_after_the_command_or_from_the_environment(
    tmp_path: Path,
) -> None:
    # parsing only: the same on every store (each command start costs a second)
    url = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    asyncio.run(_one_run(url))
    started = [
        start(tmp_path, "--store", url, "runs"),
        start(tmp_path, "runs", "--store", url),
        start(tmp_path, "runs", env=user_env(RESUMABLE_STORE=url)),
    ]
    before, after, environment = [finish(process) for process in started]
    for done in (before, after, environment):
        assert done.returncode == 0, done.stderr
        assert "only-here" in done.stdout
    assert not (tmp_path / ".resumable").exists()  # the default store: never made


def _options(help_text: str) -> list[tuple[str, str]]:
    """(invocation, its help) of each argument argparse lists in `help_text`."""
    found: list[tuple[str, str]] = []
    lines = help_text.splitlines()
    for number, line in enumerate(lines):
        match = re.match(r"^  (\S.*?)(?:\s{2,}(\S.*))?$", line)
        if match is None or line.startswith(("   ", "  {")):
            continue
        described = match.group(2) or ""
        following = lines[number + 1] if number + 1 < len(lines) else ""
        if not described and re.match(r"^ {4,}\S", following):
            described = following.strip()
        found.append((match.group(1), described))
    return found


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*argv, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_every_option_of_every_command_has_help_text(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one line an option where it fits
    top = _help([], capsys)
    commands = re.findall(r"^    (\S+)\s{2,}\S", top, re.MULTILINE)
    assert {"runs", "show", "resume", "send", "gc", "worker", "ui"} <= set(commands)
    missing = []
    for command in ["", *commands]:
        page = _help([command] if command else [], capsys)
        options = _options(page)
        assert options, page
        missing += [
            f"resumable {command} {invocation}".replace("  ", " ")
            for invocation, described in options
            if not described
        ]
    assert missing == []
