"""A run waiting for input: `resume` says what it waits for and returns; `send`
checks the key; the dashboard's form is filled in with it (issue 36)."""

from __future__ import annotations

import asyncio
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from newcomer.cli_flows import approval
from newcomer.cli_user import APP, finish, one_line_error, resumable, start, together
from resumable import Engine


async def _enqueue(url: str, run_id: str) -> None:
    async with Engine(url) as engine:
        await engine.enqueue(approval, "the plan", run_id=run_id)


def test_resume_returns_at_a_wait_and_send_takes_only_the_awaited_key(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    asyncio.run(_enqueue(url, "needs-ok"))
    store = ["--store", url]
    resumed = resumable(tmp_path, "resume", "needs-ok", "--app", APP, *store)
    assert resumed.returncode == 0, resumed.stderr
    assert "run needs-ok is waiting for input 'approval'" in resumed.stdout
    assert f"  resumable send needs-ok approval VALUE --store {url}" in resumed.stdout
    assert "without a version" not in resumed.stdout  # versions are not in use
    typo, early = together(
        tmp_path,
        [
            ["send", "needs-ok", "aproval", "true", *store],
            ["send", "needs-ok", "later", "1", "--early", *store],
        ],
    )
    line = one_line_error(typo)
    assert typo.returncode == 2
    assert "not waiting for 'aproval'; it waits for 'approval'" in line
    assert "--early" in line
    assert early.returncode == 0, early.stderr
    sent = resumable(tmp_path, "send", "needs-ok", "approval", '"yes"', *store)
    assert sent.returncode == 0, sent.stderr
    done = resumable(tmp_path, "resume", "needs-ok", "--app", APP, *store)
    assert done.returncode == 0, done.stderr
    assert "run needs-ok succeeded: 'a draft about the plan: yes'" in done.stdout


async def _waiting(url: str, run_id: str) -> None:
    async with Engine(url) as engine:
        handle = await engine.start(approval, "the memo", run_id=run_id)
        deadline = time.monotonic() + 30
        while await handle.status() != "waiting":
            assert time.monotonic() < deadline, "the run never reached its wait"
            await asyncio.sleep(0.02)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _page(base: str, path: str) -> str:
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{base}{path}", timeout=5) as page:  # noqa: S310 - our own server
                return str(page.read().decode())
        except OSError:
            assert time.monotonic() < deadline, "the dashboard did not answer"
            time.sleep(0.1)


def test_the_dashboard_fills_the_send_form_with_the_awaited_key(
    tmp_path: Path,
) -> None:
    pytest.importorskip("uvicorn", reason="the ui extra is not installed")
    url = f"sqlite:///{tmp_path / 'state.db'}"
    asyncio.run(_waiting(url, "memo"))
    port = _free_port()
    server = start(tmp_path, "ui", "--port", str(port), "--store", url)
    base = f"http://127.0.0.1:{port}"
    try:
        html = _page(base, "/run?id=memo")
        assert re.search(r'<input name=key required value="approval"', html), html
        csrf = re.search(r'<meta name=csrf content="([^"]+)"', html)
        assert csrf is not None, html
        form = {"run_id": "memo", "key": "aproval", "value": "true", "csrf": csrf[1]}
        request = urllib.request.Request(  # noqa: S310 - our own server
            f"{base}/actions/send",
            data=urllib.parse.urlencode(form).encode(),
            headers={"Origin": base},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)  # noqa: S310 - as above
        assert refused.value.code == 400
        assert "it waits for &#x27;approval&#x27;" in refused.value.read().decode()
    finally:
        server.terminate()
        finish(server)
