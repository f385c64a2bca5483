"""Structured logs with the run's fields, and the worker's /healthz."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

import pytest

from resumable import Engine, Retry, step, workflow
from resumable.errors import WorkflowFailed
from resumable.observability import JsonFormatter, Metrics, MetricsEndpoint
from resumable.stores import create_store

PRIVATE_VALUE = "user-42 private note"


@step(retry=Retry(attempts=2, initial_delay=0.0, jitter=0.0))
async def leaky(token: str) -> str:
    raise ValueError(f"the provider refused {token}")


@workflow(name="logged.flow")
async def logged(token: str) -> str:
    return await leaky(token)


async def test_step_failures_are_logged_with_run_fields_and_without_their_data(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="resumable")
    async with Engine("memory://") as engine:
        with pytest.raises(WorkflowFailed):
            await engine.run(logged, PRIVATE_VALUE, run_id="logged-run")
    mine = [r for r in caplog.records if getattr(r, "run_id", None) == "logged-run"]
    retried, exhausted = (r for r in mine if r.name == "resumable.steps")
    assert (retried.levelno, retried.seq, retried.step, retried.attempt) == (  # type: ignore[attr-defined]
        logging.INFO,
        1,
        "leaky",
        1,
    )
    assert (exhausted.levelno, exhausted.attempt) == (logging.WARNING, 2)  # type: ignore[attr-defined]
    ended = [r for r in mine if r.name == "resumable.runs"]
    assert [r.getMessage() for r in ended] == ["run 'logged-run' failed"]
    formatter = JsonFormatter()
    for record in caplog.records:
        line = formatter.format(record)
        assert PRIVATE_VALUE not in line
    entry = json.loads(formatter.format(exhausted))
    assert entry["run_id"] == "logged-run"
    assert entry["workflow"] == "logged.flow"
    assert (entry["seq"], entry["step"], entry["attempt"]) == (1, "leaky", 2)
    assert entry["level"] == "warning"
    assert entry["logger"] == "resumable.steps"


async def _get(port: int, path: str) -> tuple[int, dict[str, object]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    answer = await reader.read()
    writer.close()
    head, body = answer.split(b"\r\n\r\n", 1)
    status = int(head.split()[1])
    return status, json.loads(body) if path == "/healthz" else {}


async def test_healthz_fails_on_late_lease_renewals_and_an_unreachable_store(
    tmp_path: Path,
) -> None:
    metrics = Metrics()
    engine = Engine(f"sqlite:///{tmp_path / 'health.db'}", observers=[metrics])
    await engine.runs()  # opens the store
    endpoint = MetricsEndpoint(metrics, engine.store)
    port = await endpoint.start(0)
    try:
        assert await _get(port, "/healthz") == (
            200,
            {"store": "ok", "late_lease_renewals": 0, "lease_renewals": "ok"},
        )
        assert (await _get(port, "/nowhere"))[0] == 404
        metrics.late_renewals.append(time.monotonic())
        status, report = await _get(port, "/healthz")
        assert (status, report["lease_renewals"]) == (503, "late")
        metrics.late_renewals.clear()
        assert (await _get(port, "/healthz"))[0] == 200
    finally:
        await endpoint.close()
        await engine.close()
    # nothing listens on port 1: the store cannot answer
    unreachable = create_store("redis://127.0.0.1:1/0")
    endpoint = MetricsEndpoint(metrics, unreachable)
    port = await endpoint.start(0)
    try:
        status, report = await _get(port, "/healthz")
    finally:
        await endpoint.close()
        await unreachable.close()
    assert status == 503
    assert str(report["store"]).startswith("unreachable")
