"""A worker frozen past its lease cannot write once another took the run over."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from resumable import Engine

APP = Path(__file__).with_name("lease_app.py")


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


async def test_a_frozen_worker_cannot_write_after_a_takeover(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, log = tmp_path / "zombie.db", tmp_path / "effects.log"
    monkeypatch.setenv("ZOMBIE_LOG", str(log))  # for the zombie, and for the taker here
    zombie = subprocess.Popen([sys.executable, str(APP), str(db)])
    deadline = time.monotonic() + 30
    while not any(line.startswith("start 2 ") for line in lines(log)):
        assert time.monotonic() < deadline, lines(log)
        assert zombie.poll() is None, lines(log)
        time.sleep(0.005)
    zombie.send_signal(signal.SIGSTOP)  # frozen mid-step, lease and all
    try:
        from crash.lease_app import zombie_flow

        taker = Engine(f"sqlite:///{db}", lease_ttl_s=1.0)
        started = time.monotonic()
        assert (
            await taker.run(zombie_flow, run_id="zombie") == 15
        )  # waits out the lease
        assert (
            time.monotonic() - started >= 0.5
        )  # the live (frozen) owner was not robbed early
        journal_before = await taker.store.load_journal("zombie")
    finally:
        zombie.send_signal(signal.SIGCONT)
    assert zombie.wait(timeout=30) == 3
    zombie_pid = str(zombie.pid)
    assert f"stopped LeaseLost {zombie_pid}" in lines(log)
    taker_steps = [
        line for line in lines(log) if line.startswith("end") and zombie_pid not in line
    ]
    assert taker_steps  # the taker executed the rest of the run
    assert await taker.store.load_journal("zombie") == journal_before  # not one record
    fences = {record.seq: record for record in journal_before if record.seq > 0}
    assert sorted(fences) == [1, 2, 3, 4, 5, 6]
    run = await taker.store.get_run("zombie")
    assert run is not None
    assert run.status == "succeeded"
    assert run.fence == 2
    await taker.close()
