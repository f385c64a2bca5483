"""Recovery latency: from a worker's death to another worker resuming its run.

Two `resumable worker` processes share a store with the default lease settings
(TTL 5 s). The run starts on worker A; A is SIGKILLed; the time until worker B
executes the run's next step is the recovery latency. Workers recover by lease
expiry, exactly as across machines. Target: under 2 x the lease TTL.
Usage: recovery_latency.py [STORE_URL]   (default: a temporary SQLite file)
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import table
from _recovery_app import long_job

from resumable import Engine

HERE = Path(__file__).parent
RUNS = int(os.environ.get("RUNS", "3"))
LEASE_TTL_S = 5.0


def worker(url: str, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "resumable.cli",
            "worker",
            "--store",
            url,
            "--app",
            "_recovery_app",
            "--concurrency",
            "2",
            "--lease-ttl",
            str(LEASE_TTL_S),
        ],
        env={**os.environ, "RECOVERY_LOG": str(log), "PYTHONPATH": str(HERE)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def events(log: Path) -> list[tuple[int, int, float]]:
    if not log.exists():
        return []
    return [
        (int(p), int(i), float(t))
        for p, i, t in (line.split() for line in log.read_text().splitlines())
    ]


async def once(url: str, directory: Path, n: int) -> float:
    log = directory / f"recovery-{n}.log"
    engine = Engine(url)
    await engine.enqueue(long_job, 400, run_id=f"recover-{n}")
    first = worker(url, log)
    while not events(log):  # noqa: ASYNC110 - polling another process's log file
        await asyncio.sleep(0.01)
    second = worker(url, log)
    await asyncio.sleep(0.5)  # B is up and polling
    first.send_signal(signal.SIGKILL)
    killed_at = time.time()
    first.wait()
    try:
        while True:
            resumed = [t for pid, _, t in events(log) if pid == second.pid]
            if resumed:
                return resumed[0] - killed_at
            if time.time() - killed_at > 60:
                raise RuntimeError("no worker resumed the run within 60 s")
            await asyncio.sleep(0.01)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait()
        await engine.cancel(f"recover-{n}")
        await engine.close()


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = (
            sys.argv[1]
            if len(sys.argv) > 1
            else f"sqlite:///{Path(tmp) / 'recovery.db'}"
        )
        samples = [await once(url, Path(tmp), n) for n in range(RUNS)]
    rows = [
        ("lease TTL", "median recovery", "min", "max", "target"),
        (
            f"{LEASE_TTL_S:g} s",
            f"{statistics.median(samples):.2f} s",
            f"{min(samples):.2f} s",
            f"{max(samples):.2f} s",
            f"< {2 * LEASE_TTL_S:g} s",
        ),
    ]
    print(f"worker killed mid-run -> another worker runs its next step ({RUNS} runs)")
    print(table(rows))


if __name__ == "__main__":
    asyncio.run(main())
