"""Where synchronous callers run coroutines: a bridge loop thread, or their own.

`Bridge` is an event loop on a daemon thread, per Engine: it can run anything, for
any number of callers, at the price of two thread wake-ups per call. `run_here`
runs a coroutine on a private loop of the calling thread instead, which is only
right for code that keeps nothing bound to one loop (stores with `any_loop`).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _PrivateLoop:
    """A thread's loop for `run_here`: closed when the thread's storage goes."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        weakref.finalize(self, self.loop.close)


_here = threading.local()


running_loop: Callable[[], asyncio.AbstractEventLoop | None] = asyncio._get_running_loop
"""The event loop running in the calling thread, or None (C code: every step call
asks, and a Python wrapper catching get_running_loop's RuntimeError cost more)."""


def run_here(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion on the calling thread's private event loop.

    No other thread is involved, so a call costs no thread wake-ups (a `Bridge`
    call costs two, ~0.1 ms). The loop is kept for the thread's next call and
    closed when the thread ends. The caller's context variables are visible to
    `coro`, as with `asyncio.run`.

    Raises:
        RuntimeError: an event loop is already running in this thread.
    """
    if running_loop() is not None:
        coro.close()
        raise RuntimeError("run_here() was called on a thread that runs an event loop")
    private: _PrivateLoop | None = getattr(_here, "private", None)
    if private is None:
        private = _here.private = _PrivateLoop()
    return private.loop.run_until_complete(coro)


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
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

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
