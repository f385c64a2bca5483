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


def moment_text(moment: datetime, now: datetime) -> str:
    """A time for people: `2026-11-27 21:40:00 UTC (in 4 min)`, or `(3 h ago)`."""
    seconds = (moment - now).total_seconds()
    ahead = seconds >= 0
    seconds = abs(seconds)
    if seconds < 60:
        span = f"{seconds:.0f} s"
    elif seconds < 3600:
        span = f"{seconds / 60:.0f} min"
    elif seconds < 2 * 86400:
        span = f"{seconds / 3600:.1f} h"
    else:
        span = f"{seconds / 86400:.1f} days"
    relative = f"in {span}" if ahead else f"{span} ago"
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC ({relative})"


def deadline_text(value: object, now: datetime) -> str | None:
    """What a waiting step records (its deadline in ms, or None) for people.

    None when `value` is not a deadline (then show the value itself).
    """
    if value is None:
        return "no timeout"
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return "until " + moment_text(datetime_of(value), now)
        except (OverflowError, OSError, ValueError):
            return None
    return None
