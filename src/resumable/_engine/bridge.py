"""Every crossing between threads and event loops goes through this module.

`Bridge` is an event loop on a daemon thread, per Engine: it can run anything, for
any number of callers, at the price of two thread wake-ups per call. `run_here`
runs a coroutine on a private loop of the calling thread instead, which is only
right for code that keeps nothing bound to one loop (stores with `any_loop`).
`wait_on` blocks a thread without a loop (a `def` workflow's) on a coroutine run
on its run's loop; `await_on` awaits one carried out on another thread's loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import types
import weakref
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


class _PrivateLoop:
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
    """Run `coro` to completion on the calling thread's private event loop.

    No other thread is involved, so a call costs no thread wake-ups (a `Bridge`
    call costs two, ~0.1 ms). The loop is kept for the thread's next call and
    closed when the thread ends. `coro` runs in a copy of the caller's context
    variables, as a task does.

    `coro` starts at once, with the private loop set as the running one; the loop
    itself runs only once `coro` waits for something (a store write queued to its
    thread). Most calls (an inline SQLite write, a memory store) never wait, and
    skip the loop's turn and its selector poll, whose system call hands the GIL
    to the caller's other threads: ~40 us a call with LangGraph's executor busy.
    Until it first waits, `asyncio.current_task()` is None in `coro`, as in an
    eager task; only code that leaves nothing scheduled on the loop when it
    returns belongs here (the stores that run on any loop, and the code above).

    Raises:
        RuntimeError: an event loop is already running in this thread.
    """
    if running_loop() is not None:
        coro.close()
        raise RuntimeError("run_here() was called on a thread that runs an event loop")
    private: _PrivateLoop | None = getattr(_here, "private", None)
    if private is None:
        private = _here.private = _PrivateLoop()
    loop = private.loop
    context = contextvars.copy_context()
    asyncio._set_running_loop(loop)  # exported by asyncio for loop implementations
    try:
        waiting_on = context.run(coro.send, None)
    except StopIteration as finished:
        return finished.value  # type: ignore[no-any-return]  # coro's own result
    finally:
        asyncio._set_running_loop(None)
    task = loop.create_task(_rest_of(coro, waiting_on), context=context)
    return loop.run_until_complete(task)


async def _rest_of(coro: Coroutine[Any, Any, T], waiting_on: object) -> T:
    """The rest of `coro`, which started outside a task and now waits on `waiting_on`."""
    return await _carried_on(coro, waiting_on)


@types.coroutine
def _carried_on(
    coro: Coroutine[Any, Any, T], waiting_on: object
) -> Generator[object, Any, T]:
    """Hand what `coro` waits on to the task driving this, and its outcome back."""
    while True:
        sent: Any = None
        thrown: BaseException | None = None
        try:
            sent = yield waiting_on
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - a cancellation: coro's to handle
            thrown = exc
        try:
            waiting_on = coro.send(sent) if thrown is None else coro.throw(thrown)
        except StopIteration as finished:
            return finished.value  # type: ignore[no-any-return]  # coro's own result


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
