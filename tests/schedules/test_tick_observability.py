"""A span per tick, the run it records linked to it; the extra named when missing."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from resumable import Engine, workflow
from resumable.observability import Tracing
from resumable.testing import FakeClock

START = int(datetime(2026, 11, 28, 10, 1, tzinfo=UTC).timestamp() * 1000)


@workflow(name="tests.schedules.traced")
async def traced() -> str:
    return "done"


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


async def test_each_tick_has_a_span_and_its_run_continues_the_trace(
    tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    clock = FakeClock(START)
    async with Engine(
        f"sqlite:///{tmp_path / 's.db'}", clock=clock, observers=[Tracing(provider)]
    ) as engine:
        engine.schedule(traced, "*/15 * * * *", name="traced")
        stop = asyncio.Event()
        task = asyncio.ensure_future(engine.worker(poll_s=0.02).run(stop=stop))
        while not await engine.schedules():
            await asyncio.sleep(0.02)
        clock.advance(15 * 60)
        run_id = "sched:traced:2026-11-28T10:15:00Z"
        async with asyncio.timeout(20):
            while not [
                r
                for r in await engine.runs(workflow="tests.schedules.traced")
                if r.run_id == run_id and r.status == "succeeded"
            ]:
                await asyncio.sleep(0.02)
        stop.set()
        await task
    finished = exporter.get_finished_spans()
    (tick,) = [s for s in finished if s.name == "resumable.tick traced"]
    assert tick.attributes is not None
    assert tick.attributes["resumable.run_id"] == run_id
    assert tick.attributes["resumable.tick_created"] is True
    assert tick.attributes["resumable.tick_late"] is False
    (execution,) = [s for s in finished if s.name.startswith("resumable.run ")]
    assert execution.context.trace_id == tick.context.trace_id


def test_without_croniter_declaring_a_schedule_names_the_extra() -> None:
    script = (
        "import sys; sys.modules['croniter'] = None\n"
        "from resumable import workflow\n"
        "@workflow(name='x', schedule='* * * * *')\n"
        "async def x() -> None: ...\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "pip install 'resumable[schedule]'" in done.stderr
    # and the package imports without it
    plain = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['croniter'] = None; import resumable",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert plain.returncode == 0, plain.stderr
