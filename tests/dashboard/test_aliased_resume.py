"""The dashboard's Resume finishes a run an older version recorded as `__main__:...`."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from starlette.testclient import TestClient

from resumable import Engine, step, workflow
from resumable.ui.app import create_app

ROOT = Path(__file__).resolve().parents[2]
EXECUTED: list[int] = []

# what an older version ran as a script: `python -c`, so its workflow recorded
# the name `__main__:relabelled_job`; the second step kills the process
OLDER_SCRIPT = """
import asyncio, os, signal, sys
from resumable import Engine, step, workflow

@step
async def relabelled_part(i: int) -> int:
    if i == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return i * 10

@workflow
async def relabelled_job(n: int) -> int:
    return sum([await relabelled_part(i) for i in range(1, n + 1)])

asyncio.run(Engine(sys.argv[1]).run(relabelled_job, 3, run_id="old-run"))
"""


@step
async def relabelled_part(i: int) -> int:
    EXECUTED.append(i)
    return i * 10


@workflow
async def relabelled_job(n: int) -> int:
    return sum([await relabelled_part(i) for i in range(1, n + 1)])


def _status(client: TestClient, run_id: str) -> str:
    page = client.get("/run", params={"id": run_id})
    assert page.status_code == 200, page.text
    found = re.search(r'id=live data-status="(\w+)"', page.text)
    assert found, page.text
    return found.group(1)


def test_resume_in_the_dashboard_finishes_a_run_recorded_under_main(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'ui.db'}"
    died = subprocess.run(
        [sys.executable, "-c", OLDER_SCRIPT, url],
        cwd=tmp_path,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")},
            "PYTHONPATH": str(ROOT / "src"),
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert died.returncode == -signal.SIGKILL, died.stderr
    EXECUTED.clear()
    engine = Engine(url)
    # the Host check admits loopback names only; `with` keeps the app's loop
    # (and the resume it starts in the background) alive between requests
    with TestClient(create_app(engine), base_url="http://127.0.0.1") as client:
        page = client.get("/run", params={"id": "old-run"})
        assert "__main__:relabelled_job" in page.text
        csrf = re.search(r'<meta name=csrf content="([^"]+)"', page.text)
        assert csrf, page.text
        response = client.post(
            "/actions/resume",
            data={"run_id": "old-run", "csrf": csrf.group(1)},
            headers={"Origin": "http://127.0.0.1"},
        )
        assert response.status_code == 200, response.text
        assert "resuming in this dashboard" in response.text
        deadline = time.monotonic() + 30
        while (status := _status(client, "old-run")) != "succeeded":
            assert status in {"queued", "running"}, status
            assert time.monotonic() < deadline, "the resumed run did not finish"
            time.sleep(0.05)
    asyncio.run(engine.close())
    # step 1 replayed; the step in flight at the crash and the next one ran
    assert EXECUTED == [2, 3]
    reader = Engine(url)  # the finished run returns its recorded result
    assert reader.run_sync(relabelled_job, 3, run_id="old-run") == 60
    asyncio.run(reader.close())
    assert EXECUTED == [2, 3]
