from __future__ import annotations

import asyncio

import pytest

from resumable import (
    Engine,
    InputRejected,
    RunHandle,
    RunNotFound,
    WaitTimeout,
    sleep,
    step,
    wait_for,
    workflow,
)
from resumable.stores.protocol import Store
from resumable.testing import FakeClock


async def until_waiting(handle: RunHandle) -> None:
    """Poll for up to 5 s until the started run is recorded as waiting."""
    for _ in range(500):
        if await handle.status() == "waiting":
            return
        await asyncio.sleep(0.01)


async def test_a_waiting_run_resumes_at_the_wait_with_earlier_steps_replayed(
    store: Store,
) -> None:
    calls: list[str] = []

    @step
    async def draft() -> str:
        calls.append("draft")
        return "draft v1"

    @step
    async def publish(text: str, approved: bool) -> str:
        calls.append("publish")
        return f"{text} ({'approved' if approved else 'rejected'})"

    @workflow
    async def review() -> str:
        text = await draft()
        approved = await wait_for("approval")
        return await publish(text, approved)

    engine = Engine(store)
    handle = await engine.start(review, run_id="hitl")
    await until_waiting(handle)
    assert await handle.status() == "waiting"
    assert (await store.get_run("hitl")).lease_owner is None  # type: ignore[union-attr]
    await engine.send("hitl", "approval", True)
    assert await handle.result() == "draft v1 (approved)"
    assert calls == ["draft", "publish"]


async def test_a_waiting_run_is_resumed_by_another_engine(store: Store) -> None:
    calls: list[str] = []

    @step
    async def before() -> int:
        calls.append("before")
        return 1

    @workflow
    async def wf() -> int:
        base = await before()
        extra: int = await wait_for("extra")
        return base + extra

    first = Engine(store)
    task = asyncio.ensure_future(first.run(wf, run_id="handoff"))
    while (await store.get_run("handoff")) is None or (
        (await store.get_run("handoff")).status != "waiting"  # type: ignore[union-attr]
    ):
        await asyncio.sleep(0.01)
    task.cancel()  # the first process gives up and goes away
    with pytest.raises(asyncio.CancelledError):
        await task
    second = Engine(store)
    await second.send("handoff", "extra", 41)
    assert await second.resume("handoff") == 42
    assert calls == ["before"]


async def test_a_def_workflow_waits_and_sleeps_by_plain_calls(store: Store) -> None:
    """In a def workflow both return their outcome; before, each returned a coroutine."""
    clock = FakeClock()
    calls: list[str] = []

    @step
    def draft() -> str:
        calls.append("draft")
        return "draft v1"

    @workflow
    def review() -> str:
        text = draft()
        sleep(0.5)
        verdict: str = wait_for("verdict")
        return f"{text}: {verdict}"

    engine = Engine(store, clock=clock)
    handle = await engine.start(review, run_id="sync-hitl")
    await until_waiting(handle)
    assert await handle.status() == "waiting"
    await Engine(store, clock=clock).send("sync-hitl", "verdict", "approved")
    assert await handle.result() == "draft v1: approved"
    assert calls == ["draft"]
    assert 0.5 in clock.sleeps  # the short sleep, slept in the run


async def test_several_waits_may_be_pending_at_once(store: Store) -> None:
    @workflow
    async def wf() -> list[str]:
        return list(await asyncio.gather(wait_for("a"), wait_for("b"), wait_for("c")))

    engine = Engine(store)
    handle = await engine.start(wf, run_id="multi")
    await engine.send("multi", "c", "C")  # input may arrive before the run waits
    while await handle.status() != "waiting":
        await asyncio.sleep(0.01)
    await engine.send("multi", "a", "A")
    await engine.send("multi", "b", "B")
    assert await handle.result() == ["A", "B", "C"]


async def test_wait_timeout_is_catchable_and_replays_the_same(store: Store) -> None:
    clock = FakeClock()

    @workflow
    async def wf() -> str:
        try:
            return str(await wait_for("reply", timeout=60))
        except WaitTimeout as exc:
            return f"timed out after {exc.timeout_s:g}s"

    engine = Engine(store, clock=clock)
    assert await engine.run(wf, run_id="to") == "timed out after 60s"
    assert (
        await Engine(store, clock=clock).run(wf, run_id="to") == "timed out after 60s"
    )


async def test_second_send_to_a_key_is_refused_and_the_first_value_kept(
    store: Store,
) -> None:
    @workflow
    async def wf() -> str:
        return str(await wait_for("k"))

    engine = Engine(store)
    handle = await engine.start(wf, run_id="twice")
    await engine.send("twice", "k", "first")
    with pytest.raises(InputRejected, match="already sent"):
        await engine.send("twice", "k", "second")
    assert await handle.result() == "first"
    with pytest.raises(InputRejected, match="already ended"):
        await engine.send("twice", "other", 1)
    with pytest.raises(RunNotFound):
        await engine.send("nobody", "k", 1)


async def test_durable_sleep_survives_a_restart_and_wakes_on_time(store: Store) -> None:
    clock = FakeClock()
    calls: list[int] = []

    @step
    async def tick(n: int) -> int:
        calls.append(n)
        return n

    @workflow
    async def wf() -> int:
        await tick(1)
        await sleep(3600)
        return await tick(2)

    engine = Engine(store, clock=clock)
    task = asyncio.ensure_future(engine.run(wf, run_id="nap"))
    while (run := await store.get_run("nap")) is None or run.status != "sleeping":
        await asyncio.sleep(0.001)
    wake_at_ms = run.wake_at_ms
    assert wake_at_ms is not None
    task.cancel()  # the process goes away while the run sleeps
    with pytest.raises(asyncio.CancelledError):
        await task

    later = Engine(store, clock=clock)  # a restart, half an hour in
    clock.advance(1800)
    assert await later.run(wf, run_id="nap") == 2  # waits the remainder
    assert clock.now_ms() >= wake_at_ms
    assert calls == [1, 2]


async def test_short_sleeps_do_not_suspend_the_run(store: Store) -> None:
    clock = FakeClock()

    @workflow
    async def wf() -> str:
        await sleep(0.5)
        return "ok"

    assert await Engine(store, clock=clock).run(wf, run_id="short") == "ok"
    assert clock.sleeps == [0.5]


async def test_a_waiting_run_survives_a_deploy_that_changes_other_code(
    store: Store,
) -> None:
    """Recovery is keyed to the workflow's name and its journal, not a program hash."""

    @step
    async def intake() -> str:
        return "ticket"

    @workflow(name="tests.deployed")
    async def v1() -> str:
        ticket = await intake()
        decision = await wait_for("decision")
        return f"{ticket}: {decision}"

    engine = Engine(store)
    handle = await engine.start(v1, run_id="deploy")
    while await handle.status() != "waiting":
        await asyncio.sleep(0.01)

    @step
    async def audit(text: str) -> str:  # new code after the waiting point
        return text.upper()

    @workflow(name="tests.deployed")  # the redeployed module registers a new version
    async def v2() -> str:
        ticket = await intake()
        decision = await wait_for("decision")
        return await audit(f"{ticket}: {decision}")

    restarted = Engine(store)
    await restarted.send("deploy", "decision", "approved")
    assert await restarted.resume("deploy") == "TICKET: APPROVED"


class _SentJustAfterTheLook:
    """A store on which `send` lands just after wait_for looked at the inputs.

    The run is still running then, so the send wakes nothing; the run must not
    go on waiting for an input it already has.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self.engine: Engine | None = None
        self.sent = False

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    async def get_inputs(self, run_id: str) -> dict[str, bytes]:
        inputs = await self._store.get_inputs(run_id)
        if not self.sent and self.engine is not None:
            self.sent = True
            assert (await self._store.get_run(run_id)).status == "running"  # type: ignore[union-attr]
            await self.engine.send(run_id, "k", "late")
        return inputs


async def test_an_input_sent_while_the_run_was_suspending_wakes_it(
    store: Store,
) -> None:
    @workflow
    async def wf() -> str:
        return str(await wait_for("k"))

    racing = _SentJustAfterTheLook(store)
    engine = Engine(racing)  # type: ignore[arg-type]  # delegates to a real store
    racing.engine = engine
    handle = await engine.start(wf, run_id="raced")
    assert await asyncio.wait_for(handle.result(), 10) == "late"
    assert racing.sent
