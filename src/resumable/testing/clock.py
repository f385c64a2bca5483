"""`FakeClock`: time that moves only when a test (or a sleeper) moves it."""

from __future__ import annotations

import asyncio

from resumable.testing.contract.records import T0

__all__ = ["FakeClock"]


class FakeClock:
    """A clock that moves only when told (or when a sleeper asks it to).

    `sleep()` advances the clock by the requested time and yields once, so code
    that waits for an hour finishes at once with the clock an hour later.
    """

    def __init__(self, start_ms: int = T0) -> None:
        self._now_ms = start_ms
        self.sleeps: list[float] = []
        """Every duration passed to sleep(), in order."""

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, seconds: float) -> None:
        """Move the clock forward."""
        self._now_ms += int(seconds * 1000)

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)
        await asyncio.sleep(0)
