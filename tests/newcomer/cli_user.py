"""The `resumable` command as a user's shell runs it, for the test_cli_* modules.

Each process runs with the checkout's `src` (and `tests`, for `--app
newcomer.cli_flows`) on PYTHONPATH and no RESUMABLE_* variable of the test run, so
the installed command runs this code with the defaults a user has. Commands that
do not depend on each other start together: each one costs an interpreter start.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMAND = Path(sys.executable).with_name("resumable")
TIMEOUT_S = 60
APP = "newcomer.cli_flows"


def user_env(**extra: str) -> dict[str, str]:
    """A user's environment, with this checkout's code importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env["PYTHONPATH"] = os.pathsep.join((str(ROOT / "src"), str(ROOT / "tests")))
    env["COLUMNS"] = "200"  # argparse's help, one line an option where it fits
    env.update(extra)
    return env


def start(
    folder: Path,
    *args: str,
    env: dict[str, str] | None = None,
    prefix: Sequence[str] = (),
) -> subprocess.Popen[str]:
    """`resumable ARGS` started in `folder` (after `prefix`, e.g. a namespace tool)."""
    return subprocess.Popen(
        [*prefix, str(COMMAND), *args],
        cwd=folder,
        env=env or user_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    """Wait for a started command; its outcome."""
    out, err = process.communicate(timeout=TIMEOUT_S)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def resumable(
    folder: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`resumable ARGS` in `folder`, to its end."""
    return finish(start(folder, *args, env=env))


def together(
    folder: Path, commands: Sequence[Sequence[str]], env: dict[str, str] | None = None
) -> list[subprocess.CompletedProcess[str]]:
    """Several `resumable` commands run at once; their outcomes in order."""
    started = [start(folder, *args, env=env) for args in commands]
    return [finish(process) for process in started]


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    """The single line a failed command printed on stderr (asserting it is one)."""
    assert done.returncode != 0, done
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]
