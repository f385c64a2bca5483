"""Helpers the benchmarks share: medians of repeated timings and a tidy table."""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable, Sequence


async def median_us_per_op(
    fn: Callable[[int], Awaitable[float | None]], *, ops: int, runs: int, first: int = 0
) -> float:
    """Median over `runs` of µs per op; `fn(run)` may return its own elapsed seconds."""
    samples = []
    for run in range(first, first + runs):
        start = time.perf_counter()
        own = await fn(run)
        elapsed = own if own is not None else time.perf_counter() - start
        samples.append(elapsed / ops * 1e6)
    return statistics.median(samples)


def table(rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
        for row in rows
    )
