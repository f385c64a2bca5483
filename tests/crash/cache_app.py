"""A workflow with cached steps, for tests/crash/test_cache_sigkill.py's children."""

from __future__ import annotations

import os

from resumable import map_steps, step, workflow
from resumable.testing import record_effect


@step(name="tests.crash.cache.summarize", cache=True)
async def summarize(doc: str) -> str:
    # a cached step has no effects; the process that ran it is in its value, so
    # a value made by any process but the first run's would change the result
    return f"summary of {doc} by {os.getpid()}"


@step(name="tests.crash.cache.publish")
async def publish(summaries: list[str]) -> str:
    record_effect("publish")
    return " | ".join(summaries)


@workflow(name="tests.crash.cache.digest")
async def digest(docs: list[str]) -> str:
    summaries = await map_steps(summarize, docs, progress=False)
    return await publish(summaries)
