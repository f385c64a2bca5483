"""The workload a store written by an earlier resumable holds (see make.py).

Its steps count their calls in CALLS, so a test proves a replay ran none of them.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from resumable import Retry, current_run, map_steps, step, wait_for, workflow

CALLS: Counter[str] = Counter()
DOCS = ["alpha", "beta", "gamma"]
STAMP = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)


@step
async def fetch(doc: str) -> dict[str, Any]:
    CALLS["fetch"] += 1
    current_run().record_usage(model="gpt-4o-mini", input_tokens=100, output_tokens=20)
    return {"doc": doc, "at": STAMP, "score": Decimal("1.5"), "raw": doc.encode()}


@step
async def shout(text: str) -> str:
    CALLS["shout"] += 1
    return text.upper()


@step(retry=Retry(attempts=1))
async def explode(doc: str) -> str:
    CALLS["explode"] += 1
    raise ValueError(f"cannot read {doc}")


@workflow(name="stored.finished")
async def finished(docs: list[str]) -> dict[str, Any]:
    items = [await fetch(doc) for doc in docs]
    shouted = await map_steps(shout, docs, progress=False)
    return {"items": items, "shouted": shouted}


@workflow(name="stored.waiting")
async def waiting(doc: str) -> list[Any]:
    first = await fetch(doc)
    approved = await wait_for("approval")
    return [first["doc"], approved]


@workflow(name="stored.failing")
async def failing(doc: str) -> str:
    await fetch(doc)
    return await explode(doc)
