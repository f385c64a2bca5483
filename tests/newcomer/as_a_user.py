"""Drive resumable as a user does: their script in a folder, the `resumable` command.

Every process runs in the user's folder with the checkout's `src` on PYTHONPATH,
so the installed command runs this code, and `./.resumable/state.db` (the default
store) lands in the folder.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMAND = Path(sys.executable).with_name("resumable")
_TIMEOUT_S = 60


def user_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell, with this checkout's code importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env["PYTHONPATH"] = str(ROOT / "src")
    env.update(extra)
    return env


def python(
    folder: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in the user's folder."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=folder,
        env=env or user_env(),
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_S,
        check=False,
    )


def resumable(
    folder: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The installed `resumable ARGS` in the user's folder."""
    return subprocess.run(
        [str(COMMAND), *args],
        cwd=folder,
        env=env or user_env(),
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_S,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """The command's stdout, or an AssertionError showing what it printed."""
    assert result.returncode == 0, (
        f"{result.args} exited {result.returncode}\n"
        f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    return result.stdout


def readme_block(index: int = 0) -> str:
    """The README's `index`-th ```python block, as a user would copy it."""
    blocks = re.findall(
        r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M
    )
    return str(blocks[index])


def poll(condition: Callable[[], bool], *, what: str, timeout_s: float = 30) -> None:
    """Wait until `condition()` holds, or fail naming `what` never happened."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} did not happen within {timeout_s} s")
