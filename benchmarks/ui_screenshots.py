"""Screenshots of the dashboard's main pages for docs/img, in Debian's Chromium.

Builds a small store (a crashed-and-resumed run, a failed one, a fork, a run that
retried, slept and waited for input, a chat thread, queued and leased runs), serves the dashboard on 127.0.0.1 and photographs each page with the same
browser the tests use: `.venv/bin/python benchmarks/ui_screenshots.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import uvicorn
from playwright.sync_api import sync_playwright

from resumable import (
    Engine,
    Retry,
    WorkflowFailed,
    sleep,
    step,
    wait_for,
    workflow,
)
from resumable.ui.app import create_app

OUT = Path(__file__).parent.parent / "docs" / "img"
LEASE_TTL_S = 0.3


@step
async def fetch(n: int) -> dict[str, object]:
    return {"n": n, "text": f"doc {n}"}


@step
async def summarize(n: int) -> str:
    if os.environ.get("CRASH_AT_SUMMARY") == "1":
        os._exit(137)  # dies mid-step, as a SIGKILL or OOM would
    return f"summary {n}"


@workflow
async def pipeline(n: int) -> str:
    await fetch(n)
    await fetch(n + 1)
    return await summarize(n)


@step
async def call_model(prompt: str) -> str:
    raise TimeoutError(f"provider timed out on {prompt!r}")


@workflow
async def failing(prompt: str) -> str:
    await fetch(0)
    return await call_model(prompt)


_REFUSALS: dict[str, int] = {}


@step(retry=Retry(attempts=3, initial_delay=0.2, jitter=0.0, on=(ConnectionError,)))
async def draft(topic: str) -> str:
    seen = _REFUSALS.get(topic, 0)
    _REFUSALS[topic] = seen + 1
    if seen < 2:
        raise ConnectionError("429 rate limited")
    return f"draft on {topic}"


@workflow
async def reviewed(topic: str) -> str:
    text = await draft(topic)
    await sleep(0.3)
    verdict = await wait_for("approval")
    return f"{text}: {verdict}"


@workflow
async def team(topic: str) -> str:
    await fetch(0)
    return await pipeline(len(topic))


async def review(engine: Engine, run_id: str) -> None:
    """A run that retries a step, sleeps, then waits until an input is sent."""
    handle = await engine.start(reviewed, "durability", run_id=run_id)
    for _ in range(1000):  # polls the store: the run waits in its own task
        if (await engine.get(run_id)).status == "waiting":
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)  # a visible wait before the input
    await engine.send(run_id, "approval", {"approved": True, "by": "ana"})
    await handle.result()


async def queues(engine: Engine) -> None:
    """Queued runs, and some leased by two workers (the workers page)."""
    for i in range(9):
        queue = "embeddings" if i % 3 else "summaries"
        await engine.enqueue(pipeline, i, run_id=f"queued/{i:02d}", queue=queue)
    for i, owner in (
        (1, "worker-a@host-1"),
        (2, "worker-a@host-1"),
        (4, "worker-b@host-2"),
    ):
        await engine.store.acquire_lease(
            f"queued/{i:02d}",
            owner=owner,
            now_ms=engine.clock.now_ms(),
            ttl_ms=3_600_000,
        )


async def populate(url: str) -> None:
    async with Engine(url) as engine:
        for i in range(12):
            await engine.run(pipeline, i, run_id=f"batch-2026-11/{i:03d}")
        for i in range(3):
            with contextlib.suppress(WorkflowFailed):  # meant to fail
                await engine.run(
                    failing, f"chapter {i}", run_id=f"batch-2026-11/err-{i}"
                )
        await engine.fork(
            "batch-2026-11/003", at_step=2, run_id="batch-2026-11/003-fork"
        )
        await engine.run(pipeline, 3, run_id="batch-2026-11/003-fork")
        await engine.fork(
            "batch-2026-11/003", at_step=1, run_id="batch-2026-11/003-fork-b"
        )
        await engine.run(team, "lineage", run_id="batch-2026-11/team")
        await engine.fork(
            "batch-2026-11/team/2", at_step=1, run_id="batch-2026-11/team/2-retry"
        )
        await review(engine, "review/ch-4")
        await queues(engine)
        for n in range(3):
            await engine.save_state(f"notes-{n}", {"draft": n}, label=f"v{n}")
        await engine.save_state(
            "support-chat-7",
            {
                "messages": [
                    {"role": "user", "content": "My export failed at step 37, why?"},
                    {
                        "role": "assistant",
                        "content": "Step 37 hit a rate limit; resume replays 1-36 for free.",
                    },
                ]
            },
            label="turn 1",
        )


async def run_pipeline(url: str, run_id: str) -> None:
    async with Engine(url, lease_ttl_s=LEASE_TTL_S) as engine:
        await engine.run(pipeline, 7, run_id=run_id)


def crash_and_resume(url: str, run_id: str) -> None:
    """A run whose process dies in step 3, then resumed here: 2 replayed, 1 executed."""
    env = {**os.environ, "CRASH_AT_SUMMARY": "1"}
    subprocess.run(
        [sys.executable, __file__, "--crash", url, run_id], env=env, check=False
    )
    time.sleep(LEASE_TTL_S)  # the dead process's lease runs out
    asyncio.run(run_pipeline(url, run_id))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/shots.db"
        asyncio.run(populate(url))
        crash_and_resume(url, "batch-2026-11/crashed")
        engine = Engine(url)
        server = uvicorn.Server(
            uvicorn.Config(
                create_app(engine), host="127.0.0.1", port=0, log_level="warning"
            )
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.01)
        base = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
        pages = {
            "ui-runs": "/",
            "ui-run": "/run?id=batch-2026-11/crashed",
            "ui-run-failed": "/run?id=batch-2026-11/err-0",
            "ui-run-waits": "/run?id=review/ch-4",
            "ui-lineage": "/lineage?id=batch-2026-11/team/2",
            "ui-diff": "/diff?a=batch-2026-11/003&b=batch-2026-11/003-fork",
            "ui-thread": "/thread?id=support-chat-7",
            "ui-threads": "/threads",
            "ui-workers": "/workers",
        }
        OUT.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
            page = browser.new_page(viewport={"width": 1200, "height": 760})
            for name, path in pages.items():
                page.goto(base + path)
                page.screenshot(path=str(OUT / f"{name}.png"))
                print(f"docs/img/{name}.png")
            browser.close()
        server.should_exit = True
        thread.join()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--crash"]:
        asyncio.run(run_pipeline(sys.argv[2], sys.argv[3]))
    else:
        main()
