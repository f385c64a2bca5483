"""Where the engine reads the time and waits: swapped for FakeClock in tests."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Wall-clock milliseconds and a way to wait."""

    def now_ms(self) -> int:
        """Milliseconds since the epoch."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds`."""
        ...


class SystemClock:
    """The real time."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def datetime_of(ms: int) -> datetime:
    """Milliseconds since the epoch as an aware UTC datetime."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC)
