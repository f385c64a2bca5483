"""Engine.check on every backend: verdicts, and that it executes and writes nothing.

v1 and v2 of a workflow share a registered name: registering v2 replaces v1, as a
deploy does. A v1 run is left mid-way by its code raising after some steps (a
failed run, which `check` selects by default).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from resumable import (
    Engine,
    ResumableError,
    RunNotFound,
    WorkflowFailed,
    deprecate_patch,
    map_steps,
    patched,
    step,
    workflow,
)
from resumable.stores.protocol import RunQuery, Store
from resumable.testing import FakeClock

executed: list[str] = []


@step(name="chk.fetch")
async def fetch(doc: str) -> str:
    executed.append(f"fetch {doc}")
    return f"text of {doc}"


@step(name="chk.summarize")
async def summarize(text: str, prompt: str) -> str:
    executed.append(f"summarize {prompt}")
    return f"{prompt}: {text}"


@step(name="chk.item")
async def item(n: int) -> int:
    executed.append(f"item {n}")
    return n * 2


@step(name="chk.sync")
def sync_step(n: int) -> int:
    executed.append(f"sync {n}")
    return n + 1


class Crash(Exception):
    """v1 code stopping mid-way, leaving a failed run with part of a journal."""


def deploy(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Register `fn` as workflow `name` (replacing the code registered before)."""
    return workflow(name=name)(fn)


async def snapshot(store: Store) -> list[Any]:
    runs = await store.list_runs(RunQuery(limit=1000))
    return [(run, await store.load_journal(run.run_id)) for run in runs]


async def seed(engine: Engine, wf: Callable[..., Any], *args: Any, run_id: str) -> None:
    with pytest.raises(WorkflowFailed):
        await engine.run(wf, *args, run_id=run_id)


async def test_a_compatible_run_replays_and_nothing_executes_or_is_written(
    engine: Engine,
) -> None:
    async def v1(doc: str) -> str:
        text = await fetch(doc)
        await summarize(text, "long")
        raise Crash("stopped")

    async def v2(doc: str) -> str:
        text = await fetch(doc)
        summary = await summarize(text, "long")
        return await summarize(summary, "again")

    await seed(engine, deploy("chk.a", v1), "d1", run_id="a1")
    deploy("chk.a", v2)
    executed.clear()
    assert isinstance(engine.store, Store)
    before = await snapshot(engine.store)

    report = await engine.check()

    assert executed == []
    assert await snapshot(engine.store) == before
    (run,) = report.runs
    assert (run.run_id, run.verdict, run.replayed) == ("a1", "compatible", 2)
    assert run.new_after_seq == 2
    assert run.frontier == "new code would execute 'chk.summarize'"
    assert report.ok


async def test_a_changed_argument_is_the_first_divergence_with_the_new_call_shown(
    engine: Engine,
) -> None:
    async def v1(doc: str) -> str:
        text = await fetch(doc)
        await summarize(text, "long")
        await summarize(text, "other")
        raise Crash("stopped")

    async def v2(doc: str) -> str:
        text = await fetch(doc)
        await summarize(text, "short")
        return await summarize(text, "other")

    await seed(engine, deploy("chk.b", v1), "d1", run_id="b1")
    journal = await engine.store.load_journal("b1")
    deploy("chk.b", v2)
    executed.clear()

    report = await engine.check()

    (run,) = report.breaking
    assert run.verdict == "diverges"
    d = run.divergence
    assert d is not None
    assert (d.seq, d.recorded, d.called) == (2, "chk.summarize", "chk.summarize")
    assert d.recorded_fingerprint == journal[1].fingerprint
    assert d.called_fingerprint != d.recorded_fingerprint
    assert d.called_args == "('text of d1', 'short')"
    assert "only a fingerprint" in d.hint
    assert executed == []
    assert not report.ok


async def test_an_inserted_step_is_named_new_and_a_removed_one_points_at_its_record(
    engine: Engine,
) -> None:
    async def v1(doc: str) -> str:
        text = await fetch(doc)
        await summarize(text, "a")
        await summarize(text, "b")
        raise Crash("stopped")

    async def removed(doc: str) -> str:
        text = await fetch(doc)
        return await summarize(text, "b")

    await seed(engine, deploy("chk.c", v1), "d", run_id="c1")
    deploy("chk.c", removed)
    (run,) = (await engine.check()).runs
    assert run.divergence is not None
    assert run.divergence.seq == 2
    assert run.divergence.hint.startswith("this exact call is recorded at seq 3")

    async def inserted(doc: str) -> str:
        text = await fetch(doc)
        await item(1)
        return await summarize(text, "a")

    deploy("chk.c", inserted)
    (run,) = (await engine.check()).runs
    assert run.divergence is not None
    assert (run.divergence.seq, run.divergence.called) == (2, "chk.item")
    assert "new to this run" in run.divergence.hint


async def test_a_plain_def_workflow_is_checked_on_its_thread(engine: Engine) -> None:
    def v1(n: int) -> int:
        sync_step(n)
        sync_step(n + 1)
        raise Crash("stopped")

    def v2(n: int) -> int:
        sync_step(n)
        return sync_step(n + 10)

    await seed(engine, deploy("chk.d", v1), 1, run_id="d1")
    deploy("chk.d", v2)
    executed.clear()
    (run,) = (await engine.check()).runs
    assert run.verdict == "diverges"
    assert run.divergence is not None
    assert (run.divergence.seq, run.divergence.called_args) == (2, "(11)")
    assert executed == []


async def test_map_steps_items_and_child_runs_replay_from_the_journal(
    engine: Engine,
) -> None:
    async def child(n: int) -> int:
        return await item(n)

    kid = deploy("chk.kid", child)

    async def v1(ns: list[int]) -> int:
        doubled = await map_steps(item, ns, progress=False)
        got = await kid(5)
        raise Crash(f"stopped after {doubled} {got}")

    async def v2(ns: list[int]) -> int:
        doubled = await map_steps(item, ns, progress=False)
        got: int = await kid(5)
        return int(sum(doubled)) + got + await item(100)

    await seed(engine, deploy("chk.e", v1), [1, 2, 3], run_id="e1")
    deploy("chk.e", v2)
    executed.clear()
    report = await engine.check(workflow="chk.e")
    (run,) = report.runs
    assert (run.verdict, run.new_after_seq, run.replayed) == ("compatible", 2, 4)
    assert executed == []

    async def more_items(ns: list[int]) -> int:
        return sum(await map_steps(item, [*ns, 4], progress=False))

    deploy("chk.e", more_items)
    (run,) = (await engine.check(workflow="chk.e")).runs
    assert run.verdict == "compatible"
    assert run.frontier == "new code would execute 'chk.item'"
    assert executed == []


async def test_a_workflow_that_raises_is_reported_with_its_exception(
    engine: Engine,
) -> None:
    async def v1(doc: str) -> str:
        await fetch(doc)
        raise Crash("stopped")

    async def v2(doc: str) -> str:
        text = await fetch(doc)
        return str(int(text))  # a bug the new code brings

    await seed(engine, deploy("chk.f", v1), "d", run_id="f1")
    deploy("chk.f", v2)
    (run,) = (await engine.check()).runs
    assert run.verdict == "raises"
    assert run.error is not None
    assert run.error.startswith("ValueError: invalid literal for int()")
    assert run.is_breaking


async def test_runs_of_a_workflow_the_new_code_lacks_would_break(
    engine: Engine,
) -> None:
    async def v1(doc: str) -> str:
        await fetch(doc)
        raise Crash("stopped")

    await seed(engine, deploy("chk.g", v1), "d", run_id="g1")
    run = await engine.store.get_run("g1")
    assert run is not None
    from dataclasses import replace

    # a run of a workflow the new code no longer defines
    await engine.store.create_run(replace(run, run_id="g2", workflow="chk.gone"))
    report = await engine.check(run_ids=["g2"])
    assert [(r.run_id, r.verdict) for r in report.runs] == [("g2", "no-workflow")]
    assert not report.ok


async def test_a_body_that_awaits_something_else_times_out(engine: Engine) -> None:
    async def v1(doc: str) -> str:
        await fetch(doc)
        raise Crash("stopped")

    async def v2(doc: str) -> str:
        await fetch(doc)
        await asyncio.Event().wait()  # never set: not a step, so the check waits
        return doc

    await seed(engine, deploy("chk.h", v1), "d", run_id="h1")
    deploy("chk.h", v2)
    (run,) = (await engine.check(workflow="chk.h", timeout_s=0.2)).runs
    assert run.verdict == "timeout"
    assert run.is_breaking


async def test_a_new_code_that_returns_early_lists_the_records_it_leaves_unused(
    engine: Engine,
) -> None:
    async def v1(doc: str) -> str:
        text = await fetch(doc)
        await summarize(text, "a")
        raise Crash("stopped")

    async def v2(doc: str) -> str:
        return await fetch(doc)

    await seed(engine, deploy("chk.i", v1), "d", run_id="i1")
    deploy("chk.i", v2)
    (run,) = (await engine.check()).runs
    assert (run.verdict, run.unused, run.new_after_seq) == ("compatible", (2,), None)
    assert run.describe() == (
        "replays 1 recorded calls to the end; the recorded calls at seq 2 are no "
        "longer made"
    )


async def test_status_limit_and_since_select_the_runs(store: Store) -> None:
    clock = FakeClock()
    engine = Engine(store, clock=clock)

    async def v1(doc: str) -> str:
        await fetch(doc)
        raise Crash("stopped")

    wf = deploy("chk.j", v1)
    await seed(engine, wf, "old", run_id="j-old")
    clock.advance(10 * 86_400)
    await seed(engine, wf, "new", run_id="j-new")

    async def quick(doc: str) -> str:
        return await fetch(doc)

    await engine.run(deploy("chk.j2", quick), "x", run_id="j-done")

    assert {r.run_id for r in (await engine.check()).runs} == {"j-old", "j-new"}
    since = await engine.check(since=timedelta(days=7))
    assert [r.run_id for r in since.runs] == ["j-new"]
    assert [r.run_id for r in (await engine.check(limit=1)).runs] == ["j-new"]
    done = await engine.check(status="succeeded")
    assert [(r.run_id, r.verdict) for r in done.runs] == [("j-done", "compatible")]


async def test_patched_records_a_marker_only_where_a_run_takes_the_new_branch(
    engine: Engine,
) -> None:
    async def v1(doc: str) -> str:
        text = await fetch(doc)
        return await summarize(text, "long")

    async def v2(doc: str) -> str:
        text = await fetch(doc)
        if await patched("short"):
            return await summarize(text, "short")
        return await summarize(text, "long")

    await engine.run(deploy("chk.p", v1), "old", run_id="p-old")
    wf = deploy("chk.p", v2)
    await engine.run(wf, "new", run_id="p-new")
    new = [(s.seq, s.name) for s in await engine.history("p-new")]
    assert new == [(1, "chk.fetch"), (2, "patch:short"), (3, "chk.summarize")]
    old = [(s.seq, s.name) for s in await engine.history("p-old")]
    assert old == [(1, "chk.fetch"), (2, "chk.summarize")]

    # a replay of each takes the branch it took, executing nothing
    executed.clear()
    assert await engine.resume("p-new") == "short: text of new"
    report = await engine.check(run_ids=["p-old", "p-new"])
    assert executed == []
    assert [r.verdict for r in report.runs] == ["compatible", "compatible"]
    assert report.patches_needed() == {"short": ("p-old",)}

    async def deprecated(doc: str) -> str:
        text = await fetch(doc)
        deprecate_patch("short")
        return await summarize(text, "short")

    deploy("chk.p", deprecated)
    verdicts = {
        r.run_id: r.verdict
        for r in (await engine.check(run_ids=["p-old", "p-new"])).runs
    }
    assert verdicts == {"p-old": "diverges", "p-new": "compatible"}


async def test_patched_in_a_plain_def_workflow_returns_the_bool(
    engine: Engine,
) -> None:
    def v2(n: int) -> int:
        return sync_step(n) if patched("sync-patch") else -1

    wf = deploy("chk.q", v2)
    assert await engine.run(wf, 1, run_id="q1") == 2
    assert [s.name for s in await engine.history("q1")] == [
        "patch:sync-patch",
        "chk.sync",
    ]
    assert await engine.resume("q1") == 2


async def test_an_unawaited_patched_refuses_to_be_read_as_true(
    engine: Engine,
) -> None:
    async def careless() -> bool:
        return bool(patched("x"))

    with pytest.raises(WorkflowFailed, match="must be awaited"):
        await engine.run(deploy("chk.r", careless), run_id="r1")


def test_patched_outside_a_run_says_where_it_belongs() -> None:
    with pytest.raises(ResumableError, match="patched\\(\\) must be called"):
        patched("x")
    with pytest.raises(ResumableError, match="deprecate_patch\\(\\) must be called"):
        deprecate_patch("x")


async def test_checking_llm_steps_makes_no_provider_call(engine: Engine) -> None:
    import openai

    from resumable.simulator import SimulatedProvider

    with SimulatedProvider() as provider:
        client = openai.AsyncOpenAI(
            base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
        )

        @step(name="chk.llm")
        async def ask(prompt: str) -> str:
            reply = await client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}]
            )
            return reply.choices[0].message.content or ""

        async def v1(doc: str) -> str:
            await ask(f"summarize {doc}")
            await ask(f"title {doc}")
            raise Crash("stopped")

        async def v2(doc: str) -> str:
            summary = await ask(f"summarize {doc}")
            await ask(f"title {doc}")
            return await ask(f"translate {summary}")

        async def v2_new_prompt(doc: str) -> str:
            await ask(f"summarize {doc} in one line")
            return await ask(f"title {doc}")

        await seed(engine, deploy("chk.llm", v1), "doc", run_id="llm-1")
        assert len(provider.requests()) == 2

        deploy("chk.llm", v2)
        (run,) = (await engine.check(workflow="chk.llm")).runs
        assert (run.verdict, run.new_after_seq) == ("compatible", 2)
        deploy("chk.llm", v2_new_prompt)
        (run,) = (await engine.check(workflow="chk.llm")).runs
        assert run.divergence is not None
        assert run.divergence.called_args == "('summarize doc in one line')"

        assert len(provider.requests()) == 2  # the check called no provider
        await client.close()


async def test_an_unreadable_journal_is_that_runs_verdict_not_the_checks_end(
    engine: Engine,
) -> None:
    async def v1(doc: str) -> str:
        await fetch(doc)
        raise Crash("stopped")

    async def v2(doc: str) -> str:
        return await fetch(doc)

    await seed(engine, deploy("chk.s", v1), "d", run_id="s1")
    deploy("chk.s", v2)
    run = await engine.store.get_run("s1")
    assert run is not None
    from dataclasses import replace

    # a fork whose source is gone: its journal cannot be assembled
    await engine.store.create_run(
        replace(run, run_id="s2", forked_from="deleted", fork_seq=1)
    )
    report = await engine.check(workflow="chk.s")
    verdicts = {r.run_id: (r.verdict, r.error) for r in report.runs}
    assert verdicts["s1"] == ("compatible", None)
    assert verdicts["s2"][0] == "raises"
    assert "CorruptCheckpointError" in str(verdicts["s2"][1])
    with pytest.raises(RunNotFound):
        await engine.check(run_ids=["nope"])


async def test_a_rate_limited_batch_is_checked_without_waiting_for_the_limit(
    engine: Engine,
) -> None:
    from resumable import RateLimit

    async def v1(ns: list[int]) -> int:
        await map_steps(item, ns[:1], progress=False)
        raise Crash("stopped")

    async def v2(ns: list[int]) -> int:
        limit = RateLimit(requests_per_minute=1)
        return sum(await map_steps(item, ns, rate_limit=limit, progress=False))

    await seed(engine, deploy("chk.t", v1), [1, 2, 3], run_id="t1")
    deploy("chk.t", v2)
    (run,) = (await engine.check(workflow="chk.t", timeout_s=5)).runs
    assert run.verdict == "compatible"  # not "timeout": no minute waited out
