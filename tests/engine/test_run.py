from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import enum
import time
from typing import Any

import pytest

from resumable import (
    CheckpointWriteError,
    Engine,
    NonDeterminismError,
    ResumableError,
    Retry,
    RunCancelled,
    RunNotFound,
    SerializationError,
    StepFailed,
    WorkflowFailed,
    current_run,
    register,
    step,
    workflow,
)
from resumable.stores.protocol import StepRecord, Store
from resumable.testing import FakeClock


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass(frozen=True)
class Summary:
    title: str
    words: tuple[str, ...]
    at: dt.datetime


async def test_committed_steps_replay_without_running(engine: Engine) -> None:
    calls: list[str] = []

    @step
    async def fetch(doc: str) -> str:
        calls.append(doc)
        return doc.upper()

    @workflow
    async def pipeline(docs: list[str]) -> list[str]:
        return [await fetch(d) for d in docs]

    assert await engine.run(pipeline, ["a", "b"], run_id="r1") == ["A", "B"]
    assert await engine.run(pipeline, ["a", "b"], run_id="r1") == ["A", "B"]
    assert calls == ["a", "b"]


class Crash(BaseException):
    """Escapes the engine like the process dying: nothing is recorded for it."""


async def test_resume_executes_only_the_step_that_never_committed(
    engine: Engine,
) -> None:
    calls: list[int] = []
    crash_at = [1]

    @step
    async def work(i: int) -> int:
        calls.append(i)
        if i == crash_at[0]:
            raise Crash
        return i * 10

    @workflow
    async def three() -> list[int]:
        return [await work(i) for i in range(3)]

    with pytest.raises(Crash):
        await engine.run(three, run_id="r")
    assert (await engine.get("r")).status == "queued"  # given back, not left running
    crash_at[0] = -1
    assert await engine.run(three, run_id="r") == [0, 10, 20]
    assert calls == [0, 1, 1, 2]


async def test_step_results_keep_their_types_on_replay(engine: Engine) -> None:
    @step
    async def summarize() -> Summary:
        return Summary(
            title="t", words=("a", "b"), at=dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
        )

    @step
    async def misc() -> dict[str, Any]:
        return {"color": Color.RED, "ids": {1, 2}, "pair": (1, "x"), "raw": b"\x00\xff"}

    @workflow
    async def typed() -> tuple[Summary, dict[str, Any]]:
        return await summarize(), await misc()

    # Color is named by no annotation: the program registers it
    register(Color)
    first = await engine.run(typed, run_id="typed")
    replayed = await Engine(engine.store).run(typed, run_id="typed")
    assert replayed == first
    assert isinstance(replayed[0], Summary)
    assert replayed[1]["color"] is Color.RED


def test_sync_workflow_with_sync_steps_runs_and_replays(tmp_path: Any) -> None:
    calls: list[int] = []

    @step
    def double(x: int) -> int:
        calls.append(x)
        return x * 2

    @workflow
    def total(xs: list[int]) -> int:
        return sum(double(x) for x in xs)

    engine = Engine(f"sqlite:///{tmp_path / 'sync.db'}")
    assert engine.run_sync(total, [1, 2, 3], run_id="s") == 12
    assert engine.run_sync(total, [1, 2, 3], run_id="s") == 12
    assert calls == [1, 2, 3]


async def test_a_sync_workflow_replays_on_its_own_thread(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trip to the run's loop and back costs two thread wake-ups: replays make none."""
    calls: list[int] = []
    crash = [True]

    @step
    def double(x: int) -> int:
        calls.append(x)
        return x * 2

    @workflow
    def total(xs: list[int]) -> int:
        done = sum(double(x) for x in xs)
        if crash:
            raise Crash
        return done + double(100)

    with pytest.raises(Crash):
        await engine.run(total, [1, 2, 3], run_id="s")
    trips: list[object] = []
    to_loop = asyncio.run_coroutine_threadsafe

    def counted(coro: Any, loop: asyncio.AbstractEventLoop) -> Any:
        trips.append(coro)
        return to_loop(coro, loop)

    monkeypatch.setattr(asyncio, "run_coroutine_threadsafe", counted)
    crash.clear()
    assert await engine.run(total, [1, 2, 3], run_id="s") == 212
    assert calls == [1, 2, 3, 100]
    assert len(trips) == 1  # double(100) alone, which executes


async def test_a_sync_workflow_refuses_a_changed_call_on_replay(engine: Engine) -> None:
    arg = [1]

    @step
    def double(x: int) -> int:
        return x * 2

    @workflow
    def twice() -> int:
        first = double(arg[0])
        if arg[0] == 1:
            raise Crash
        return first

    with pytest.raises(Crash):
        await engine.run(twice, run_id="nd")
    arg[0] = 2
    with pytest.raises(NonDeterminismError, match="different arguments"):
        await engine.run(twice, run_id="nd")


async def test_gather_takes_seq_when_called_not_when_finished(engine: Engine) -> None:
    @step
    async def slow(i: int) -> int:
        await asyncio.sleep(0.001 * (10 - i))  # later calls finish first
        return i

    @workflow
    async def fan_out() -> list[int]:
        return list(await asyncio.gather(*(slow(i) for i in range(10))))

    assert await engine.run(fan_out, run_id="g") == list(range(10))
    history = await engine.history("g")
    assert [(s.seq, s.output()) for s in history] == [(i + 1, i) for i in range(10)]


async def test_changed_step_at_a_recorded_seq_is_refused(engine: Engine) -> None:
    version = ["old"]

    @step
    async def old_step() -> str:
        return "old"

    @step
    async def new_step() -> str:
        return "new"

    @workflow
    async def evolving(arg: int) -> str:
        result = await (old_step() if version[0] == "old" else new_step())
        if version[0] == "old":
            raise Crash  # the process dies; a deploy changes the code
        return result

    with pytest.raises(Crash):
        await engine.run(evolving, 1, run_id="nd")
    version[0] = "new"
    with pytest.raises(NonDeterminismError) as caught:
        await engine.run(evolving, 1, run_id="nd")
    assert caught.value.run_id == "nd"
    assert caught.value.seq == 1
    assert "old_step" in caught.value.recorded
    assert "new_step" in caught.value.called


async def test_same_step_with_other_arguments_is_refused(engine: Engine) -> None:
    arg = ["x"]

    @step
    async def echo(v: str) -> str:
        return v

    @workflow
    async def wf() -> str:
        await echo(arg[0])
        arg[0] = "changed-by-a-nondeterministic-workflow"
        await echo("y")
        raise RuntimeError("stop before finishing")

    with pytest.raises(WorkflowFailed):
        await engine.run(wf, run_id="args")
    arg[0] = "different"
    with pytest.raises(NonDeterminismError, match="different arguments"):
        await engine.resume("args")
    journal = await engine.store.load_journal("args")
    assert journal[0].name.endswith("echo")


async def test_current_run_describes_the_step_being_executed(engine: Engine) -> None:
    seen: list[tuple[str, int | None, int | None, str]] = []

    @step(retry=Retry(attempts=2, initial_delay=0))
    async def probe() -> None:
        info = current_run()
        seen.append((info.run_id, info.seq, info.attempt, info.idempotency_key))
        if info.attempt == 1:
            raise TimeoutError

    @workflow
    async def wf() -> str:
        await probe()
        return current_run().run_id

    assert await engine.run(wf, run_id="ctx") == "ctx"
    assert seen == [("ctx", 1, 1, "ctx:1"), ("ctx", 1, 2, "ctx:1")]
    with pytest.raises(ResumableError, match="must be called from a @workflow"):
        current_run()


async def test_step_outside_a_run_is_an_ordinary_call() -> None:
    @step
    async def plain(x: int) -> int:
        return x + 1

    assert await plain(1) == 2


async def test_unserializable_result_names_step_and_path(engine: Engine) -> None:
    class Client:
        pass

    @step
    async def make() -> dict[str, Any]:
        return {"client": Client()}

    @workflow
    async def wf() -> None:
        await make()

    with pytest.raises(SerializationError) as caught:
        await engine.run(wf, run_id="ser")
    assert caught.value.run_id == "ser"
    assert caught.value.step is not None
    assert caught.value.step.endswith("make")
    assert caught.value.path == 'result["client"]'
    assert "Client is not serializable" in str(caught.value)
    assert (await engine.get("ser")).status == "failed"


async def test_store_refusing_a_write_stops_the_run(engine: Engine) -> None:
    ran: list[str] = []

    @step
    async def first() -> str:
        ran.append("first")
        return "ok"

    @step
    async def second() -> str:
        ran.append("second")
        return "ok"

    @workflow
    async def wf() -> str:
        with contextlib.suppress(CheckpointWriteError):
            await first()  # a careless workflow swallows the error, yet cannot go on
        return await second()

    assert isinstance(engine.store, Store)
    refusing = RefusingStore(engine.store)
    with pytest.raises(CheckpointWriteError) as caught:
        await Engine(refusing, store_retry_s=0.1).run(wf, run_id="refused")
    assert caught.value.run_id == "refused"
    assert caught.value.seq == 1
    assert ran == ["first"]
    assert await engine.store.load_journal("refused") == []


async def test_a_store_that_hangs_fails_the_write_within_store_retry_s(
    engine: Engine,
) -> None:
    @step
    async def first() -> str:
        return "ok"

    @workflow
    async def wf() -> str:
        return await first()

    assert isinstance(engine.store, Store)
    started = time.monotonic()
    with pytest.raises(CheckpointWriteError) as caught:
        await Engine(HangingStore(engine.store), store_retry_s=0.5).run(
            wf, run_id="hung"
        )
    assert time.monotonic() - started < 5  # the window, not a driver's own timeout
    assert (caught.value.run_id, caught.value.seq) == ("hung", 1)
    assert "did not answer" in str(caught.value)


class HangingStore:
    """Delegates to a real store, but a step commit never returns (a server gone)."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def commit_step(self, step: StepRecord, *, fence: int) -> None:
        await asyncio.Event().wait()


class RefusingStore:
    """Delegates to a real store but refuses every step commit."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def commit_step(self, step: StepRecord, *, fence: int) -> None:
        raise CheckpointWriteError(run_id=step.run_id, seq=step.seq, detail="disk full")


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_a_record_the_store_refuses_as_data_stops_the_run_without_retrying(
    store: Store,
) -> None:
    # SQLite and PostgreSQL keep times in 64-bit integers: a clock gone wild past
    # them makes the step's record one the store can never take
    clock = FakeClock()
    attempts: list[int] = []
    real_commit = store.commit_step

    async def counting_commit(step: StepRecord, *, fence: int) -> None:
        attempts.append(step.seq)
        await real_commit(step, fence=fence)

    store.commit_step = counting_commit  # type: ignore[method-assign]  # spy on a real store

    @step
    async def leap() -> str:
        clock.advance(2.0**70)  # finished_at_ms no longer fits in 64 bits
        return "ok"

    @workflow
    async def wf() -> str:
        return await leap()

    with pytest.raises(CheckpointWriteError) as caught:
        await Engine(store, clock=clock, store_retry_s=30).run(wf, run_id="wild")
    assert caught.value.transient is False
    assert "cannot succeed" in str(caught.value)
    assert (caught.value.run_id, caught.value.seq) == ("wild", 1)
    assert attempts == [1]  # refused once, never retried
    assert clock.sleeps == []
    assert await store.load_journal("wild") == []


async def test_background_start_gives_a_handle(engine: Engine) -> None:
    gate = asyncio.Event()

    @step
    async def wait_gate() -> str:
        await gate.wait()
        return "done"

    @workflow
    async def wf() -> str:
        return await wait_gate()

    handle = await engine.start(wf, run_id="bg")
    assert handle.run_id == "bg"
    await asyncio.sleep(0.01)
    assert await handle.status() == "running"
    gate.set()
    assert await handle.result() == "done"
    assert await handle.status() == "succeeded"


async def test_cancel_stops_a_running_run_for_good(engine: Engine) -> None:
    gate = asyncio.Event()
    after: list[str] = []

    @step
    async def block() -> None:
        await gate.wait()

    @step
    async def later() -> None:
        after.append("ran")

    @workflow
    async def wf() -> None:
        await block()
        await later()

    handle = await engine.start(wf, run_id="c")
    await asyncio.sleep(0.01)
    assert await engine.cancel("c") == "cancelled"
    with pytest.raises(RunCancelled):
        await handle.result()
    with pytest.raises(RunCancelled):
        await engine.run(wf, run_id="c")
    assert after == []


async def test_runs_lists_and_filters(engine: Engine) -> None:
    @workflow
    async def ok(x: int) -> int:
        return x

    @workflow
    async def bad() -> None:
        raise ValueError("no")

    for i in range(3):
        await engine.run(ok, i, run_id=f"ok{i}")
    with pytest.raises(WorkflowFailed):
        await engine.run(bad, run_id="bad")
    assert {r.run_id for r in await engine.runs(status="succeeded")} == {
        "ok0",
        "ok1",
        "ok2",
    }
    assert [r.run_id for r in await engine.runs(status="failed")] == ["bad"]
    assert len(await engine.runs(limit=2)) == 2
    named = await engine.runs(workflow=(await engine.get("bad")).workflow)
    assert [r.run_id for r in named] == ["bad"]
    with pytest.raises(RunNotFound):
        await engine.history("nope")


async def test_resume_finds_the_workflow_by_its_registered_name(engine: Engine) -> None:
    crash = [True]

    @step
    async def triple(x: int) -> int:
        if crash[0]:
            raise Crash
        return x * 3

    @workflow(name="tests.resume-by-name")
    async def named(x: int) -> int:
        return await triple(x)

    with pytest.raises(Crash):
        await engine.run(named, 7, run_id="by-name")
    crash[0] = False
    assert await engine.resume("by-name") == 21
    assert (await engine.get("by-name")).workflow == "tests.resume-by-name"
    with pytest.raises(RunNotFound):
        await engine.resume("missing")


async def test_same_run_id_with_other_arguments_is_refused(engine: Engine) -> None:
    @workflow
    async def wf(x: int) -> int:
        return x

    await engine.run(wf, 1, run_id="same")
    with pytest.raises(ResumableError, match="other arguments"):
        await engine.run(wf, 2, run_id="same")


async def test_two_executions_of_one_run_in_one_engine_share_one_execution(
    engine: Engine,
) -> None:
    calls: list[int] = []

    @step
    async def once() -> int:
        calls.append(1)
        await asyncio.sleep(0.01)
        return 1

    @workflow
    async def wf() -> int:
        return await once()

    results = await asyncio.gather(*(engine.run(wf, run_id="dup") for _ in range(3)))
    assert results == [1, 1, 1]
    assert calls == [1]


async def test_failed_step_error_is_seen_as_step_failed(engine: Engine) -> None:
    @step
    async def broken() -> None:
        raise ValueError("bad input")

    @workflow
    async def wf() -> str:
        try:
            await broken()
        except StepFailed as exc:
            return f"{exc.error_type}: {exc.message}"
        return "unreachable"

    assert await engine.run(wf, run_id="sf") == "ValueError: bad input"
    assert await Engine(engine.store).run(wf, run_id="sf") == "ValueError: bad input"


async def test_mixing_sync_and_async_is_refused_with_a_way_out(engine: Engine) -> None:
    @step
    def blocking() -> int:
        return 1

    @workflow
    async def async_parent() -> int:
        return blocking()

    with pytest.raises(WorkflowFailed, match="would block the event loop"):
        await engine.run(async_parent, run_id="mix-1")

    @step
    async def non_blocking() -> int:
        return 1

    @workflow
    def sync_parent() -> object:
        return non_blocking()

    with pytest.raises(WorkflowFailed, match="called from a sync workflow"):
        await engine.run(sync_parent, run_id="mix-2")
