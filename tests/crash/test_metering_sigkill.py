"""Whatever a step returns, the ledger equals the provider's own log, across a SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from resumable import Engine
from resumable.simulator import SimulatedProvider

APP = Path(__file__).with_name("metering_app.py")


def spawn(
    db: Path, provider: SimulatedProvider, sdks: list[str], out: Path, **env: str
) -> subprocess.Popen[bytes]:
    with out.open("ab") as sink:
        return subprocess.Popen(
            [sys.executable, str(APP), str(db), ",".join(sdks), "metered"],
            env={**os.environ, "LLM_BASE_URL": provider.base_url, **env},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )


async def assert_ledger_equals_log(db: Path, provider: SimulatedProvider) -> None:
    answered = [e for e in provider.requests() if e.status == 200]
    assert all(e.usage is not None for e in answered)
    engine = Engine(f"sqlite:///{db}")
    try:
        ledger = await engine.ledger("metered")
    finally:
        await engine.close()
    spent = ledger.incurred
    assert spent.unmetered_calls == 0
    assert spent.calls == len(answered)
    assert (
        spent.input_tokens + spent.cached_input_tokens + spent.cache_write_tokens
        == sum(e.usage.input_tokens for e in answered if e.usage)
    )
    assert spent.output_tokens == sum(
        e.usage.output_tokens for e in answered if e.usage
    )


async def test_steps_returning_text_parsed_streamed_or_nothing_are_metered_across_a_kill(
    tmp_path: Path,
) -> None:
    """openai (async and sync clients), anthropic (both) and LangChain's ChatOpenAI."""
    sdks = ["openai", "anthropic", "langchain"]
    db, out, marker = tmp_path / "m.db", tmp_path / "child.out", tmp_path / "paused"
    with SimulatedProvider() as provider:
        child = spawn(db, provider, sdks, out, PAUSE_FILE=str(marker))
        deadline = time.monotonic() + 30
        while not marker.exists():  # the first round is committed; no call in flight
            assert child.poll() is None, out.read_text()
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert provider.count() == 12  # one call per step of the first round
        await assert_ledger_equals_log(db, provider)

        last = spawn(db, provider, sdks, out)
        assert last.wait(timeout=60) == 0, out.read_text()
        assert provider.count() == 24  # the resume did not call the first round again
        await assert_ledger_equals_log(db, provider)
