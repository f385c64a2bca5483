"""Every crossing between threads and event loops goes through this module.

`Bridge` is an event loop on a daemon thread, per Engine: it can run anything, for
any number of callers, at the price of two thread wake-ups per call. `run_here`
runs a coroutine on a loop of the calling thread's own instead, which is only
right for code that keeps nothing bound to one loop (stores with `any_loop`).
`wait_on` blocks a thread without a loop (a `def` workflow's) on a coroutine run
on its run's loop; `await_on` awaits one carried out on another thread's loop.
All of it is public asyncio API.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _OwnLoop:
    """A thread's loop for `run_here`: closed when the thread's storage goes."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        weakref.finalize(self, self.loop.close)


_here = threading.local()


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in the calling thread, or None."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def wait_on(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on `loop`, which runs in another thread, and block for its outcome.

    How a thread without a loop of its own (a `def` workflow's, a bridge caller's)
    has a step, a wait or a patch decision carried out on the loop of its run.
    """
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


async def await_on(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Await `coro` carried out on `loop`, from whatever loop the caller runs on."""
    if asyncio.get_running_loop() is loop:
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))


def run_here(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion on an event loop of the calling thread's own.

    No other thread is involved, so a call costs no thread wake-ups (a `Bridge`
    call costs two). The loop is kept for the thread's next call and closed when
    the thread ends. `coro` runs as a task in a copy of the caller's context
    variables. Only code that leaves nothing scheduled on the loop when it
    returns belongs here (the stores that run on any loop, and code above them).

    Raises:
        RuntimeError: an event loop is already running in this thread, which
            `coro` would have to wait for; await it there instead.
    """
    if running_loop() is not None:
        coro.close()
        raise RuntimeError(
            "run_here() was called on a thread that runs an event loop, which it "
            "would block; await the coroutine on that loop instead"
        )
    own: _OwnLoop | None = getattr(_here, "own", None)
    if own is None:
        own = _here.own = _OwnLoop()
    loop = own.loop
    task = loop.create_task(coro, context=contextvars.copy_context())
    return loop.run_until_complete(task)


class Bridge:
    """Runs coroutines to completion for synchronous callers."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the bridge's loop and return its result.

        Raises:
            RuntimeError: called from the bridge's own loop thread, which would deadlock.
        """
        loop = self._ensure_loop()
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(
                "run_sync() was called from inside a workflow or step run by run_sync(); "
                "await engine.run(...) there instead"
            )
        return wait_on(loop, coro)

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=_serve, args=(loop,), name="resumable-bridge", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def close(self) -> None:
        """Stop the loop thread (idempotent)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """Run `loop` until `Bridge.close` stops it.

    A task that raises SystemExit or KeyboardInterrupt (a step calling sys.exit())
    stores it as its outcome, then asyncio re-raises it out of `run_forever`. Left
    there, it would end this thread with the outcome undelivered, and the caller
    would wait forever. The loop runs on, and delivers it: `run_sync` raises it in
    the caller's thread, where it ends the program as it would have without us.
    """
    while True:
        try:
            loop.run_forever()
        except (SystemExit, KeyboardInterrupt):
            continue
        return
