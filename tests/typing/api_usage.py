"""User-style code that mypy and pyright check and that never runs."""

from __future__ import annotations

import asyncio

from resumable import Engine, Retry, current_run, step, workflow


@step(retry=Retry(attempts=3, on=(TimeoutError,)))
async def fetch(url: str) -> bytes:
    return url.encode()


@step
def parse(raw: bytes) -> int:
    return len(raw)


@workflow
async def pipeline(urls: list[str]) -> list[bytes]:
    return list(await asyncio.gather(*(fetch(u) for u in urls)))


@workflow(name="sync-pipeline")
def sync_pipeline(raw: bytes) -> int:
    return parse(raw)


async def use() -> None:
    engine = Engine()
    pages: list[bytes] = await engine.run(pipeline, ["a"], run_id="r")
    size: int = engine.run_sync(sync_pipeline, b"x")
    handle = await engine.start(pipeline, ["b"])
    await handle.result()
    key: str = current_run().idempotency_key
    del pages, size, key
    async for record in engine.export(["r"], status=["failed", "succeeded"]):
        cost: float = record.cost_usd
        del cost
    shown = (await engine.history("r"))[0].view()
    state = await engine.view_state("thread-7")
    del shown, state
