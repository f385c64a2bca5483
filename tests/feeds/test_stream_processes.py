"""Streams read from another process: live, from an offset, and across a SIGKILL."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from conftest import store_url
from resumable import Engine, RunNotFound, StreamEvent
from resumable.simulator import SimulatedProvider
from resumable.stores import create_store

APP = Path(__file__).with_name("feeds_app.py")
BACKENDS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]
WORDS = "200"


def spawn(
    url: str, provider: SimulatedProvider, out: Path, **env: str
) -> subprocess.Popen[bytes]:
    with out.open("ab") as sink:
        return subprocess.Popen(
            [sys.executable, str(APP), url, "chat", "stream", WORDS],
            env={**os.environ, "LLM_BASE_URL": provider.base_url, **env},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )


@asynccontextmanager
async def engine_on(url: str) -> AsyncIterator[Engine]:
    engine = Engine(url)
    with pytest.raises(RunNotFound):  # opens (and migrates) the store before the child
        await engine.get("chat")
    try:
        yield engine
    finally:
        await engine.close()
        store = create_store(url)
        drop = getattr(store, "drop", None)
        if drop is not None:
            await drop()
        await store.close()


async def run_started(
    engine: Engine, child: subprocess.Popen[bytes], out: Path
) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            await engine.get("chat")
            return
        except RunNotFound:
            assert child.poll() is None, out.read_text()
            assert time.monotonic() < deadline, out.read_text()
            await asyncio.sleep(0.01)


def chunks_of(events: list[StreamEvent], attempt: int) -> str:
    return "".join(
        e.value for e in events if e.kind == "chunk" and e.attempt == attempt
    )


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_stream_is_read_live_from_another_process_then_from_an_offset(
    backend: str, tmp_path: Path
) -> None:
    url, out = store_url(backend, tmp_path), tmp_path / "child.out"
    async with engine_on(url) as engine:
        with SimulatedProvider() as provider:
            child = spawn(url, provider, out, CHUNK_SLEEP_S="0.05")
            await run_started(engine, child, out)
            live: list[StreamEvent] = []
            journaled_when_first_seen = None
            async for event in engine.stream("chat", 1, poll_s=0.01):
                if event.kind == "chunk" and journaled_when_first_seen is None:
                    journaled_when_first_seen = len(await engine.history("chat"))
                live.append(event)
            assert child.wait(timeout=30) == 0, out.read_text()
        assert journaled_when_first_seen == 0  # read while the step was running
        text = (await engine.history("chat"))[0]
        assert text.status == "ok"
        result = (await engine.get("chat")).result
        assert chunks_of(live, 1) == result
        assert (live[0].kind, live[-1].kind) == ("attempt", "end")
        # a reader that reconnects after the run: from the offset it had reached
        middle = live[len(live) // 2].offset
        rest = [e async for e in engine.stream("chat", 1, since=middle)]
        assert rest == [e for e in live if e.offset > middle]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_stream_killed_midway_is_retried_as_attempt_2_and_replayed_from_the_store(
    backend: str, tmp_path: Path
) -> None:
    url, out = store_url(backend, tmp_path), tmp_path / "child.out"
    marker = tmp_path / "paused"
    async with engine_on(url) as engine:
        with SimulatedProvider() as provider:
            child = spawn(url, provider, out, PAUSE_FILE=str(marker), PAUSE_AT="4")
            children: list[subprocess.Popen[bytes]] = [child]
            reader: asyncio.Task[None] | None = None
            try:
                await run_started(engine, child, out)
                seen: list[StreamEvent] = []

                async def read() -> None:
                    async for event in engine.stream("chat", 1, poll_s=0.01):
                        seen.append(event)

                reader = asyncio.create_task(read())  # follows across the kill
                deadline = time.monotonic() + 30
                while not marker.exists() or len(seen) < 5:  # attempt 1's 4 chunks
                    assert child.poll() is None, out.read_text()
                    assert not reader.done(), reader  # a reader that died says why
                    assert time.monotonic() < deadline, (seen, out.read_text())
                    await asyncio.sleep(0.01)
                child.send_signal(signal.SIGKILL)
                child.wait()
                assert provider.count() == 1

                again = spawn(
                    url, provider, out
                )  # takes the run over once the lease ends
                children.append(again)
                assert again.wait(timeout=60) == 0, out.read_text()
                await asyncio.wait_for(reader, timeout=30)
                assert provider.count() == 2  # the in-flight step ran twice, no more

                result = (await engine.get("chat")).result
                assert [(e.kind, e.attempt) for e in seen if e.kind != "chunk"] == [
                    ("attempt", 1),
                    ("attempt", 2),
                    ("end", 2),
                ]
                assert len([e for e in seen if e.attempt == 1]) == 5
                assert chunks_of(seen, 2) == result  # assembled once, from attempt 2
                assert [e.offset for e in seen] == sorted(e.offset for e in seen)

                # a third execution replays the journaled value: no call to the model,
                # and the stream served to readers is the recorded one
                last = spawn(url, provider, out)
                children.append(last)
                assert last.wait(timeout=30) == 0, out.read_text()
                assert provider.count() == 2
                replayed = [e async for e in engine.stream("chat", 1)]
                assert replayed == seen
            finally:  # a failure leaves no process or reader behind for the next test
                if reader is not None:
                    reader.cancel()
                    with contextlib.suppress(BaseException):
                        await reader
                for process in children:
                    if process.poll() is None:
                        process.kill()
                    process.wait()
