"""The pure decision of which ticks to start, and how schedules are declared."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from resumable import Engine, workflow
from resumable._engine.cron import Cron
from resumable._engine.schedules import due, run_id_for
from resumable.errors import ScheduleInvalid


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


EVERY_15 = Cron("*/15 * * * *", "UTC")


def test_nothing_is_due_before_the_first_tick() -> None:
    decision = due(
        EVERY_15,
        after_ms=ms("2026-11-28 10:00"),
        now_ms=ms("2026-11-28 10:14:59"),
        catch_up=0,
    )
    assert decision.ticks == ()


def test_the_tick_at_its_exact_time_is_due() -> None:
    decision = due(
        EVERY_15,
        after_ms=ms("2026-11-28 10:00"),
        now_ms=ms("2026-11-28 10:15"),
        catch_up=0,
    )
    assert decision.ticks == (ms("2026-11-28 10:15"),)
    assert decision.skipped == 0


def test_skip_starts_only_the_latest_due_tick_after_downtime() -> None:
    decision = due(
        EVERY_15,
        after_ms=ms("2026-11-28 10:00"),
        now_ms=ms("2026-11-28 11:20"),
        catch_up=0,
    )
    assert decision.ticks == (ms("2026-11-28 11:15"),)
    assert decision.skipped == 4  # 10:15, 10:30, 10:45, 11:00


def test_catch_up_starts_at_most_n_missed_ticks_the_newest_oldest_first() -> None:
    decision = due(
        EVERY_15,
        after_ms=ms("2026-11-28 10:00"),
        now_ms=ms("2026-11-28 11:20"),
        catch_up=2,
    )
    assert decision.ticks == (
        ms("2026-11-28 10:45"),
        ms("2026-11-28 11:00"),
        ms("2026-11-28 11:15"),
    )
    assert decision.caught_up == (ms("2026-11-28 10:45"), ms("2026-11-28 11:00"))
    assert decision.skipped == 2


def test_catch_up_larger_than_the_gap_starts_every_missed_tick() -> None:
    decision = due(
        EVERY_15,
        after_ms=ms("2026-11-28 10:00"),
        now_ms=ms("2026-11-28 10:50"),
        catch_up=10,
    )
    assert decision.ticks == (
        ms("2026-11-28 10:15"),
        ms("2026-11-28 10:30"),
        ms("2026-11-28 10:45"),
    )
    assert decision.skipped == 0


def test_a_long_downtime_on_a_per_second_schedule_is_counted_up_to_a_bound() -> None:
    cron = Cron("* * * * * *", "UTC")
    decision = due(
        cron, after_ms=ms("2026-11-01 00:00"), now_ms=ms("2026-11-28 00:00"), catch_up=0
    )
    assert decision.ticks == (ms("2026-11-28 00:00"),)
    assert decision.skipped > 10_000


def test_the_time_zone_decides_the_tick_across_a_dst_change() -> None:
    paris = Cron("0 9 * * *", "Europe/Paris")
    # 09:00 in Paris is 08:00 UTC in winter (CET) and 07:00 UTC in summer (CEST)
    assert paris.next_after(ms("2026-11-28 00:00")) == ms("2026-11-28 08:00")
    assert paris.next_after(ms("2026-07-01 00:00")) == ms("2026-07-01 07:00")


def test_run_ids_name_the_schedule_and_the_utc_tick() -> None:
    assert (
        run_id_for("digest", ms("2026-11-28 04:15"))
        == "sched:digest:2026-11-28T04:15:00Z"
    )


def test_a_bad_cron_string_fails_at_decoration_naming_the_workflow() -> None:
    with pytest.raises(ScheduleInvalid) as caught:

        @workflow(name="tests.nightly", schedule="every night")
        async def nightly() -> None: ...

    assert "tests.nightly" in str(caught.value)
    assert "'every night'" in str(caught.value)
    assert caught.value.workflow == "tests.nightly"


def test_an_unknown_time_zone_fails_at_decoration() -> None:
    with pytest.raises(ScheduleInvalid, match="Mars/Olympus"):

        @workflow(name="tests.martian", schedule="0 * * * *", tz="Mars/Olympus")
        async def martian() -> None: ...


def test_engine_schedule_checks_the_cron_and_catch_up() -> None:
    @workflow(name="tests.declared")
    async def declared() -> None: ...

    engine = Engine("memory://")
    with pytest.raises(ScheduleInvalid, match="61"):
        engine.schedule(declared, "61 * * * *")
    with pytest.raises(ScheduleInvalid, match="catch_up"):
        engine.schedule(declared, "* * * * *", catch_up=-1)
