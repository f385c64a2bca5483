"""SIGKILL during a run served from the step cache: it resumes like any run."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from conftest import store_url
from crash import cache_app
from resumable import Engine
from resumable.testing import crash_test


async def _drop(url: str) -> None:
    async with Engine(url) as engine:
        drop = getattr(engine.store, "drop", None)
        if drop is not None:  # a PostgreSQL schema or Redis prefix made for this test
            await drop()


# 17 child processes per backend (the reference run, then a killed run and its
# resume per trial), each starting an interpreter and opening the store
@pytest.mark.parametrize(
    "backend",
    [
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ],
)
def test_a_run_killed_at_each_commit_while_served_from_the_cache_resumes(
    backend: str, tmp_path: Path
) -> None:
    # the uninterrupted run fills the cache; every trial (a run of its own) is
    # then served from it, killed before and after each commit, and resumed
    url = store_url(backend, tmp_path)
    try:
        report = crash_test(cache_app.digest, ["a", "b"], store=url)
    finally:
        asyncio.run(_drop(url))
    assert report.result.startswith("summary of a by ")
    assert report.boundaries == 4  # the map call, two items, publish
    assert len(report.trials) == 8
    for trial in report.trials:
        # each summary names the process that made it: the uninterrupted run's
        # in every trial, killed or not, so none was made again
        assert trial.result == report.result
