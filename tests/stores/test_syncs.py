"""Deferred syncs: the turns that make them (`SharedTurns`), and deferred turns.

The stores' side (SQLite's WAL fsync) is tested in test_sqlite.py; here a sync is
a function that records when it runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from conftest import until
from resumable.errors import StoreError
from resumable.stores import syncs
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


def test_a_failed_sync_is_raised_once_the_lock_is_free(turns: SharedTurns) -> None:
    def broken() -> None:
        assert not turns.lock.locked()
        raise StoreError(store="test", detail="disk gone")

    with pytest.raises(StoreError, match="disk gone"), turns.turn():
        assert owe_sync(broken)


def _deferring(turns: SharedTurns) -> bool:
    """Whether a caller waits in `_defer` (a waiter on its condition)."""
    return bool(turns._counts._waiters)  # type: ignore[attr-defined]


def test_a_deferred_turn_goes_after_the_turn_another_caller_starts_meanwhile(
    turns: SharedTurns, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As LangGraph's put_writes lets the put called after it go first."""
    monkeypatch.setattr(syncs, "DEFER_S", 60.0)  # only the second turn ends the wait
    events: list[str] = []

    def caller(name: str, *, defer: bool) -> Callable[[], None]:
        def body() -> None:
            with turns.turn(defer=defer):
                owe_sync(_recorder(events, name))
                events.append(f"{name} wrote")
            events.append(f"{name} returned")

        return body

    first, first_errors = _in_thread("first", caller("first", defer=True))
    until(lambda: _deferring(turns))
    second, second_errors = _in_thread("second", caller("second", defer=False))
    first.join()
    second.join()
    assert first_errors == second_errors == []
    assert events.index("second wrote") < events.index("first wrote")
    for name in ("first", "second"):  # each synced its own, after its writes
        assert (
            events.index(f"{name} wrote")
            < events.index(f"{name} synced on {name}")
            < events.index(f"{name} returned")
        )
    assert turns._missed == 0


def test_a_deferred_turn_waits_out_a_turn_that_started_in_time_however_long(
    turns: SharedTurns, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(syncs, "DEFER_S", 0.2)
    events: list[str] = []
    second_in = threading.Event()

    def first() -> None:
        with turns.turn(defer=True):
            events.append("first wrote")

    def second() -> None:
        with turns.turn():
            second_in.set()
            time.sleep(2 * syncs.DEFER_S)  # past the first's deferral
            events.append("second wrote")

    a, a_errors = _in_thread("first", first)
    until(lambda: _deferring(turns))
    b, b_errors = _in_thread("second", second)
    a.join()
    b.join()
    assert a_errors == b_errors == []
    assert second_in.is_set()
    assert events == ["second wrote", "first wrote"]
    assert turns._missed == 0


def _timed_turn(turns: SharedTurns) -> float:
    """Seconds a lone deferred turn took."""
    start = time.monotonic()
    with turns.turn(defer=True):
        pass
    return time.monotonic() - start


def test_deferrals_nobody_ends_stop_after_misses_max_in_a_row_but_for_probes(
    turns: SharedTurns, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A graph whose put waits for put_writes must not pay DEFER_S at every step."""
    defer_s = 0.2
    monkeypatch.setattr(syncs, "DEFER_S", defer_s)
    monkeypatch.setattr(syncs, "MISSES_MAX", 2)
    monkeypatch.setattr(syncs, "PROBE_EVERY", 3)
    waited = [_timed_turn(turns) >= defer_s for _ in range(8)]
    # two misses; then every third call probes (and misses again)
    assert waited == [True, True, False, False, True, False, False, True]

    # a probe that another caller's turn ends resumes deferring
    monkeypatch.setattr(syncs, "DEFER_S", 60.0)
    assert _timed_turn(turns) < defer_s  # skipped
    assert _timed_turn(turns) < defer_s  # skipped

    def probing() -> None:
        _timed_turn(turns)

    probe, errors = _in_thread("probe", probing)
    until(lambda: _deferring(turns))
    with turns.turn():  # the call that follows
        pass
    probe.join()
    assert errors == []
    assert turns._missed == 0
    monkeypatch.setattr(syncs, "DEFER_S", defer_s)
    assert _timed_turn(turns) >= defer_s  # defers again
