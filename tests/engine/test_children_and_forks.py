from __future__ import annotations

import asyncio

import pytest

from resumable import (
    Engine,
    ResumableError,
    StepFailed,
    WorkflowFailed,
    step,
    workflow,
)
from resumable.stores.protocol import Store


class Crash(BaseException):
    pass


async def test_a_workflow_called_in_a_workflow_is_a_child_run(store: Store) -> None:
    calls: list[str] = []

    @step
    async def research(topic: str) -> str:
        calls.append(topic)
        return f"notes on {topic}"

    @workflow(name="tests.agent")
    async def agent(topic: str) -> str:
        return await research(topic)

    @workflow(name="tests.lead")
    async def lead(topics: list[str]) -> list[str]:
        return list(await asyncio.gather(*(agent(t) for t in topics)))

    engine = Engine(store)
    assert await engine.run(lead, ["a", "b"], run_id="team") == [
        "notes on a",
        "notes on b",
    ]
    children = await engine.runs(parent="team")
    assert sorted(c.run_id for c in children) == ["team/1", "team/2"]
    assert {c.workflow for c in children} == {"tests.agent"}
    assert [s.name for s in await engine.history("team")] == ["child:tests.agent"] * 2
    assert await engine.run(lead, ["a", "b"], run_id="team") == [
        "notes on a",
        "notes on b",
    ]
    assert sorted(calls) == ["a", "b"]


async def test_a_crashed_agent_resumes_alone(store: Store) -> None:
    calls: list[str] = []
    crash = ["b"]

    @step
    async def work(name: str, part: int) -> str:
        calls.append(f"{name}{part}")
        if name in crash and part == 2:
            raise Crash
        return f"{name}{part}"

    @workflow(name="tests.worker-agent")
    async def agent(name: str) -> str:
        return await work(name, 1) + await work(name, 2)

    @workflow(name="tests.supervisor")
    async def supervisor() -> list[str]:
        first = await agent("a")
        second = await agent("b")
        return [first, second]

    engine = Engine(store)
    with pytest.raises(Crash):
        await engine.run(supervisor, run_id="sup")
    crash.clear()
    assert await engine.run(supervisor, run_id="sup") == ["a1a2", "b1b2"]
    assert calls == [
        "a1",
        "a2",
        "b1",
        "b2",
        "b2",
    ]  # agent a untouched, b resumed at part 2


async def test_a_failed_child_is_a_step_failure_in_the_parent(store: Store) -> None:
    @workflow(name="tests.failing-child")
    async def child() -> None:
        raise ValueError("child broke")

    @workflow(name="tests.tolerant-parent")
    async def parent() -> str:
        try:
            await child()
        except StepFailed as exc:
            return f"child failed: {exc.message}"
        return "no"

    engine = Engine(store)
    assert await engine.run(parent, run_id="p") == "child failed: child broke"
    assert (await engine.get("p/1")).status == "failed"


async def test_fork_shares_the_prefix_and_runs_the_rest_with_current_code(
    store: Store,
) -> None:
    calls: list[str] = []
    flavour = ["v1"]

    @step
    async def stage(n: int) -> str:
        calls.append(f"{flavour[0]}:{n}")
        return f"{flavour[0]}:{n}"

    @workflow(name="tests.forkable")
    async def pipeline(prefix: str) -> list[str]:
        return [prefix] + [await stage(n) for n in range(4)]

    engine = Engine(store)
    original = await engine.run(pipeline, "x", run_id="orig")
    assert original == ["x", "v1:0", "v1:1", "v1:2", "v1:3"]

    flavour[0] = "v2"
    fork_id = await engine.fork("orig", at_step=2, run_id="orig-fork")
    assert fork_id == "orig-fork"
    assert await engine.resume(fork_id) == ["x", "v1:0", "v1:1", "v2:2", "v2:3"]
    assert calls == ["v1:0", "v1:1", "v1:2", "v1:3", "v2:2", "v2:3"]

    history = await engine.history(fork_id)
    assert [s.inherited_from for s in history] == ["orig", "orig", None, None]
    own = [r.seq for r in await store.load_journal(fork_id) if r.seq > 0]
    assert own == [3, 4]  # shared, not copied
    view = await engine.get(fork_id)
    assert (view.forked_from, view.fork_seq) == ("orig", 2)
    assert [r.run_id for r in await engine.runs(forked_from="orig")] == [fork_id]
    assert await engine.run(pipeline, "x", run_id="orig") == original  # untouched


async def test_fork_with_new_arguments_and_a_failing_branch(store: Store) -> None:
    @step
    async def double(v: int) -> int:
        if v < 0:
            raise ValueError("negative")
        return v * 2

    @workflow(name="tests.fork-args")
    async def wf(v: int) -> int:
        first = await double(1)
        return first + await double(v)

    engine = Engine(store)
    assert await engine.run(wf, 5, run_id="base") == 12
    bad = await engine.fork("base", at_step=1, args=(-1,))
    with pytest.raises(WorkflowFailed, match="negative"):
        await engine.resume(bad)
    assert await engine.run(wf, 5, run_id="base") == 12
    assert [s.status for s in await engine.history("base")] == ["ok", "ok"]
    with pytest.raises(ResumableError, match="at_step"):
        await engine.fork("base", at_step=9)
