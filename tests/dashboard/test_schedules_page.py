"""The Schedules page in a real Chromium: next fire times, pause and resume."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from dashboard.conftest import Dashboard, call
from resumable import Engine, ScheduleView, workflow


@workflow(name="dashboard.nightly")
async def nightly() -> str:
    return "ok"


async def _declare(store_url: str) -> None:
    async with Engine(store_url) as engine:
        engine.schedule(nightly, "0 2 * * *", tz="Europe/Paris", name="nightly-eval")
        checks: list[int] = []

        def second_check(_: object) -> bool:
            checks.append(1)
            return len(checks) > 1

        await engine.worker(poll_s=0.01).run(until=second_check)  # saves it


def test_the_schedules_page_shows_next_fire_times_and_pauses_and_resumes(
    dashboard: Dashboard, page: Page
) -> None:
    page.goto(f"{dashboard.url}/schedules")
    expect(page.locator("p.empty")).to_contain_text("No schedule yet")
    call(_declare(dashboard.store_url))
    page.goto(f"{dashboard.url}/schedules")
    row = page.locator("table.schedules tbody tr")
    expect(row).to_have_count(1)
    cells = row.locator("td")
    expect(cells.nth(0)).to_have_text("nightly-eval")
    expect(cells.nth(1)).to_have_text("active")
    expect(cells.nth(3)).to_have_text("Europe/Paris")
    # 02:00 in Paris is 01:00 UTC in winter (00:00 in summer): three next times
    expect(cells.nth(7)).to_contain_text(":00:00")
    assert cells.nth(7).inner_html().count("<br>") == 2

    page.get_by_role("button", name="Pause").click()
    expect(page.locator("p.flash")).to_have_text("schedule nightly-eval: paused")
    expect(cells.nth(1)).to_have_text("paused")
    expect(cells.nth(7)).to_have_text("-")
    (view,) = call(_views(dashboard.store_url))
    assert view.record.paused

    page.get_by_role("button", name="Resume").click()
    expect(cells.nth(1)).to_have_text("active")
    (view,) = call(_views(dashboard.store_url))
    assert not view.record.paused


async def _views(store_url: str) -> list[ScheduleView]:
    async with Engine(store_url) as engine:
        return list(await engine.schedules())
