"""Measured overhead figures for `resumable cost-model`, written to the package's data file.

Each step-overhead benchmark calls `save(kind, ...)` with its medians; this module
adds what every store kind shares: how many store writes a run and a resume make
(counted on a store that counts its calls), and how many bytes a run record and a
step row take (a store's size before and after runs of known sizes).
"""

from __future__ import annotations

import collections
import contextlib
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from resumable import Engine, step, workflow
from resumable.stores.memory import MemoryStore

DATA = (
    Path(__file__).resolve().parent.parent
    / "src"
    / "resumable"
    / "data"
    / "overhead.json"
)
WRITES = frozenset(
    {
        "create_run",
        "acquire_lease",
        "renew_lease",
        "update_run",
        "commit_step",
        "reopen_run",
        "cancel_run",
        "send_input",
        "put_chunks",
    }
)
PAYLOAD = ("the model returned a summary of the document " * 30)[:1000]
EMPTY_RUNS = 200
STEPS = 2000


class _Crash(BaseException):
    """Ends an execution the way a killed process does: nothing after it runs."""


_CRASH_AT: list[int] = [-1]


@step
async def _produce(i: int) -> str:
    if i == _CRASH_AT[0]:
        raise _Crash
    return PAYLOAD


@workflow(name="bench.overhead")
async def _steps(n: int) -> int:
    for i in range(n):
        await _produce(i)
    return n


class _Counting:
    """Delegates to a store, counting its write calls by name."""

    def __init__(self, inner: MemoryStore) -> None:
        self._inner = inner
        self.calls: collections.Counter[str] = collections.Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in WRITES:
            return attr

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return await attr(*args, **kwargs)

        return counted


async def count_writes() -> tuple[int, int]:
    """(writes a 10-step run makes besides its steps, writes one resume adds)."""
    counting = _Counting(MemoryStore())
    engine = Engine(counting)  # a delegating proxy
    await engine.run(_steps, 10, run_id="whole")
    per_run = sum(counting.calls.values()) - 10
    counting.calls.clear()
    _CRASH_AT[0] = 5
    with contextlib.suppress(_Crash):
        await engine.run(_steps, 10, run_id="crashed")
    _CRASH_AT[0] = -1
    release = counting.calls["renew_lease"]  # a SIGKILLed process releases nothing
    crashed = sum(counting.calls.values()) - release
    counting.calls.clear()
    await engine.run(_steps, 10, run_id="crashed")
    resumed = sum(counting.calls.values())
    await engine.close()
    # both executions together: per_run + 10 steps + the resume's extra writes
    return per_run, crashed + resumed - per_run - 10


async def storage_figures(
    engine: Engine, used_bytes: Callable[[], Awaitable[float]]
) -> tuple[float, float]:
    """(bytes per run record, bytes per step row besides its payload) on `engine`."""
    before = await used_bytes()
    for i in range(EMPTY_RUNS):
        await engine.run(_steps, 0, run_id=f"size-empty-{i}")
    runs_only = await used_bytes()
    await engine.run(_steps, STEPS, run_id="size-steps")
    with_steps = await used_bytes()
    history = await engine.history("size-steps")
    payload = sum(s.output_bytes for s in history) / len(history)
    per_run = (runs_only - before) / EMPTY_RUNS
    per_step = (with_steps - runs_only) / STEPS - payload
    return per_run, per_step


async def save(
    kind: str,
    *,
    us_per_step: float,
    bytes_per_run: float,
    bytes_per_step: float,
    source: str,
) -> None:
    """Merge one store kind's figures into the data file `resumable cost-model` reads."""
    per_run, per_resume = await count_writes()
    data: dict[str, Any] = json.loads(DATA.read_text()) if DATA.exists() else {}
    data[kind] = {
        "us_per_step": round(us_per_step, 1),
        "bytes_per_step": round(bytes_per_step),
        "bytes_per_run": round(bytes_per_run),
        "writes_per_run": per_run,
        "writes_per_resume": per_resume,
        "source": f"{source}, {datetime.now(UTC):%Y-%m-%d}",
    }
    DATA.parent.mkdir(exist_ok=True)
    DATA.write_text(json.dumps(dict(sorted(data.items())), indent=2) + "\n")
    print(f"wrote {kind} figures to {DATA}")
