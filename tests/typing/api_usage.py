"""User-style code that mypy and pyright check and that never runs."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import resumable
from resumable import (
    CheckReport,
    Engine,
    Retry,
    RunCheck,
    current_run,
    deprecate_patch,
    patched,
    step,
    workflow,
)


@step(retry=Retry(attempts=3, on=(TimeoutError,)))
async def fetch(url: str) -> bytes:
    return url.encode()


@step
def parse(raw: bytes) -> int:
    return len(raw)


@workflow
async def pipeline(urls: list[str]) -> list[bytes]:
    return list(await asyncio.gather(*(fetch(u) for u in urls)))


@workflow(name="sync-pipeline")
def sync_pipeline(raw: bytes) -> int:
    return parse(raw)


@workflow(name="versioned", version="2")
async def versioned(url: str) -> bytes:
    deprecate_patch("old-fix")
    if await patched("new-fetch"):
        return await fetch(url + "?v=2")
    return await fetch(url)


@workflow(name="drawing")
async def drawing(url: str) -> str:
    started: datetime = resumable.now()  # recorded: the same on every replay
    key: uuid.UUID = resumable.uuid4()
    chance: float = resumable.random()
    return f"{url} {started:%H} {key} {chance}"


@workflow(name="sync-versioned", version="2")
def sync_versioned(raw: bytes) -> int:
    return parse(raw) if patched("parse-twice") else 0


async def use() -> None:
    engine = Engine()
    pages: list[bytes] = await engine.run(pipeline, ["a"], run_id="r")
    size: int = engine.run_sync(sync_pipeline, b"x")
    handle = await engine.start(pipeline, ["b"])
    await handle.result()
    key: str = current_run().idempotency_key
    async for record in engine.export(["r"], status=["failed", "succeeded"]):
        cost: float | None = record.cost_usd  # None: a call of the step is unpriced
        del cost
    shown = (await engine.history("r"))[0].view()
    state = await engine.view_state("thread-7")
    del shown, state
    report: CheckReport = await engine.check(status=["waiting"], version="1")
    breaking: tuple[RunCheck, ...] = report.breaking
    ok: bool = report.ok
    worker = engine.worker(versions=["2"])
    del pages, size, key, breaking, ok, worker


def crash_test_usage() -> None:
    from resumable.costmodel import Inputs, estimate, load_overheads, step_cost
    from resumable.pricing import PriceTable
    from resumable.testing import CrashReport, crash_test, record_effect

    report: CrashReport = crash_test(pipeline, ["a"], phases=("before-commit",))
    record_effect("email")
    boundaries: int = report.boundaries
    one = step_cost(PriceTable(), model="gpt-5-mini", input_tokens=1, output_tokens=1)
    inputs = Inputs(
        steps=(one,),
        failure_rate=0.01,
        overhead=load_overheads()["sqlite"],
        retention_days=30,
    )
    stored: float = estimate(inputs, 1000).storage_bytes_steady
    del boundaries, stored


@workflow(name="nightly", schedule="0 2 * * *", tz="Europe/Paris", catch_up=3)
async def nightly() -> str:
    return "ok"


async def schedule_usage() -> None:
    from resumable import Engine, Schedule, ScheduleView

    engine = Engine("memory://")
    declared: Schedule = engine.schedule(
        pipeline, "*/15 * * * *", tz="UTC", args=(["a"],), name="digest"
    )
    views: list[ScheduleView] = await engine.schedules()
    paused: ScheduleView = await engine.pause_schedule(declared.name)
    next_ms: tuple[int, ...] = (await engine.resume_schedule("digest")).next_ticks_ms
    del views, paused, next_ms


@step
async def streamed_text(question: str) -> AsyncIterator[str]:
    yield question


@step(name="streamed_numbers")
async def streamed_numbers(n: int) -> AsyncIterator[int]:
    yield n


@workflow
async def streaming(question: str) -> str:
    await resumable.publish("phase", {"started": True})
    text: str = await streamed_text(question)
    numbers: list[int] = await streamed_numbers(3)
    del numbers
    return text


async def feed_usage(engine: Engine) -> None:
    latest: dict[str, Any] = await engine.events("r")
    async for event in engine.watch("r", after=0):
        key: str = event.key
        offset: int = event.offset
        del key, offset
    async for piece in engine.stream("r", 1, since=0):
        kind: str = piece.kind
        attempt: int = piece.attempt
        del kind, attempt
    del latest
