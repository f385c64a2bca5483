"""The dashboard end to end, in a real headless Chromium (Playwright)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from dashboard import flows
from dashboard.conftest import Dashboard, call
from resumable import Engine, RunNotFound, WorkflowFailed

TESTS_DIR = Path(__file__).parent.parent


def _engine(dashboard: Dashboard) -> Engine:
    return Engine(dashboard.store_url, lease_ttl_s=flows.LEASE_TTL_S)


def test_a_crashed_and_resumed_run_shows_replayed_and_executed_steps(
    dashboard: Dashboard, page: Page
) -> None:
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); from dashboard import flows; "
            "flows.crash_in_child(sys.argv[2], 'crashy')",
            str(TESTS_DIR),
            dashboard.store_url,
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == 137, child.stderr
    engine = _engine(dashboard)
    page.goto(f"{dashboard.url}/run?id=crashy")
    expect(page.locator("#live")).to_have_attribute("data-status", "running")
    time.sleep(flows.LEASE_TTL_S)  # the dead child's lease runs out
    assert engine.run_sync(flows.pipeline, 7, run_id="crashy") == "summary 7"
    page.reload()
    kinds = page.locator("table.steps tbody tr td:nth-child(4)")
    expect(kinds).to_have_text(["replayed", "replayed", "executed"])
    expect(page.locator("#live")).to_have_attribute("data-status", "succeeded")
    call(engine.close())


def test_steps_gathered_then_crashed_show_exactly_which_were_replayed(
    dashboard: Dashboard, page: Page
) -> None:
    # seq 1 and 3 commit, seq 2 dies: the resume replays 1 and 3 and executes 2,
    # which no count of "the first N steps" can say
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); from dashboard import flows; "
            "flows.crash_fan_out_in_child(sys.argv[2], 'fanned')",
            str(TESTS_DIR),
            dashboard.store_url,
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == 137, child.stderr
    engine = _engine(dashboard)
    time.sleep(flows.LEASE_TTL_S)  # the dead child's lease runs out
    result = engine.run_sync(
        flows.fan_out, dashboard.store_url, "fanned", run_id="fanned"
    )
    assert result[1] == "middle"
    page.goto(f"{dashboard.url}/run?id=fanned")
    kinds = page.locator("table.steps tbody tr td:nth-child(4)")
    expect(kinds).to_have_text(["replayed", "executed", "replayed"])
    call(engine.close())


def test_an_execution_that_replayed_and_stopped_at_a_wait_shows_its_replays(
    dashboard: Dashboard, page: Page
) -> None:
    engine = _engine(dashboard)

    async def until_waiting_at(key: str) -> None:
        for _ in range(500):
            steps = await engine.history("hold")
            at_wait = bool(steps) and steps[-1].name == f"wait_for:{key}"
            if at_wait and (await engine.get("hold")).status == "waiting":
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"the run never waited for {key!r}")

    async def first_two_executions() -> None:
        await engine.start(flows.replay_then_wait, "doc", run_id="hold")
        await until_waiting_at("first")
        await engine.send("hold", "first", "a")  # execution 2: replays, then waits
        await until_waiting_at("second")

    call(first_two_executions())
    page.goto(f"{dashboard.url}/run?id=hold")
    kinds = page.locator("table.steps tbody tr td:nth-child(4)")
    # execution 2 replayed fetch 1 and 2, received "first" and stopped at "second"
    # before running a new step
    expect(kinds).to_have_text(["replayed", "replayed", "executed", "waiting"])
    call(engine.close())


def test_the_waterfall_draws_back_off_sleeps_waits_and_the_inputs_sent(
    dashboard: Dashboard, page: Page
) -> None:
    engine = _engine(dashboard)

    async def run() -> str:
        handle = await engine.start(flows.patient, "calm", run_id="patient")
        for _ in range(500):
            if (await engine.get("patient")).status == "waiting":
                break
            await asyncio.sleep(0.01)
        await engine.send("patient", "approval", {"by": "ana"})
        return str(await handle.result())

    assert call(run()) == "calm: {'by': 'ana'}"
    page.goto(f"{dashboard.url}/run?id=patient")
    waterfall = page.locator("svg.waterfall")
    # flaky: two failed attempts and their back-off before the one that succeeded
    expect(waterfall.locator("rect.k-backoff title")).to_have_text(
        ["2 earlier attempts and retry back-off"]
    )
    expect(waterfall.locator("rect.k-sleep")).to_have_count(1)
    expect(waterfall.locator("rect.k-input")).to_have_count(1)
    expect(waterfall.locator("rect.k-sent title")).to_have_text(
        ["input 'approval' sent"]
    )
    expect(waterfall).to_contain_text("⇢ input approval")
    expect(page.locator("table.inputs")).to_contain_text('"by": "ana"')
    call(engine.close())


def test_a_step_in_retry_back_off_shows_when_its_next_attempt_comes(
    dashboard: Dashboard, page: Page
) -> None:
    engine = _engine(dashboard)

    async def start() -> None:
        await engine.start(flows.backing_off, run_id="backing-off")
        for _ in range(500):
            steps = await engine.history("backing-off")
            if steps and steps[0].status == "retrying":
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the step never recorded its failed attempt")

    call(start())
    page.goto(f"{dashboard.url}/run?id=backing-off")
    expect(page.locator("svg.waterfall rect.k-backoff title")).to_have_text(
        ["retry back-off: attempt 2 in 3600.000 s"]
    )
    call(engine.cancel("backing-off"))
    call(engine.close())


def test_a_failed_step_shows_its_error_and_hostile_text_stays_inert(
    dashboard: Dashboard, page: Page
) -> None:
    engine = _engine(dashboard)
    run_id = flows.HOSTILE
    with pytest.raises(WorkflowFailed, match="quota"):
        engine.run_sync(flows.failing, "quota <b>exceeded</b>", run_id=run_id)
    page.goto(f"{dashboard.url}/?status=failed")
    link = page.locator("a.runlink")
    expect(link).to_have_text([run_id])
    link.click()
    expect(page.locator("h1.runid")).to_have_text(run_id)
    error = page.locator(".error-box")
    expect(error).to_contain_text("ValueError")
    expect(error).to_contain_text("quota <b>exceeded</b>")
    expect(page.locator("table.steps")).to_contain_text(flows.HOSTILE)
    assert page.evaluate("window.__pwned") is None
    assert page.locator("main script, main img").count() == 0


def test_sending_an_input_wakes_the_waiting_run(
    dashboard: Dashboard, page: Page
) -> None:
    engine = _engine(dashboard)
    outcome: list[str] = []
    waiting = threading.Thread(
        target=lambda: outcome.append(
            engine.run_sync(flows.approval, "contract", run_id="hitl")
        )
    )
    waiting.start()
    deadline = time.monotonic() + 20
    while _status(engine, "hitl") != "waiting":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    page.goto(f"{dashboard.url}/run?id=hitl")
    expect(page.locator("#live")).to_have_attribute("data-status", "waiting")
    form = page.locator("form.send")
    form.locator("input[name=key]").fill("approval")
    form.locator("textarea").fill("{not json")
    form.locator("button").click()
    expect(form.locator(".json-error")).to_contain_text("Not JSON")
    form.locator("textarea").fill('{"ok": true}')
    form.locator("button").click()
    expect(page.locator(".flash")).to_contain_text("sent 'approval'")
    # no reload: the page's live update shows the run finishing
    expect(page.locator("#live")).to_have_attribute(
        "data-status", "succeeded", timeout=20_000
    )
    waiting.join(timeout=20)
    assert outcome == ["contract: {'ok': True}"]


def test_a_fork_made_in_the_page_shows_in_the_lineage_and_the_diff(
    dashboard: Dashboard, page: Page
) -> None:
    engine = _engine(dashboard)
    engine.run_sync(flows.pipeline, 1, run_id="origin")
    page.goto(f"{dashboard.url}/run?id=origin")
    fork = page.locator("form[action='/actions/fork']")
    fork.locator("input[name=at_step]").fill("2")
    fork.locator("input[name=new_id]").fill("origin-fork")
    fork.locator("button").click()
    expect(page.locator("h1.runid")).to_have_text("origin-fork")
    expect(page.locator("table.kv")).to_contain_text("origin at step 2")
    page.goto(f"{dashboard.url}/lineage?id=origin")
    expect(page.locator(".tree a.node")).to_have_text(["origin", "origin-fork"])
    page.locator(".tree").get_by_text("diff with source").click()
    expect(page.locator("table.diff tbody tr td:nth-child(2)")).to_have_text(
        ["shared", "shared", "only in A"]
    )


def test_the_lineage_is_drawn_as_a_graph_of_ancestors_children_and_forks(
    dashboard: Dashboard, page: Page
) -> None:
    engine = _engine(dashboard)
    assert engine.run_sync(flows.team, "durability", run_id="lead") == "doc 10"
    hostile = "lead/2 fork <b>bold</b>"
    call(engine.fork("lead/2", at_step=1, run_id=hostile))
    page.goto(f"{dashboard.url}/lineage?id=lead/2")
    graph = page.locator("svg.lineage")
    # the parent above, the run, and its fork below: three nodes, one edge of each kind
    expect(graph.locator("a.gnode")).to_have_count(3)
    expect(graph.locator("a.gnode title")).to_have_text(
        ["lead (succeeded)", "lead/2 (succeeded)", f"{hostile} (queued)"]
    )
    expect(graph.locator("a.gnode.focus title")).to_have_text(["lead/2 (succeeded)"])
    expect(graph.locator("path.e-child title")).to_have_text(["child"])
    expect(graph.locator("path.e-fork title")).to_have_text(["fork at step 1"])
    expect(graph.locator("b")).to_have_count(0)  # the id's markup stays text
    # the nested list stays, for screen readers and text browsers
    expect(page.locator(".tree a.node")).to_have_text(["lead/2", hostile])
    graph.locator("a.gnode").first.click()
    expect(page.locator("h1.runid")).to_have_text("lead")
    call(engine.close())


def test_filtering_ten_thousand_runs(dashboard: Dashboard, page: Page) -> None:
    engine = _engine(dashboard)
    call(_fill(engine, 10_000))
    page.goto(f"{dashboard.url}/")
    expect(page.locator("[data-count=all]")).to_have_text("10,000")
    expect(page.locator("[data-count=cancelled]")).to_have_text("1,000")
    expect(page.locator("table.runs tbody tr")).to_have_count(50)
    page.fill("input[name=q]", "bulk-07")
    page.select_option("select[name=status]", "cancelled")
    page.click("form#filters button")
    expect(page.locator("[data-count=all]")).to_have_text("1,000")
    expect(page.locator("[data-count=cancelled]")).to_have_text("100")
    rows = page.locator("a.runlink")
    expect(rows).to_have_count(50)
    first_page = rows.all_inner_texts()
    assert all(re.fullmatch(r"bulk-07\d\d[05]", t) for t in first_page), first_page
    page.click("a[rel=next]")
    expect(rows).to_have_count(50)
    second_page = rows.all_inner_texts()
    assert not set(first_page) & set(second_page)
    assert max(second_page) < min(first_page)


async def _fill(engine: Engine, n: int) -> None:
    for i in range(n):
        await engine.enqueue(flows.pipeline, i, run_id=f"bulk-{i:05d}", queue="bulk")
        if i % 10 == 5:
            await engine.cancel(f"bulk-{i:05d}")


def _status(engine: Engine, run_id: str) -> str | None:
    try:
        return call(engine.get(run_id)).status
    except RunNotFound:
        return None
