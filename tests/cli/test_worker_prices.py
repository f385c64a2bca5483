"""`resumable worker --price` and `$RESUMABLE_PRICES`: the prices a worker's
runs' dollar budgets count with."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from newcomer.cli_flows import budgeted
from newcomer.cli_user import APP, finish, start, user_env
from resumable import Engine, RunView

MODELS = {"env-model": "failed", "flag-model": "failed", "free-model": "succeeded"}


async def _enqueue(url: str) -> None:
    async with Engine(url) as engine:
        for model in MODELS:
            await engine.enqueue(budgeted, model, run_id=model)


async def _ended(url: str) -> dict[str, RunView]:
    async with Engine(url) as engine:
        runs = {run.run_id: run for run in await engine.runs(limit=10)}
    return {
        run_id: run
        for run_id, run in runs.items()
        if run.status in ("succeeded", "failed")
    }


def test_a_worker_budgets_with_the_prices_given_by_option_and_environment(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    asyncio.run(_enqueue(url))
    worker = start(
        tmp_path,
        "worker",
        *("--app", APP, "--store", url, "--price", "flag-model=2,0"),
        env=user_env(RESUMABLE_PRICES="env-model=2,0"),
    )
    try:
        deadline = time.monotonic() + 30
        while len(ended := asyncio.run(_ended(url))) < len(MODELS):
            assert worker.poll() is None, finish(worker)
            assert time.monotonic() < deadline, ended
            time.sleep(0.1)
    finally:
        worker.terminate()
        done = finish(worker)
    assert done.returncode == 0, done.stderr
    # the unpriced model's calls are counted in tokens only: its budget never binds
    assert {run_id: run.status for run_id, run in ended.items()} == MODELS
    for model in ("env-model", "flag-model"):
        assert f"run {model!r}: spent $2.0000 of a $1.0000 budget" in done.stderr
