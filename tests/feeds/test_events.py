"""Progress events: publish in a run, read the latest values and follow them anywhere."""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

import resumable
from conftest import store_url
from resumable import (
    Engine,
    FeedEntryTooLarge,
    NotInRun,
    RunNotFound,
    step,
    wait_for,
    workflow,
)
from resumable.stores import create_store

APP = Path(__file__).with_name("feeds_app.py")


@step
async def embed(doc: str) -> int:
    await resumable.publish("embedding", doc)
    return len(doc)


@workflow
async def index(docs: list[str]) -> int:
    total = 0
    for n, doc in enumerate(docs, 1):
        total += await embed(doc)
        await resumable.publish("progress", {"done": n, "of": len(docs)})
    return total


async def test_events_give_each_keys_latest_value_and_watch_gives_every_one(
    engine: Engine,
) -> None:
    assert await engine.run(index, ["a", "bb"], run_id="idx") == 3
    assert await engine.events("idx", "progress") == {"done": 2, "of": 2}
    assert await engine.events("idx", "missing") is None
    assert await engine.events("idx") == {
        "embedding": "bb",
        "progress": {"done": 2, "of": 2},
    }
    seen = [(e.key, e.value, e.offset) async for e in engine.watch("idx")]
    assert seen == [
        ("embedding", "a", 1),
        ("progress", {"done": 1, "of": 2}, 2),
        ("embedding", "bb", 3),
        ("progress", {"done": 2, "of": 2}, 4),
    ]
    later = [e.offset async for e in engine.watch("idx", after=2)]
    assert later == [3, 4]


@workflow
async def approve_then_finish(n: int) -> str:
    await resumable.publish("phase", "drafted")
    answer = await wait_for("approval")
    await resumable.publish("phase", f"approved {answer}")
    return "done"


async def test_a_resumed_run_publishes_again_nothing_it_had_published(
    engine: Engine,
) -> None:
    handle = await engine.start(approve_then_finish, 1, run_id="hitl")
    while (await engine.get("hitl")).status != "waiting":
        await asyncio.sleep(0.01)
    assert await engine.events("hitl") == {"phase": "drafted"}
    await engine.send("hitl", "approval", "yes")
    assert await engine.resume("hitl") == "done"
    del handle
    values = [e.value async for e in engine.watch("hitl")]
    # the body ran twice from the top: "drafted" was published once
    assert values == ["drafted", "approved yes"]


async def test_publish_outside_a_run_and_a_value_too_large_are_typed_errors(
    engine: Engine,
) -> None:
    with pytest.raises(NotInRun):
        await resumable.publish("k", 1)

    @workflow(name="too_large_event")
    async def too_large() -> None:
        await resumable.publish("blob", secrets.token_urlsafe(100_000))

    with pytest.raises(FeedEntryTooLarge, match="past the feed's limit"):
        await engine.run(too_large, run_id="big")
    with pytest.raises(RunNotFound):
        await engine.events("nobody")


@pytest.mark.parametrize(
    "backend",
    [
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ],
)
async def test_a_reader_in_another_process_sees_every_value_in_order(
    backend: str, tmp_path: Path
) -> None:
    url = store_url(backend, tmp_path)
    out = tmp_path / "child.out"
    engine = Engine(url)
    with pytest.raises(RunNotFound):  # opens (and migrates) the store before the child
        await engine.get("live")
    with out.open("wb") as sink:
        child = subprocess.Popen(
            [sys.executable, str(APP), url, "live", "publish", "30"],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=os.environ,
        )
    try:
        deadline = time.monotonic() + 30
        while True:  # the child creates the run
            try:
                await engine.get("live")
                break
            except RunNotFound:
                assert child.poll() is None, out.read_text()
                assert time.monotonic() < deadline, out.read_text()
                await asyncio.sleep(0.01)
        seen = []
        async for event in engine.watch("live", poll_s=0.01):
            seen.append(event.value)
            if len(seen) == 1:  # live: the run was still going when we saw it
                assert (await engine.get("live")).status == "running"
        assert seen == list(range(30))
        assert child.wait(timeout=30) == 0, out.read_text()
    finally:
        await engine.close()
        store = create_store(url)
        drop = getattr(store, "drop", None)
        if drop is not None:
            await drop()
        await store.close()
