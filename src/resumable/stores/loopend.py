"""Closing a store's loop-bound clients when their event loop shuts down.

psycopg's pool and redis-py's asyncio client belong to the loop that connected
them. An Engine made once at module level and used from several `asyncio.run()`
calls would otherwise find, on the second, clients of a closed loop ("Event loop
is closed"). `LoopEnd` closes them on their own loop as it shuts down, so the next
loop opens fresh ones, and `close()` from any loop finds nothing left to close.

It rides on public asyncio: an async generator first iterated on a loop is closed
by `loop.shutdown_asyncgens()`, which `asyncio.run` calls after every task of the
loop has ended (a run releasing its lease on Ctrl-C included) and before closing
it. A loop closed without that (`loop.close()` alone) leaves the clients stale,
as before; `is_stale` tells the store to drop them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable


class LoopEnd:
    """Runs a store's `close` when the loop its clients belong to shuts down."""

    def __init__(self) -> None:
        self._armed: AsyncGenerator[None, None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def arm(self, close: Callable[[], Awaitable[None]]) -> None:
        """Call `close()` on the running loop when it shuts down (once; idempotent)."""
        if self._armed is not None:
            return
        watch = self._until_loop_ends(close)
        await anext(watch)  # its first iteration ties it to the running loop
        self._armed, self._loop = watch, asyncio.get_running_loop()

    async def disarm(self) -> None:
        """Forget the arrangement: the store was closed by its user."""
        watch, self._armed, self._loop = self._armed, None, None
        if watch is not None:
            await watch.aclose()

    def is_stale(self) -> bool:
        """Whether the clients belong to a loop closed without shutting down."""
        return self._loop is not None and self._loop.is_closed()

    async def _until_loop_ends(
        self, close: Callable[[], Awaitable[None]]
    ) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            if self._armed is not None:  # not disarmed: the loop is shutting down
                self._armed = self._loop = None
                await close()
