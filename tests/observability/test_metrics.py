"""Prometheus metrics: counted in process, and scraped from a real worker over HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from crash.fleet_app import STEPS, fleet_job
from resumable import Engine, Retry, current_run, step, workflow
from resumable.errors import BudgetExceeded, WorkflowFailed
from resumable.observability import Metrics
from resumable.stores.protocol import RunListing
from resumable.testing import FakeClock

TESTS = Path(__file__).parent.parent
CRASH_DIR = TESTS / "crash"
ATTEMPTS: dict[str, int] = {}
BREAK_LAST = {"on": True}


@step(retry=Retry(attempts=3, initial_delay=0.0, jitter=0.0))
async def flaky(key: str) -> str:
    ATTEMPTS[key] = ATTEMPTS.get(key, 0) + 1
    if ATTEMPTS[key] < 3:
        raise ValueError("not yet")
    return key


@step
async def last(x: str) -> str:
    if BREAK_LAST["on"]:
        raise KeyError("broken")
    return x * 2


@workflow(name="metered.flow")
async def metered(key: str) -> str:
    first = await flaky(key)
    return await last(first)


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(
    found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


async def test_metrics_count_attempts_retries_replays_and_writes_as_the_journal_shows() -> (
    None
):
    metrics = Metrics()
    registry = CollectorRegistry()
    registry.register(metrics)
    clock = FakeClock()
    async with Engine("memory://", observers=[metrics], clock=clock) as engine:
        BREAK_LAST["on"] = True
        with pytest.raises(WorkflowFailed):
            await engine.run(metered, "m1", run_id="metered-run-1")
        BREAK_LAST["on"] = False
        assert await engine.run(metered, "m1", run_id="metered-run-1") == "m1m1"
        history = await engine.history("metered-run-1")
        clock.advance(7200)
        report = await engine.gc(older_than=timedelta(hours=1))
    found = samples(generate_latest(registry).decode())
    wf = "metered.flow"
    flaky_record = next(r for r in history if r.name == "flaky")
    assert flaky_record.attempts == 3
    assert (
        value(
            found,
            "resumable_steps_executed_total",
            workflow=wf,
            step="flaky",
            outcome="retrying",
        )
        == 2
    )
    assert (
        value(
            found,
            "resumable_steps_executed_total",
            workflow=wf,
            step="flaky",
            outcome="ok",
        )
        == 1
    )
    assert (
        value(
            found,
            "resumable_step_errors_total",
            workflow=wf,
            step="flaky",
            error="ValueError",
        )
        == 2
    )
    # `last` failed once (no retry), then succeeded in the second execution
    assert (
        value(
            found,
            "resumable_steps_executed_total",
            workflow=wf,
            step="last",
            outcome="failed",
        )
        == 1
    )
    assert (
        value(
            found,
            "resumable_step_errors_total",
            workflow=wf,
            step="last",
            error="KeyError",
        )
        == 1
    )
    assert (
        value(
            found,
            "resumable_steps_executed_total",
            workflow=wf,
            step="last",
            outcome="ok",
        )
        == 1
    )
    assert (
        value(found, "resumable_steps_replayed_total", workflow=wf, step="flaky") == 1
    )
    assert (
        value(found, "resumable_executions_total", workflow=wf, outcome="failed") == 1
    )
    assert (
        value(found, "resumable_executions_total", workflow=wf, outcome="succeeded")
        == 1
    )
    assert value(found, "resumable_resume_seconds_count", workflow=wf) == 1
    # every attempt's record was committed: 3 of flaky, 2 of last, 1 ledger entry
    assert (
        value(found, "resumable_checkpoint_writes_total", store="memory", outcome="ok")
        == 6
    )
    assert value(found, "resumable_checkpoint_write_seconds_count", store="memory") == 6
    assert value(found, "resumable_checkpoint_write_bytes_total", store="memory") > 0
    assert report.runs == 1
    assert value(found, "resumable_gc_deleted_total", kind="runs") == 1
    assert "metered-run-1" not in generate_latest(registry).decode()  # no run ids


def test_the_alert_and_dashboard_names_exist_in_the_exporter() -> None:
    from resumable.observability.metrics import METRIC_NAMES

    registry = CollectorRegistry()
    registry.register(Metrics())
    exposed = {
        sample_name
        for family in registry.collect()
        for sample_name in {
            family.name + suffix
            for suffix in ("", "_total", "_bucket", "_sum", "_count")
        }
    }
    assert exposed >= METRIC_NAMES


def spawn_worker(url: str, log: Path, output: Path) -> subprocess.Popen[bytes]:
    with output.open("wb") as sink:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "resumable.cli",
                "--log-format",
                "json",
                "--log-level",
                "INFO",
                "worker",
                "--store",
                url,
                "--app",
                "fleet_app",
                "--concurrency",
                "4",
                "--traces",
                "--metrics-port",
                "0",
                "--lease-ttl",
                "1",
            ],
            env={**os.environ, "FLEET_LOG": str(log), "PYTHONPATH": str(CRASH_DIR)},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )


async def test_a_real_worker_serves_metrics_that_match_the_journal(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'scraped.db'}?durability=normal"
    runs = 12
    async with Engine(url) as engine:
        for run in range(runs):
            await engine.enqueue(fleet_job, run, queue="fleet", run_id=f"scraped-{run}")
        out = tmp_path / "worker.out"
        worker = spawn_worker(url, tmp_path / "effects.log", out)
        try:
            base = await _endpoint(worker, out)
            deadline = time.monotonic() + 60
            while len(await engine.runs(status="succeeded", limit=runs + 1)) < runs:
                assert time.monotonic() < deadline, out.read_text()
                await asyncio.sleep(0.05)
            with urllib.request.urlopen(f"{base}/healthz", timeout=10) as answer:  # noqa: S310 - loopback
                assert answer.status == 200
                assert json.loads(answer.read()) == {
                    "store": "ok",
                    "late_lease_renewals": 0,
                    "lease_renewals": "ok",
                }
            text = await asyncio.to_thread(_get, f"{base}/metrics")
        finally:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=30) == 0, out.read_text()
        journal_ok = 0
        for run in range(runs):
            journal_ok += sum(
                1 for s in await engine.history(f"scraped-{run}") if s.status == "ok"
            )
    found = samples(text)
    assert journal_ok == runs * STEPS
    assert (
        value(
            found,
            "resumable_steps_executed_total",
            workflow="fleet.job",
            step="fleet_step",
            outcome="ok",
        )
        == journal_ok
    )
    assert (
        value(
            found,
            "resumable_executions_total",
            workflow="fleet.job",
            outcome="succeeded",
        )
        == runs
    )
    assert value(found, "resumable_runs_claimed_total", queue="fleet") == runs
    assert value(found, "resumable_queue_wait_seconds_count", queue="fleet") == runs
    assert (
        value(found, "resumable_checkpoint_writes_total", store="sqlite", outcome="ok")
        == journal_ok
    )
    assert value(found, "resumable_runs", status="queued") == 0
    assert value(found, "resumable_runs", status="running") == 0
    assert "scraped-" not in text  # run ids are never labels
    logs = [
        json.loads(line)
        for line in out.read_text().splitlines()
        if line.startswith("{")
    ]
    ended = [entry for entry in logs if entry["message"].endswith("succeeded")]
    assert {entry["run_id"] for entry in ended} == {
        f"scraped-{run}" for run in range(runs)
    }
    assert all(entry["logger"] == "resumable.runs" for entry in ended)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 - loopback
        assert answer.status == 200
        return str(answer.read().decode())


async def _endpoint(worker: subprocess.Popen[bytes], out: Path) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert worker.poll() is None, out.read_text()
        for line in out.read_text().splitlines():
            if line.startswith("metrics on "):
                return line.split()[2].removesuffix("/metrics")
        await asyncio.sleep(0.05)
    raise AssertionError(
        f"the worker never said where its metrics are: {out.read_text()}"
    )


@step
async def spend(i: int) -> int:
    current_run().record_usage(
        model="gpt-5-mini", provider="openai", input_tokens=80, output_tokens=20
    )
    return i


@workflow(name="metered.budget", budget_tokens=150)
async def budgeted() -> int:
    return sum([await spend(i) for i in range(5)])


async def test_a_budget_stop_and_the_tokens_spent_are_counted() -> None:
    metrics = Metrics()
    async with Engine("memory://", observers=[metrics]) as engine:
        with pytest.raises(BudgetExceeded):
            await engine.run(budgeted, run_id="over-budget")
        ledger = await engine.ledger("over-budget")
    wf = "metered.budget"
    assert metrics.value("resumable_budget_stops", workflow=wf) == 1
    assert metrics.value("resumable_executions", workflow=wf, outcome="failed") == 1
    assert (
        metrics.value("resumable_run_failures", workflow=wf, error="BudgetExceeded")
        == 1
    )
    labels = {"workflow": wf, "model": "gpt-5-mini", "source": "incurred"}
    assert metrics.value("resumable_llm_tokens", direction="input", **labels) == (
        ledger.incurred.input_tokens
    )
    assert metrics.value("resumable_llm_tokens", direction="output", **labels) == (
        ledger.incurred.output_tokens
    )
    assert ledger.incurred.calls == 2  # the third step was refused before it ran


@step
async def _nothing(i: int) -> int:
    return i


@workflow(name="metered.gauged")
async def _gauged(i: int) -> int:
    return await _nothing(i)


async def test_the_runs_gauges_count_the_store_by_status_and_queue(
    engine: Engine,
) -> None:
    """One count query per scrape, on every store: queued by queue, finished left out."""
    for i in range(3):
        await engine.enqueue(_gauged, i, queue="docs", run_id=f"gauged-docs-{i}")
    await engine.enqueue(_gauged, 9, queue="mail", run_id="gauged-mail")
    await engine.run(_gauged, 5, run_id="gauged-done")  # succeeded: not counted
    metrics = Metrics()
    registry = CollectorRegistry()
    registry.register(metrics)
    store = engine.store
    assert isinstance(store, RunListing)
    await metrics.refresh_runs(store)
    found = samples(generate_latest(registry).decode())
    assert value(found, "resumable_runs", status="queued") == 4
    assert value(found, "resumable_runs", status="failed") == 0
    assert value(found, "resumable_queue_depth", queue="docs") == 3
    assert value(found, "resumable_queue_depth", queue="mail") == 1
