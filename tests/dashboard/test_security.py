"""The dashboard refuses what it must: POSTs without CSRF, foreign hosts, no token."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from dashboard import flows
from dashboard.conftest import Dashboard, call, serve
from resumable import Engine, ResumableError
from resumable.ui import check_bind, is_loopback

TOKEN = "s3cret-token"  # noqa: S105 - the test's own token


def _queued_run(dashboard: Dashboard) -> Engine:
    engine = Engine(dashboard.store_url)
    call(engine.enqueue(flows.pipeline, 1, run_id="target"))
    return engine


def test_a_post_without_the_csrf_token_is_refused(
    dashboard: Dashboard, page: Page
) -> None:
    engine = _queued_run(dashboard)
    page.goto(
        f"{dashboard.url}/run?id=target"
    )  # the browser has the page, not the token
    refused = page.request.post(
        f"{dashboard.url}/actions/cancel", form={"run_id": "target"}
    )
    assert refused.status == 403
    assert "CSRF" in refused.text()
    forged = page.request.post(
        f"{dashboard.url}/actions/cancel", form={"run_id": "target", "csrf": "guess"}
    )
    assert forged.status == 403
    assert call(engine.get("target")).status == "queued"
    page.locator("form[action='/actions/cancel'] button").click()  # the page's own form
    expect(page.locator(".flash")).to_contain_text("the run is cancelled")
    assert call(engine.get("target")).status == "cancelled"
    call(engine.close())


def test_a_request_naming_another_host_is_refused(dashboard: Dashboard) -> None:
    request = urllib.request.Request(  # noqa: S310 - http to our own test server
        f"{dashboard.url}/", headers={"Host": "attacker.example:80"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)  # noqa: S310 - as above
    assert refused.value.code == 421
    refused.value.close()


def test_a_token_gates_every_page_until_login(dashboard: Dashboard, page: Page) -> None:
    server, thread, url = serve(dashboard.engine, token=TOKEN)
    try:
        page.goto(f"{url}/")
        expect(page.locator("h1")).to_have_text("Log in")
        assert page.request.get(f"{url}/workers", max_redirects=0).status == 303
        page.fill("input[name=token]", "wrong")
        page.click("button")
        expect(page.locator(".error")).to_contain_text("wrong token")
        page.goto(f"{url}/login")
        page.fill("input[name=token]", TOKEN)
        page.click("button")
        expect(page.locator("h1")).to_have_text("Runs")
        bearer = page.context.browser.new_context(  # type: ignore[union-attr]  # launched, not connected
            extra_http_headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert bearer.request.get(f"{url}/workers").status == 200
        # reached by the machine's address, as a non-loopback --host is
        by_address = bearer.request.get(
            f"{url}/workers", headers={"Host": "192.0.2.10:8765"}
        )
        assert by_address.status == 200
        bearer.close()
        anonymous = page.context.browser.new_context()  # type: ignore[union-attr]  # launched
        refused = anonymous.request.get(
            f"{url}/workers", headers={"Host": "192.0.2.10:8765"}, max_redirects=0
        )
        assert refused.status == 303  # to /login: no token, no page
        anonymous.close()
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_a_non_loopback_host_without_a_token_is_refused() -> None:
    assert is_loopback("127.0.0.1")
    assert is_loopback("::1")
    assert is_loopback("localhost")
    assert not is_loopback("0.0.0.0")  # noqa: S104 - the address refused
    with pytest.raises(ResumableError, match="without --token"):
        check_bind("0.0.0.0", None)  # noqa: S104 - the address refused
    check_bind("0.0.0.0", "a-token")  # noqa: S104 - allowed with a token
    check_bind("127.0.0.1", None)
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "resumable.cli",
            "ui",
            "--host",
            "0.0.0.0",  # noqa: S104 - the address refused
            "--store",
            "memory://",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert cli.returncode == 2  # a usage error
    assert "refusing to serve the dashboard on '0.0.0.0' without --token" in cli.stderr


def test_the_cli_serves_the_dashboard_on_loopback(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    call(_create_store(f"sqlite:///{tmp_path / 'cli.db'}"))  # ui creates none
    server = subprocess.Popen(
        [sys.executable, "-m", "resumable.cli", "ui", "--port", str(port),
         "--store", f"sqlite:///{tmp_path / 'cli.db'}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/", timeout=5
                ) as page:
                    assert page.status == 200
                    assert "<h1>Runs</h1>" in page.read().decode()
                    break
            except OSError:
                assert server.poll() is None, server.stderr.read()  # type: ignore[union-attr]  # piped
                assert time.monotonic() < deadline, "the dashboard did not answer"
                time.sleep(0.1)
    finally:
        server.terminate()
        server.communicate(timeout=30)


async def _create_store(url: str) -> None:
    async with Engine(url) as engine:
        await engine.count_runs()


def test_a_form_over_the_size_limit_is_refused_and_changes_nothing(
    dashboard: Dashboard,
) -> None:
    engine = _queued_run(dashboard)
    body = b"run_id=target&key=k&value=" + b"1" * (2 << 20)
    request = urllib.request.Request(  # noqa: S310 - http to our own test server
        f"{dashboard.url}/actions/send",
        data=body,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)  # noqa: S310 - as above
    assert refused.value.code == 403
    assert "bytes this dashboard takes" in refused.value.read().decode()
    refused.value.close()
    assert call(engine.get("target")).status == "queued"
    call(engine.close())
