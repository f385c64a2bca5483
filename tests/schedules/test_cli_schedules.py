"""`resumable schedules`: list with next fire times, pause and resume, as a user types it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from resumable import Engine, workflow


@workflow(name="tests.cli.report")
async def report() -> str:
    return "ok"


def cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "resumable.cli", "schedules", *args, "--store", url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_schedules_are_listed_paused_and_resumed_from_the_cli(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    async with Engine(url) as engine:
        engine.schedule(report, "0 9 * * *", tz="Europe/Paris", name="morning")
        checks: list[int] = []

        def second_check(_: object) -> bool:
            checks.append(1)
            return len(checks) > 1

        # one pass of a worker: it saves the definition its code declares
        await engine.worker(poll_s=0.01).run(until=second_check)

    listed = cli(url, "list")
    assert listed.returncode == 0, listed.stderr
    assert "morning  active  '0 9 * * *' (Europe/Paris)" in listed.stdout
    assert listed.stdout.count("next ") == 3
    assert "skip missed" in listed.stdout

    paused = cli(url, "pause", "morning")
    assert paused.returncode == 0, paused.stderr
    assert "morning  paused" in paused.stdout
    assert "next " not in paused.stdout
    assert "paused" in cli(url).stdout  # list is the default

    resumed = cli(url, "resume", "morning")
    assert "morning  active" in resumed.stdout

    missing = cli(url, "pause", "evening")
    assert missing.returncode == 2
    assert "no schedule 'evening'" in missing.stderr
    assert "Traceback" not in missing.stderr
