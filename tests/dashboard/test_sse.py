"""The SSE endpoints: a reconnecting client resumes a stream where it left off."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import httpx
import uvicorn
from playwright.sync_api import Page
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Mount, Route

import resumable
from dashboard.conftest import Dashboard, call
from resumable import Engine, step, workflow
from resumable.ui.streams import asgi_app

CHUNKS = 40


@step
async def spoken(n: int, pause_s: float) -> AsyncIterator[str]:
    for i in range(n):
        await asyncio.sleep(pause_s)
        yield f"t{i} "


@workflow
async def speak(n: int, pause_s: float) -> str:
    await resumable.publish("phase", "speaking")
    text = await spoken(n, pause_s)
    await resumable.publish("phase", "done")
    return text


def frames(
    response: httpx.Response, *, stop_after: int | None = None
) -> list[dict[str, str]]:
    """The SSE events of a streamed response: id, event, data (up to `stop_after`)."""
    found: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in response.iter_lines():
        if not line:
            if "id" in current:
                found.append(current)
                if stop_after is not None and len(found) == stop_after:
                    return found
            current = {}
            continue
        field, _, value = line.partition(": ")
        current[field] = value
    return found


@contextmanager
def running(store_url: str, n: int, pause_s: float) -> Iterator[None]:
    """`speak` running on another engine, in a thread of its own, for the block."""
    done = threading.Event()

    async def go() -> None:
        async with Engine(store_url) as engine:
            await engine.run(speak, n, pause_s, run_id="talk")
        done.set()

    thread = threading.Thread(target=lambda: asyncio.run(go()), daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join(timeout=30)
        assert done.is_set()


def test_a_client_that_reconnects_with_last_event_id_gets_the_rest_exactly_once(
    dashboard: Dashboard,
) -> None:
    with running(dashboard.store_url, CHUNKS, 0.03), httpx.Client(timeout=30) as client:
        deadline = time.monotonic() + 20
        while (
            client.get(f"{dashboard.url}/sse/stream?run=talk&step=1").status_code == 404
        ):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        url = f"{dashboard.url}/sse/stream?run=talk&step=1"
        with client.stream("GET", url) as first:
            assert first.headers["content-type"].startswith("text/event-stream")
            before = frames(first, stop_after=10)  # then the connection drops
        last_id = before[-1]["id"]
        with client.stream("GET", url, headers={"Last-Event-ID": last_id}) as again:
            after = frames(again)
    ids = [int(f["id"]) for f in before + after]
    assert ids == list(range(1, CHUNKS + 3))  # attempt, chunks, end: none twice
    assert [f["event"] for f in before + after][:2] == ["attempt", "chunk"]
    assert after[-1]["event"] == "end"
    text = "".join(
        json.loads(f["data"])["value"] for f in before + after if f["event"] == "chunk"
    )
    assert text == call(dashboard.engine.get("talk")).result
    # the progress events, also from an offset
    with (
        httpx.Client(timeout=30) as client,
        client.stream(
            "GET",
            f"{dashboard.url}/sse/events?run=talk",
            headers={"Last-Event-ID": "1"},
        ) as events,
    ):
        rest = frames(events)
    assert [(f["id"], f["event"]) for f in rest] == [("2", "event")]
    assert '"done"' in rest[0]["data"]


def test_a_missing_run_or_step_is_a_clear_http_error(dashboard: Dashboard) -> None:
    with httpx.Client(timeout=10) as client:
        missing = client.get(f"{dashboard.url}/sse/stream?run=nope&step=1")
        assert missing.status_code == 404
        assert "nope" in missing.text
        assert client.get(f"{dashboard.url}/sse/stream?run=nope").status_code in (
            400,
            404,
        )
        assert client.get(f"{dashboard.url}/sse/events").status_code == 400


def web_app(engine: Engine) -> Starlette:
    """A user's web app: a page of its own, and the SSE helper mounted under /live."""

    async def home(_: Request) -> HTMLResponse:
        return HTMLResponse("<!doctype html><title>chat</title><p>chat</p>")

    return Starlette(routes=[Route("/", home), Mount("/live", asgi_app(engine))])


def start_server(
    app: Starlette, port: int = 0
) -> tuple[uvicorn.Server, threading.Thread]:
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return server, thread


def wait_in_page(page: Page, condition: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(condition):
        assert time.monotonic() < deadline, condition
        time.sleep(0.02)


def test_a_browser_event_source_resumes_after_the_server_serving_it_dies(
    dashboard: Dashboard, page: Page
) -> None:
    """Chromium's own EventSource reconnects to a new server with Last-Event-ID."""
    app = web_app(dashboard.engine)
    first, thread = start_server(app)
    port = first.servers[0].sockets[0].getsockname()[1]
    with running(dashboard.store_url, CHUNKS, 0.05):
        page.goto(f"http://127.0.0.1:{port}/")
        page.evaluate(
            """() => {
                window.got = []; window.errors = 0;
                const source = new EventSource("/live/stream?run=talk&step=1");
                for (const kind of ["attempt", "chunk", "end"]) {
                    source.addEventListener(kind, (e) => {
                        window.got.push([Number(e.lastEventId), kind]);
                        if (kind === "end") source.close();
                    });
                }
                source.onerror = () => { window.errors += 1; };
            }"""
        )
        wait_in_page(page, "() => window.got.length >= 8")
        first.should_exit = first.force_exit = True  # the server dies mid-stream
        thread.join(timeout=10)
        second, again = start_server(app, port)
        try:
            wait_in_page(
                page,
                "() => window.got.length > 0 && window.got[window.got.length - 1][1] === 'end'",
            )
            got = page.evaluate("() => window.got")
            errors = page.evaluate("() => window.errors")
        finally:
            second.should_exit = True
            again.join(timeout=10)
    assert errors >= 1  # it did lose the connection
    assert [i for i, _ in got] == list(range(1, CHUNKS + 3))  # resumed, nothing twice


def test_the_run_page_shows_each_progress_keys_latest_value(
    dashboard: Dashboard,
) -> None:
    with running(dashboard.store_url, 3, 0.0):
        pass
    with httpx.Client(timeout=10) as client:
        page = client.get(f"{dashboard.url}/run?id=talk", headers={"X-Fragment": "1"})
    assert page.status_code == 200
    assert "<h2>Progress</h2>" in page.text
    assert "phase" in page.text
    assert "&quot;done&quot;" in page.text or '"done"' in page.text
