"""A dashboard served by uvicorn on a thread, and a real headless Chromium."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import time
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

pytest.importorskip("starlette", reason="the ui extra is not installed")
import uvicorn
from playwright.sync_api import Browser, Page, sync_playwright

from resumable import Engine
from resumable.ui.app import create_app

CHROMIUM = "/usr/bin/chromium"


T = TypeVar("T")


def call(coro: Coroutine[Any, Any, T]) -> T:
    """Await `coro` from sync test code (Playwright's sync API holds this thread's loop)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@dataclass
class Dashboard:
    url: str
    """The server's base URL, e.g. http://127.0.0.1:43123"""
    store_url: str
    engine: Engine
    """The dashboard's own engine (tests read through their own)."""


def serve(
    engine: Engine, *, token: str | None = None
) -> tuple[uvicorn.Server, threading.Thread, str]:
    config = uvicorn.Config(
        create_app(engine, token=token), host="127.0.0.1", port=0, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the dashboard did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    return server, thread, f"http://127.0.0.1:{port}"


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[Dashboard]:
    store_url = f"sqlite:///{tmp_path / 'ui.db'}"
    engine = Engine(store_url)
    server, thread, url = serve(engine)
    yield Dashboard(url=url, store_url=store_url, engine=engine)
    server.should_exit = True
    thread.join(timeout=10)
    call(engine.close())


@pytest.fixture(scope="module")  # sync Playwright holds a running loop: release it
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        reason = f"{CHROMIUM} is missing: apt-get install chromium"
        if os.environ.get("RESUMABLE_REQUIRE_SERVICES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    assert shutil.which(CHROMIUM)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    yield page
    context.close()
