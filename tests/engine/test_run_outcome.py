"""`Engine.get` says what happened: a failed run's error, its input, result, wake time."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from resumable import Engine, WorkflowFailed, sleep, step, workflow
from resumable._engine.clock import deadline_text, moment_text
from resumable.stores.protocol import Store
from resumable.testing import FakeClock


@step(name="tests.outcome.fetch")
async def fetch(x: str) -> str:
    return x.upper()


@step(name="tests.outcome.publish")
async def publish(x: str) -> str:
    raise ConnectionError(f"cannot publish {x}")


@workflow(name="tests.outcome.own_bug")
async def own_bug(topic: str, *, tone: str = "dry") -> str:
    text = await fetch(topic)
    raise ValueError(f"bad topic {text} ({tone})")


@workflow(name="tests.outcome.step_fails")
async def step_fails(topic: str) -> str:
    return await publish(await fetch(topic))


@workflow(name="tests.outcome.napper")
async def napper(topic: str) -> str:
    await sleep(3600)
    return await fetch(topic)


async def test_a_run_failed_by_its_own_code_shows_the_error_and_its_input(
    store: Store,
) -> None:
    engine = Engine(store)
    with pytest.raises(WorkflowFailed, match="resumable show bug"):
        await engine.run(own_bug, "llm", tone="wry", run_id="bug")
    run = await engine.get("bug")
    assert (
        run.error
        == "ValueError: bad topic LLM (wry) (raised by the workflow's own code)"
    )
    assert run.error_traceback is not None
    assert "raise ValueError" in run.error_traceback
    assert run.input == {"args": ["llm"], "kwargs": {"tone": "wry"}}
    assert run.result is None
    listed = await engine.runs(status="failed")
    assert [r.error for r in listed] == [None]  # listings decode nothing


async def test_a_run_failed_by_a_step_names_the_step(store: Store) -> None:
    engine = Engine(store)
    with pytest.raises(WorkflowFailed, match="resumable show stepfail"):
        await engine.run(step_fails, "llm", run_id="stepfail")
    run = await engine.get("stepfail")
    assert run.error == (
        "ConnectionError: cannot publish LLM "
        "(in step #2 'tests.outcome.publish' after 1 attempt)"
    )


async def test_a_sleeping_run_shows_when_it_wakes_and_a_finished_one_its_result(
    store: Store,
) -> None:
    clock = FakeClock()
    engine = Engine(store, clock=clock)
    started = datetime.fromtimestamp(clock.now_ms() / 1000, UTC)
    task = asyncio.ensure_future(engine.run(napper, "llm", run_id="nap"))
    while (run := await store.get_run("nap")) is None or run.status != "sleeping":
        await asyncio.sleep(0.001)
    view = await engine.get("nap")
    assert view.wake_at is not None
    assert timedelta(hours=1) <= view.wake_at - started <= timedelta(hours=1, seconds=1)
    clock.advance(3600)
    assert await task == "LLM"
    done = await engine.get("nap")
    assert (done.status, done.result) == ("succeeded", "LLM")


def test_times_read_as_dates_with_how_far_away_they_are() -> None:
    now = datetime(2026, 11, 27, 21, 0, tzinfo=UTC)
    assert moment_text(now + timedelta(minutes=4), now) == (
        "2026-11-27 21:04:00 UTC (in 4 min)"
    )
    assert moment_text(now - timedelta(hours=3), now).endswith("(3.0 h ago)")
    assert moment_text(now + timedelta(days=3), now).endswith("(in 3.0 days)")
    at_ms = int((now + timedelta(seconds=30)).timestamp() * 1000)
    assert deadline_text(at_ms, now) == "until 2026-11-27 21:00:30 UTC (in 30 s)"
    assert deadline_text(None, now) == "no timeout"
    assert deadline_text("text", now) is None
