"""Drive resumable as a user does: their script in a folder, the `resumable` command.

Every process runs in the user's folder with the checkout's `src` on PYTHONPATH,
so the installed command runs this code, and `./.resumable/state.db` (the default
store) lands in the folder.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
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


def free_port() -> int:
    """A loopback port free now (the dashboard binds it a moment later)."""
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fetch(address: str) -> str:
    """GET a page of a local server, as text."""
    with urllib.request.urlopen(address, timeout=10) as response:  # noqa: S310 - loopback
        return str(response.read().decode())


@contextlib.contextmanager
def dashboard(folder: Path, *args: str) -> Iterator[str]:
    """`resumable ui` serving the folder's store; yields its base URL."""
    port = free_port()
    server = subprocess.Popen(
        [str(COMMAND), "ui", "--port", str(port), *args],
        cwd=folder,
        env=user_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"

    def serving() -> bool:
        assert server.poll() is None, server.communicate()[1]
        try:
            fetch(base + "/")
        except OSError:
            return False
        return True

    try:
        poll(serving, what="the dashboard answering")
        yield base
    finally:
        server.terminate()
        server.communicate(timeout=30)
