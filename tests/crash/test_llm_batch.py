"""A 200-item LLM batch SIGKILLed twice and resumed, judged by the provider's log."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from resumable import Engine
from resumable.simulator import FaultPlan, SimulatedProvider

APP = Path(__file__).with_name("llm_app.py")
CONCURRENCY = 8


def spawn(db: Path, provider: SimulatedProvider, out: Path) -> subprocess.Popen[bytes]:
    with out.open("ab") as sink:
        return subprocess.Popen(
            [sys.executable, str(APP), str(db)],
            env={**os.environ, "LLM_BASE_URL": provider.base_url},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )


async def test_batch_killed_twice_calls_each_item_once_but_the_in_flight(
    tmp_path: Path,
) -> None:
    db, out = tmp_path / "batch.db", tmp_path / "child.out"
    faults = FaultPlan(rate_limit_p=0.05, retry_after_ms=20, seed=3)
    with SimulatedProvider(latency_s=0.02, jitter_s=0.02, faults=faults) as provider:
        for kill_after in (60, 130):
            child = spawn(db, provider, out)
            deadline = time.monotonic() + 60
            while (
                provider.count(status=200) < kill_after and time.monotonic() < deadline
            ):
                assert child.poll() is None, out.read_text()
                time.sleep(0.002)
            child.send_signal(signal.SIGKILL)
            child.wait()
        last = spawn(db, provider, out)
        assert last.wait(timeout=120) == 0, out.read_text()
        log = provider.requests()

    answered = [entry for entry in log if entry.status == 200]
    per_item = collections.Counter(entry.prompt_digest for entry in answered)
    assert len(per_item) == 200  # every item was asked
    extra = sum(count - 1 for count in per_item.values())
    assert extra <= 2 * CONCURRENCY  # only calls in flight at a kill were made twice
    assert any(entry.status == 429 for entry in log)  # and rate limits were retried

    engine = Engine(f"sqlite:///{db}")
    ledger = await engine.ledger("batch")
    assert len(ledger.executions) == 3
    final = ledger.executions[-1]
    once = {
        entry.prompt_digest: entry.usage for entry in answered
    }  # a crash-free run's calls
    crash_free_tokens = sum(u.total_tokens for u in once.values() if u is not None)
    assert final.incurred.calls + final.reused.calls == 200
    assert final.incurred.total_tokens + final.reused.total_tokens == crash_free_tokens
    assert ledger.incurred.calls == 200  # each item's committed call, recorded once
    assert ledger.unpriced_models == ()
    await engine.close()
