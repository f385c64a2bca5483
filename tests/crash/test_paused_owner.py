"""An owner paused past its lease starts no step once another worker took its run."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import store_url
from resumable import Engine

APP = Path(__file__).with_name("pause_app.py")
TTL_S = 0.6
BACKENDS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def is_stopped(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rpartition(")")[2].split()[0] == "T"


async def until(condition: object, what: str, owner: subprocess.Popen[bytes]) -> None:
    assert callable(condition)
    deadline = time.monotonic() + 30
    while not condition():
        assert owner.poll() is None, f"the owner exited before {what}"
        assert time.monotonic() < deadline, f"no {what} in 30 s"
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["stop", "block"])
async def test_a_paused_owner_does_not_run_a_step_the_new_owner_committed(
    backend: str, mode: str, tmp_path: Path
) -> None:
    url, log, mark = store_url(backend, tmp_path), tmp_path / "fx.log", tmp_path / "go"
    env = {
        **os.environ,
        "PAUSE_LOG": str(log),
        "PAUSE_MARK": str(mark),
        "PAUSE_TTL_S": str(TTL_S),
    }
    os.environ["PAUSE_LOG"] = str(log)  # the taker's steps note their effects too
    owner = subprocess.Popen([sys.executable, str(APP), url, mode], env=env)
    taker = Engine(url, lease_ttl_s=TTL_S)
    try:
        await until(lambda: f"paused {owner.pid}" in lines(log), "pause", owner)
        if mode == "stop":
            await until(lambda: is_stopped(owner.pid), "SIGSTOP", owner)
        from crash.pause_app import paused_flow

        assert await taker.run(paused_flow, run_id="paused") == 36  # took it over
    finally:
        owner.send_signal(signal.SIGCONT)
        mark.touch()
        try:
            code = owner.wait(timeout=30)
        finally:
            del os.environ["PAUSE_LOG"]
            drop = getattr(taker.store, "drop", None)
            if drop is not None:
                await drop()
            await taker.close()
    effects = [line.split()[1] for line in lines(log) if line.startswith("effect")]
    assert sorted(effects) == [str(i) for i in range(1, 9)], "\n".join(lines(log))
    assert f"stopped LeaseLost {owner.pid}" in lines(log)
    assert code == 3
