"""Helpers the benchmarks share: medians of repeated timings, counted work, a tidy table."""

from __future__ import annotations

import argparse
import asyncio
import email
import json
import random
import sqlite3
import statistics
import tempfile
import time
import typing
from collections.abc import Awaitable, Callable, Sequence
from types import FrameType
from typing import Any


class Counter:
    """Bytecodes and frames entered while active (a sys.settrace tracer)."""

    def __init__(self) -> None:
        self.bytecodes = 0
        self.frames = 0

    def on_call(self, frame: FrameType, event: str, _: object) -> Any:
        self.frames += 1
        frame.f_trace_opcodes = True
        return self.on_line

    def on_line(self, _frame: FrameType, event: str, _: object) -> Any:
        if event == "opcode":
            self.bytecodes += 1
        return self.on_line


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


# real English prose (the standard library's own documentation), so that storage
# and compression figures are what LLM text would see, not a repeated toy sentence
PROSE = " ".join(
    " ".join((module.__doc__ or "").split())
    for module in (
        asyncio,
        json,
        random,
        sqlite3,
        statistics,
        tempfile,
        time,
        argparse,
        email,
        typing,
    )
)


def prose(rng: random.Random, size: int) -> str:
    """`size` characters of PROSE from a random place."""
    start = rng.randrange(0, len(PROSE) - size)
    return PROSE[start : start + size]
