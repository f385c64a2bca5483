"""Streaming steps: chunks in the feed as they come, the assembled value journaled."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Sequence

import pytest

from resumable import Engine, FeedEntryTooLarge, Retry, step, workflow
from resumable.observability import Metrics
from resumable.stores.memory import MemoryStore

calls: list[str] = []


@step
async def tokens(prompt: str, n: int) -> AsyncIterator[str]:
    calls.append(prompt)
    for i in range(n):
        yield f"{prompt}{i} "


@step
async def numbers(n: int) -> AsyncIterator[int]:
    for i in range(n):
        yield i


@workflow
async def talk(prompt: str, n: int) -> tuple[str, list[int]]:
    text = await tokens(prompt, n)
    return text, await numbers(3)


async def test_a_streamed_steps_chunks_are_read_back_and_its_value_is_assembled(
    engine: Engine,
) -> None:
    calls.clear()
    text, ints = await engine.run(talk, "w", 150, run_id="s")
    assert text == "".join(f"w{i} " for i in range(150))
    assert ints == [0, 1, 2]
    events = [e async for e in engine.stream("s", 1)]
    assert [(e.kind, e.attempt) for e in events[:2]] == [("attempt", 1), ("chunk", 1)]
    assert [e.value for e in events if e.kind == "chunk"] == [
        f"w{i} " for i in range(150)
    ]
    assert (events[-1].kind, events[-1].value) == ("end", True)
    assert [e.offset for e in events] == list(range(1, 153))
    # from an offset: what a reconnecting reader asks for
    rest = [e.value async for e in engine.stream("s", 1, since=100)]
    assert rest == [f"w{i} " for i in range(99, 150)] + [True]
    assert [e.value async for e in engine.stream("s", 2) if e.kind == "chunk"] == [
        0,
        1,
        2,
    ]
    # the journal holds the assembled value: a replay neither runs the step nor
    # streams anew
    assert (await engine.history("s"))[0].status == "ok"
    assert await engine.run(talk, "w", 150, run_id="s") == (text, ints)
    assert calls == ["w"]
    assert len([e async for e in engine.stream("s", 1)]) == 152


async def test_a_streaming_step_outside_a_run_returns_the_assembled_value() -> None:
    assert await tokens("x", 3) == "x0 x1 x2 "
    assert await numbers(2) == [0, 1]


failures: list[int] = []


@step(retry=Retry(attempts=2, initial_delay=0.0))
async def flaky(n: int) -> AsyncIterator[str]:
    for i in range(n):
        yield f"a{len(failures)}-{i} "
        if len(failures) == 0 and i == 2:
            failures.append(i)
            raise ValueError("dropped connection")


@workflow
async def retried() -> str:
    return await flaky(5)


async def test_a_retried_attempt_is_marked_and_readers_never_mix_attempts(
    engine: Engine,
) -> None:
    failures.clear()
    assert await engine.run(retried, run_id="r") == "".join(
        f"a1-{i} " for i in range(5)
    )
    events = [(e.kind, e.attempt, e.value) async for e in engine.stream("r", 1)]
    assert events == [
        ("attempt", 1, True),
        ("chunk", 1, "a0-0 "),
        ("chunk", 1, "a0-1 "),
        ("chunk", 1, "a0-2 "),
        ("end", 1, False),
        ("attempt", 2, True),
        *[("chunk", 2, f"a1-{i} ") for i in range(5)],
        ("end", 2, True),
    ]


@step
async def huge() -> AsyncIterator[bytes]:
    yield os.urandom(100_000)  # random: compression cannot shrink it
    await asyncio.sleep(0)


@workflow
async def too_big() -> bytes:
    return b"".join(await huge())


async def test_a_chunk_past_the_limit_fails_the_step_with_a_typed_error(
    engine: Engine,
) -> None:
    with pytest.raises(FeedEntryTooLarge, match="chunk 1 of the stream"):
        await engine.run(too_big, run_id="big")


async def test_metrics_count_feed_entries_by_kind_and_replays_add_none() -> None:
    metrics = Metrics()
    engine = Engine("memory://", observers=[metrics])
    calls.clear()
    await engine.run(talk, "m", 10, run_id="metered")
    wf = (await engine.get("metered")).workflow

    def counted(kind: str) -> float:
        return metrics.value("resumable_feed_entries", workflow=wf, kind=kind)

    # two streaming steps: an attempt entry each; 10 + 3 chunks and 2 end markers
    assert (counted("attempt"), counted("chunk")) == (2, 15)
    assert metrics.value("resumable_feed_bytes", workflow=wf, kind="chunk") > 0
    await engine.run(talk, "m", 10, run_id="metered")
    assert (counted("attempt"), counted("chunk")) == (2, 15)


class SlowFeed(MemoryStore):
    """The memory store; feed writes after the first held until the test lets go."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.writes = 0

    async def append_feed(
        self,
        run_id: str,
        channel: str,
        payloads: Sequence[bytes],
        *,
        now_ms: int,
        once_key: str | None = None,
    ) -> int | None:
        self.writes += 1
        if self.writes > 1:  # the attempt's opening entry goes; its chunks wait
            await self.gate.wait()
        return await super().append_feed(
            run_id, channel, payloads, now_ms=now_ms, once_key=once_key
        )


paused = asyncio.Event()


@step
async def then_pauses(n: int) -> AsyncIterator[str]:
    for i in range(n):
        yield f"t{i} "
        await asyncio.sleep(0)  # the first write starts, and waits at the gate
    await paused.wait()  # a model that stops sending for a while, mid-answer


@workflow
async def paused_talk(n: int) -> str:
    return await then_pauses(n)


async def test_chunks_queued_during_a_write_go_when_it_ends_not_with_the_next() -> None:
    # they waited for the next chunk: a model pausing mid-answer left what it had
    # sent unread until it went on (in CI: a reader waited 30 s for chunks 2-4)
    paused.clear()
    store = SlowFeed()
    async with Engine(store) as engine:
        running = asyncio.create_task(engine.run(paused_talk, 4, run_id="p"))
        await asyncio.sleep(0.05)  # the step has sent its 4 chunks and paused
        store.gate.set()
        deadline = asyncio.get_running_loop().time() + 5
        while True:
            seen = [e async for e in engine.stream("p", 1, follow=False)]
            if len([e for e in seen if e.kind == "chunk"]) == 4:
                break
            assert asyncio.get_running_loop().time() < deadline, seen
            await asyncio.sleep(0.01)
        assert not running.done()  # read while the step is still paused
        paused.set()
        assert await running == "t0 t1 t2 t3 "
