"""Child runs, threads, workers and the server's own checks, in a real Chromium."""

from __future__ import annotations

import asyncio

from playwright.sync_api import Page, expect

from dashboard import flows
from dashboard.conftest import Dashboard, call
from resumable import Engine, step, workflow
from resumable.integrations.langgraph_threads import register_thread
from resumable.serde import KeyRing


def test_a_child_run_is_a_nested_row_linked_from_its_step(
    dashboard: Dashboard, page: Page
) -> None:
    engine = Engine(dashboard.store_url)
    assert engine.run_sync(flows.team, "durability", run_id="lead") == "doc 10"
    page.goto(f"{dashboard.url}/run?id=lead")
    expect(page.locator("svg.waterfall rect.k-child")).to_have_count(1)
    expect(page.locator("svg.waterfall")).to_contain_text("↳ lead/2")
    page.locator("table.steps a.child").click()
    expect(page.locator("h1.runid")).to_have_text("lead/2")
    expect(page.locator("table.kv")).to_contain_text("Parent")
    call(engine.close())


def test_a_saved_conversation_reads_as_chat(dashboard: Dashboard, page: Page) -> None:
    engine = Engine(dashboard.store_url)
    messages = [
        {"role": "user", "content": "Why did step 37 fail? <script>x()</script>"},
        {"role": "assistant", "content": "A rate limit; resume replays 1-36."},
    ]
    call(engine.save_state("chat-9", {"messages": messages[:1]}, label="turn 1"))
    call(engine.save_state("chat-9", {"messages": messages}, label="turn 2"))
    page.goto(f"{dashboard.url}/threads")
    page.locator("table.threads a", has_text="chat-9").click()
    expect(page.locator(".chat .msg")).to_have_count(2)
    expect(page.locator(".chat .msg.r-user")).to_contain_text("<script>x()</script>")
    expect(page.locator("table tbody tr")).to_have_count(2)
    page.locator("table tbody tr").nth(1).locator("a").click()  # the older checkpoint
    expect(page.locator(".chat .msg")).to_have_count(1)
    call(engine.close())


def test_the_threads_page_lists_save_state_and_langgraph_threads_by_page(
    dashboard: Dashboard, page: Page
) -> None:
    engine = Engine(dashboard.store_url)

    async def save() -> None:
        for i in range(52):
            await engine.save_state(f"notes-{i:02}", {"i": i})
        # saved times are in ms: the newest must not share notes-51's millisecond
        await asyncio.sleep(0.01)
        await engine.save_state(
            "graph-1", {"values": {}}, metadata={"lg": {"step": 3, "source": "loop"}}
        )
        await register_thread(engine, "graph-1")  # an internal thread, not listed

    call(save())
    page.goto(f"{dashboard.url}/threads")
    rows = page.locator("table.threads tbody tr")
    expect(rows).to_have_count(50)
    expect(rows.first).to_contain_text("graph-1")
    expect(rows.first).to_contain_text("LangGraph")
    expect(rows.nth(1)).to_contain_text("save_state")
    expect(page.locator("table.threads")).not_to_contain_text(":resumable:")
    page.click("a[rel=next]")
    expect(rows).to_have_count(3)  # 53 threads in all
    expect(page.locator("a[rel=next]")).to_have_count(0)
    page.fill("input[name=prefix]", "notes-0")
    page.click("form.filters button")
    expect(rows).to_have_count(10)
    page.locator("table.threads a", has_text="notes-07").click()
    expect(page.locator("h1")).to_have_text("Thread notes-07")
    expect(page.locator("pre.value")).to_contain_text('"i": 7')
    call(engine.close())


def test_workers_and_queues_show_lease_holders_and_depths(
    dashboard: Dashboard, page: Page
) -> None:
    engine = Engine(dashboard.store_url)
    for i in range(3):
        call(engine.enqueue(flows.pipeline, i, run_id=f"q-{i}", queue="docs"))
    lease = call(
        engine.store.acquire_lease(
            "q-1", owner="worker-7", now_ms=engine.clock.now_ms(), ttl_ms=60_000
        )
    )
    assert lease is not None
    page.goto(f"{dashboard.url}/workers")
    expect(page.locator("table").first).to_contain_text("worker-7")
    expect(page.locator("table").first).to_contain_text("live")
    queues = page.locator("table").nth(1)
    expect(queues.locator("tbody tr td").first).to_have_text("docs")
    expect(queues.locator("tbody tr td").nth(1)).to_have_text("2")  # queued
    expect(queues.locator("tbody tr td").nth(2)).to_have_text("1")  # running
    call(engine.close())


def test_the_server_checks_json_even_when_the_page_does_not(
    dashboard: Dashboard, page: Page
) -> None:
    engine = Engine(dashboard.store_url)
    call(engine.enqueue(flows.approval, "doc", run_id="needs-input"))
    page.goto(f"{dashboard.url}/run?id=needs-input")
    csrf = page.get_attribute("meta[name=csrf]", "content")
    assert csrf
    response = page.request.post(
        f"{dashboard.url}/actions/send",
        form={
            "run_id": "needs-input",
            "key": "approval",
            "value": "{oops",
            "csrf": csrf,
        },
        headers={"Origin": dashboard.url},
    )
    assert response.status == 400
    assert "is not JSON" in response.text()
    response = page.request.post(
        f"{dashboard.url}/actions/resume",
        form={"run_id": "missing-run", "csrf": csrf},
        headers={"Origin": dashboard.url},
    )
    assert response.status == 400
    assert "does not exist" in response.text()
    call(engine.close())


def test_an_encrypted_store_shows_its_runs_and_says_values_need_the_key(
    dashboard: Dashboard, page: Page
) -> None:
    key = KeyRing({"k1": bytes(range(32))}, current="k1")
    engine = Engine(dashboard.store_url, encryption_key=key)
    engine.run_sync(flows.pipeline, 5, run_id="sealed")
    page.goto(f"{dashboard.url}/run?id=sealed")  # the dashboard has no key
    expect(page.locator("#live")).to_have_attribute("data-status", "succeeded")
    expect(page.locator("table.steps tbody tr")).to_have_count(3)
    expect(page.locator("table.steps").first).to_contain_text("encrypted")
    assert "doc 5" not in page.content()
    call(engine.close())


@workflow
async def long_run(n: int) -> int:
    for i in range(n):
        await numbered(i)
    return n


@step
async def numbered(i: int) -> int:
    return i


def test_a_long_run_shows_its_steps_a_page_at_a_time_newest_first(
    dashboard: Dashboard, page: Page
) -> None:
    engine = Engine(dashboard.store_url)
    assert engine.run_sync(long_run, 250, run_id="long") == 250
    rows = page.locator("table.steps tbody tr")
    page.goto(f"{dashboard.url}/run?id=long")
    expect(rows).to_have_count(100)
    expect(rows.first.locator("td").first).to_have_text("151")
    expect(page.locator("nav.pages").first).to_contain_text("steps 151 to 250 of 250")
    expect(page.locator("svg.waterfall text")).to_have_count(100)
    page.locator("nav.pages").first.get_by_text("Oldest").click()
    expect(rows.first.locator("td").first).to_have_text("1")
    expect(rows.last.locator("td").first).to_have_text("100")
    page.locator("nav.pages").first.get_by_text("Newer").click()
    expect(rows.first.locator("td").first).to_have_text("101")
    expect(page.locator("nav.pages").first).to_contain_text("steps 101 to 200")
    page.locator("nav.pages").first.get_by_text("Newest").click()
    expect(rows).to_have_count(100)
    expect(rows.last.locator("td").first).to_have_text("250")
    call(engine.close())


def test_a_finished_runs_page_stops_refreshing_while_an_unfinished_ones_goes_on(
    dashboard: Dashboard, page: Page
) -> None:
    engine = Engine(dashboard.store_url)
    assert engine.run_sync(long_run, 3, run_id="done") == 3
    call(engine.enqueue(long_run, 3, run_id="queued"))
    fragments: list[str] = []
    page.on(
        "request",
        lambda r: fragments.append(r.url) if r.headers.get("x-fragment") else None,
    )
    page.clock.install()  # the page's timers run when the test says so
    page.goto(f"{dashboard.url}/run?id=done")
    expect(page.locator("#live")).to_have_attribute("data-terminal", "1")
    page.clock.run_for(60_000)  # thirty refresh periods
    page.goto(f"{dashboard.url}/run?id=queued")
    expect(page.locator("#live")).to_have_attribute("data-terminal", "0")
    assert fragments == []
    with page.expect_request(lambda r: r.headers.get("x-fragment") == "1"):
        page.clock.run_for(2_001)
    assert fragments == [f"{dashboard.url}/run?id=queued"]
    call(engine.close())
