"""No traceback for an error a user can cause: one line, the fix, a non-zero exit (issue 36)."""

from __future__ import annotations

import asyncio
import base64
import shlex
import subprocess
from pathlib import Path

from newcomer.cli_flows import quick
from newcomer.cli_user import (
    COMMAND,
    TIMEOUT_S,
    finish,
    one_line_error,
    start,
    user_env,
)
from resumable import Engine

RUNS = 1000  # their table is far larger than a pipe's buffer (64 KiB)


async def _many_runs(url: str) -> None:
    async with Engine(url) as engine:
        for number in range(RUNS):
            await engine.enqueue(quick, number, run_id=f"run-{number:04d}")


def test_runs_piped_into_head_stops_quietly(tmp_path: Path) -> None:
    db = tmp_path / "many.db"
    asyncio.run(_many_runs(f"sqlite:///{db}?durability=normal"))
    listing = f"{shlex.quote(str(COMMAND))} runs --limit {RUNS} --store sqlite:///{db}"
    done = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {listing} | head -1"],
        cwd=tmp_path,
        env=user_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.stdout.split() == [
        "RUN", "WORKFLOW", "VERSION", "STATUS", "CREATED", "(UTC)", "UPDATED",
        "(UTC)", "INCURRED", "REUSED",
    ]  # fmt: skip
    # as `git log | head -1`: nothing to say, and the shell's status for SIGPIPE
    assert done.stderr == ""
    assert done.returncode == 141


def test_a_bad_or_unusable_encryption_key_is_one_line_with_the_fix(
    tmp_path: Path,
) -> None:
    # cryptography "not installed": a package of that name that cannot be imported
    blocker = tmp_path / "blocked" / "cryptography"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('not installed')\n")
    good_key = base64.b64encode(bytes(range(32))).decode()
    without = user_env(RESUMABLE_ENCRYPTION_KEY=good_key)
    without["PYTHONPATH"] = f"{blocker.parent}:{without['PYTHONPATH']}"
    store = f"sqlite:///{tmp_path / 'state.db'}"
    keys = ("not base64!", base64.b64encode(b"too short").decode())
    envs = [user_env(RESUMABLE_ENCRYPTION_KEY=key) for key in keys] + [without]
    started = [start(tmp_path, "gc", "--store", store, env=env) for env in envs]
    not_base64, too_short, no_cryptography = [finish(process) for process in started]
    for malformed in (not_base64, too_short):
        line = one_line_error(malformed)
        assert "RESUMABLE_ENCRYPTION_KEY" in line
        assert "generate one with" in line  # the fix
    assert "AES-256 needs exactly 32" in one_line_error(too_short)
    line = one_line_error(no_cryptography)
    assert "RESUMABLE_ENCRYPTION_KEY is set" in line
    assert "pip install 'resumable[encryption]'" in line  # the fix
    assert good_key not in line
