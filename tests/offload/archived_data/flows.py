"""The workload an archived store written by an earlier resumable holds (see make.py).

Its steps count their calls in CALLS, so a test proves a replay ran none of them.
"""

from __future__ import annotations

import hashlib
from collections import Counter

from resumable import current_run, step, wait_for, workflow

CALLS: Counter[str] = Counter()


def noise(seed: str, chars: int) -> str:
    """Hex that does not compress: payloads this long stay this long once sealed."""
    blocks = (
        hashlib.sha256(f"{seed}/{k}".encode()).hexdigest()
        for k in range(chars // 64 + 1)
    )
    return "".join(blocks)[:chars]


BIG = noise("big", 4000)
"""A step result sealed past `blobs_over=1024`: its row holds an RBLOB1 reference."""


@step(name="archived.write")
async def write(i: int) -> str:
    CALLS["write"] += 1
    current_run().record_usage(model="gpt-4o-mini", input_tokens=100, output_tokens=20)
    return f"chapter {i} " + noise(f"chapter {i}", 300)


@step(name="archived.big")
async def big() -> str:
    CALLS["big"] += 1
    return BIG


@workflow(name="archived.book")
async def book(n: int) -> list[str]:
    chapters = [await write(i) for i in range(n)]
    go = await wait_for("go")
    return [c[:9] for c in chapters] + [str(go), (await big())[:4]]
