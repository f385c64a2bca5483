"""`resumable demo`: a run killed mid-way in a child process, then resumed.

The child runs a 12-step workflow on the embedded SQLite store; the parent
SIGKILLs it about 60% of the way through, resumes the same run_id in a fresh
process, and reports which steps were replayed from the store and which ran.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from resumable.cli._table import table

STEPS = 12
KILL_AFTER = 7  # steps done before the kill: about 60% of the way


def register(commands: Any, store: argparse.ArgumentParser) -> None:
    """Add the subcommand."""
    demo = commands.add_parser(
        "demo",
        parents=[store],
        help="kill a run mid-way, resume it, show what replayed",
    )
    demo.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    demo.add_argument("--run-id", default=None, help=argparse.SUPPRESS)
    demo.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    """Parent: start the child, kill it, resume it, report."""
    if args.child:
        return _child(args.store, args.run_id)
    run_id = f"demo-{int(time.time())}"
    log = Path(".resumable") / f"{run_id}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"demo: run {run_id} ({STEPS} steps) on {args.store}")

    first = _spawn(args.store, run_id, log)
    deadline = time.monotonic() + 60
    while _done_steps(log) < KILL_AFTER and time.monotonic() < deadline:
        time.sleep(0.01)
    first.send_signal(signal.SIGKILL)
    first.communicate()
    print(
        f"demo: killed the process (SIGKILL) after {_done_steps(log)} of {STEPS} steps"
    )

    started = time.perf_counter()
    second = _spawn(args.store, run_id, log)
    out, err = second.communicate(timeout=120)
    elapsed = time.perf_counter() - started
    if second.returncode != 0:
        print(err.decode(), file=sys.stderr)
        return 1
    events = _events(log)
    executed_before = {
        i for pid, kind, i in events if kind == "end" and pid == first.pid
    }
    executed_after = {
        i for pid, kind, i in events if kind == "end" and pid == second.pid
    }
    rows = [
        [
            str(i + 1),
            "replayed from the store"
            if i not in executed_after
            else "executed after resume",
        ]
        for i in range(STEPS)
    ]
    print(table(["STEP", "ON RESUME"], rows, right=[0]))
    print(
        f"demo: resumed in {elapsed:.2f} s (process start included): "
        f"{len(executed_before - executed_after)} steps replayed, "
        f"{len(executed_after)} executed; result: {out.decode().strip()}"
    )
    print(f"demo: inspect it with `resumable show {run_id}`")
    return 0


def _spawn(store: str, run_id: str, log: Path) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "resumable.cli",
        "demo",
        "--child",
        "--store",
        store,
    ]
    return subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [*command, "--run-id", run_id],
        env={**os.environ, "RESUMABLE_DEMO_LOG": str(log)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _events(log: Path) -> list[tuple[int, str, int]]:
    if not log.exists():
        return []
    events = []
    for line in log.read_text().splitlines():
        pid, kind, index = line.split()
        events.append((int(pid), kind, int(index)))
    return events


def _done_steps(log: Path) -> int:
    return sum(1 for _, kind, _ in _events(log) if kind == "end")


def _child(store: str, run_id: str) -> int:
    from resumable import Engine, step, workflow

    log = os.environ["RESUMABLE_DEMO_LOG"]

    def note(kind: str, index: int) -> None:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{os.getpid()} {kind} {index}\n".encode())
        finally:
            os.close(fd)

    @step(name="analyse")
    def analyse(index: int) -> str:
        note("start", index)
        time.sleep(0.15)  # stands in for an LLM call
        note("end", index)
        return f"summary of document {index + 1}"

    @workflow(name="resumable.demo")
    def pipeline(n: int) -> int:
        return len([analyse(i) for i in range(n)])

    result = Engine(store).run_sync(pipeline, STEPS, run_id=run_id)
    print(f"{result} summaries")
    return 0
