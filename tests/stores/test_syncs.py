"""Deferred syncs: the turns that make and share them (`SharedTurns`).

The stores' side (SQLite's WAL fsync) is tested in test_sqlite.py; here a sync is
a function that records when it runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from conftest import until
from resumable.errors import StoreError
from resumable.stores.syncs import SharedTurns, owe_sync


def _recorder(events: list[str], name: str) -> Callable[[], None]:
    def sync() -> None:
        events.append(f"{name} synced on {threading.current_thread().name}")

    return sync


def _in_thread(
    name: str, body: Callable[[], None]
) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            body()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            errors.append(exc)

    thread = threading.Thread(target=run, name=name)
    thread.start()
    return thread, errors


@pytest.fixture
def turns() -> Iterator[SharedTurns]:
    turns = SharedTurns()
    yield turns
    assert not turns.lock.locked()
    assert turns._left is None
    assert turns._waiting == 0


def test_a_turn_makes_what_its_writes_owe_once_when_it_ends_even_raising(
    turns: SharedTurns,
) -> None:
    events: list[str] = []
    sync = _recorder(events, "store")
    assert not owe_sync(sync)  # outside a turn: a write syncs itself
    with turns.turn():
        assert owe_sync(sync)
        assert owe_sync(sync)  # equal syncs are made once
        events.append("turn done")
    assert events == ["turn done", "store synced on MainThread"]

    def write_then_fail() -> None:
        with turns.turn():
            owe_sync(sync)
            raise RuntimeError

    with pytest.raises(RuntimeError):
        write_then_fail()
    assert events[-1] == "store synced on MainThread"


def test_a_turn_nobody_waits_for_makes_its_syncs_itself_after_releasing_the_lock(
    turns: SharedTurns,
) -> None:
    events: list[str] = []

    def sync() -> None:
        events.append(f"synced, lock {'held' if turns.lock.locked() else 'free'}")

    with turns.turn():
        assert owe_sync(sync)
        events.append("turn done")
    assert events == ["turn done", "synced, lock free"]
    assert not owe_sync(sync)
    with turns.turn():  # nothing owed, nothing made
        pass
    assert len(events) == 2


def test_a_turn_ending_while_another_waits_leaves_its_syncs_to_that_turn(
    turns: SharedTurns,
) -> None:
    """Group commit: the next turn makes both callers' sync once, after its writes."""
    events: list[str] = []
    sync = _recorder(events, "store")  # one store: one sync for both
    first_in = threading.Event()

    def first() -> None:
        with turns.turn():
            owe_sync(sync)
            first_in.set()
            until(lambda: turns._waiting == 1)  # the second caller waits now
        events.append("first returned")

    def second() -> None:
        with turns.turn():
            owe_sync(sync)
            events.append("second wrote")
        events.append("second returned")

    a, a_errors = _in_thread("first", first)
    first_in.wait()
    b, b_errors = _in_thread("second", second)
    a.join()
    b.join()
    assert a_errors == b_errors == []
    assert events[:2] == ["second wrote", "store synced on second"]
    assert sorted(events[2:]) == ["first returned", "second returned"]


def test_a_turn_left_syncs_makes_them_with_its_own_and_passes_nothing_on(
    turns: SharedTurns,
) -> None:
    """A caller waits for one other turn at most, however many queue behind it."""
    events: list[str] = []
    stage = {"first": threading.Event(), "second": threading.Event()}

    def caller(name: str, waiters: int) -> Callable[[], None]:
        def body() -> None:
            with turns.turn():
                owe_sync(_recorder(events, name))
                stage.get(name, threading.Event()).set()
                until(lambda: turns._waiting == waiters)
            events.append(f"{name} returned")

        return body

    a, a_errors = _in_thread("first", caller("first", 1))
    stage["first"].wait()
    b, b_errors = _in_thread("second", caller("second", 1))
    stage["second"].wait()  # the first turn has left its sync to the second
    c, c_errors = _in_thread("third", caller("third", 0))
    for thread in (a, b, c):
        thread.join()
    assert a_errors == b_errors == c_errors == []
    second_syncs = [e for e in events if e.endswith("synced on second")]
    assert second_syncs == ["second synced on second", "first synced on second"]
    assert "third synced on third" in events  # the second turn passed nothing on
    assert events.index("first synced on second") < events.index("first returned")


def test_syncs_a_turn_fails_to_make_are_made_again_by_the_caller_that_left_them(
    turns: SharedTurns,
) -> None:
    events: list[str] = []
    failures = iter([OSError("disk gone")])

    def flaky() -> None:  # fails once, as a disk that came back would
        failure = next(failures, None)
        events.append(f"sync on {threading.current_thread().name}")
        if failure is not None:
            raise StoreError(store="test", detail=str(failure)) from failure

    first_in = threading.Event()

    def first() -> None:
        with turns.turn():
            owe_sync(flaky)
            first_in.set()
            until(lambda: turns._waiting == 1)

    def second() -> None:
        with turns.turn():
            owe_sync(flaky)

    a, a_errors = _in_thread("first", first)
    first_in.wait()
    b, b_errors = _in_thread("second", second)
    a.join()
    b.join()
    assert events == ["sync on second", "sync on first"]
    assert [type(e) for e in b_errors] == [StoreError]  # its own writes: not on disk
    assert a_errors == []  # made again by its own caller, which succeeded


class _InterruptibleLock:
    """A lock whose acquire, on thread "waiter", waits for `interrupt` and raises."""

    def __init__(self) -> None:
        self.real = threading.Lock()
        self.interrupt = threading.Event()

    def acquire(self) -> bool:
        if threading.current_thread().name == "waiter":
            self.interrupt.wait()
            raise KeyboardInterrupt
        return self.real.acquire()

    def release(self) -> None:
        self.real.release()

    def locked(self) -> bool:
        return self.real.locked()


def test_syncs_left_to_a_caller_interrupted_while_waiting_go_back_to_their_caller(
    turns: SharedTurns, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = _InterruptibleLock()
    monkeypatch.setattr(turns, "lock", lock)
    events: list[str] = []
    first_in = threading.Event()

    def first() -> None:
        with turns.turn():
            owe_sync(_recorder(events, "first"))
            first_in.set()
            until(lambda: turns._waiting == 1)
        events.append("first returned")

    def waiter() -> None:
        with turns.turn():
            events.append("never")

    a, a_errors = _in_thread("first", first)
    first_in.wait()
    w, w_errors = _in_thread("waiter", waiter)
    until(lambda: turns._left is not None)  # the first turn left its sync to it
    lock.interrupt.set()
    a.join()
    w.join()
    assert [type(e) for e in w_errors] == [KeyboardInterrupt]
    assert a_errors == []
    assert events == ["first synced on first", "first returned"]
