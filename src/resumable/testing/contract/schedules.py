"""`StoreContract`'s schedules part: a store declaring `KeepsSchedules`.

A store without the capability skips these tests (workers of a scheduled
workflow then refuse to start on it, raising CapabilityMissing).
"""

from __future__ import annotations

import asyncio

from resumable.stores.capabilities import KeepsSchedules
from resumable.stores.protocol import ScheduleRecord, Store
from resumable.testing.contract.records import T0, WEIRD_IDS


def _keeping(store: Store) -> KeepsSchedules:
    if not isinstance(store, KeepsSchedules):
        import pytest  # the suite runs under pytest; resumable does not need it

        pytest.skip(f"{type(store).__name__} does not declare KeepsSchedules")
    return store


def schedule_record(name: str, **changes: object) -> ScheduleRecord:
    """A schedule's definition as a worker saves it, with `changes` applied."""
    fields: dict[str, object] = {
        "name": name,
        "workflow": "app:digest",
        "cron": "*/15 * * * *",
        "tz": "Europe/Paris",
        "catch_up": 0,
        "created_at_ms": T0,
        "updated_at_ms": T0,
    }
    fields.update(changes)
    return ScheduleRecord(**fields)  # type: ignore[arg-type]  # the fields above


class ScheduleStoreContract:
    """Behaviour of `KeepsSchedules` (see `StoreContract`)."""

    async def test_a_saved_schedule_is_listed_as_saved(self, store: Store) -> None:
        schedules = _keeping(store)
        assert await schedules.list_schedules() == []
        saved = await schedules.save_schedule(schedule_record("b"))
        await schedules.save_schedule(schedule_record("a", catch_up=3))
        assert saved == schedule_record("b")
        listed = await schedules.list_schedules()
        assert [s.name for s in listed] == ["a", "b"]
        assert listed[0] == schedule_record("a", catch_up=3)
        assert listed[0].paused is False
        assert listed[0].last_tick_ms is None

    async def test_saving_again_takes_the_definition_and_keeps_the_state(
        self, store: Store
    ) -> None:
        schedules = _keeping(store)
        await schedules.save_schedule(schedule_record("s"))
        await schedules.mark_schedule_ticked("s", tick_ms=T0 + 900_000, now_ms=T0 + 1)
        await schedules.set_schedule_paused(
            "s", paused=True, through_ms=None, now_ms=T0 + 2
        )
        saved = await schedules.save_schedule(
            schedule_record(
                "s",
                workflow="app:other",
                cron="0 * * * *",
                tz="UTC",
                catch_up=5,
                created_at_ms=T0 + 50,
                updated_at_ms=T0 + 50,
            )
        )
        assert saved == ScheduleRecord(
            name="s",
            workflow="app:other",
            cron="0 * * * *",
            tz="UTC",
            catch_up=5,
            paused=True,
            last_tick_ms=T0 + 900_000,
            created_at_ms=T0,
            updated_at_ms=T0 + 50,
        )
        assert await schedules.list_schedules() == [saved]

    async def test_the_last_tick_only_moves_forward(self, store: Store) -> None:
        schedules = _keeping(store)
        await schedules.save_schedule(schedule_record("s"))
        assert await schedules.mark_schedule_ticked(
            "s", tick_ms=T0 + 2000, now_ms=T0 + 1
        )
        assert not await schedules.mark_schedule_ticked(
            "s", tick_ms=T0 + 1000, now_ms=T0 + 2
        )
        assert not await schedules.mark_schedule_ticked(
            "s", tick_ms=T0 + 2000, now_ms=T0 + 2
        )
        (found,) = await schedules.list_schedules()
        assert found.last_tick_ms == T0 + 2000
        # concurrent marks (workers racing) leave the latest
        await asyncio.gather(
            *(
                schedules.mark_schedule_ticked("s", tick_ms=T0 + t, now_ms=T0 + 3)
                for t in (5000, 9000, 7000, 3000)
            )
        )
        (found,) = await schedules.list_schedules()
        assert found.last_tick_ms == T0 + 9000

    async def test_marking_a_missing_schedule_changes_nothing(
        self, store: Store
    ) -> None:
        schedules = _keeping(store)
        assert not await schedules.mark_schedule_ticked("nobody", tick_ms=T0, now_ms=T0)
        assert await schedules.list_schedules() == []

    async def test_pause_and_resume_keep_and_raise_the_last_tick(
        self, store: Store
    ) -> None:
        schedules = _keeping(store)
        assert (
            await schedules.set_schedule_paused(
                "nobody", paused=True, through_ms=None, now_ms=T0
            )
            is None
        )
        await schedules.save_schedule(schedule_record("s"))
        paused = await schedules.set_schedule_paused(
            "s", paused=True, through_ms=None, now_ms=T0 + 5
        )
        assert paused is not None
        assert paused.paused is True
        assert paused.last_tick_ms is None
        assert paused.updated_at_ms == T0 + 5
        resumed = await schedules.set_schedule_paused(
            "s", paused=False, through_ms=T0 + 60_000, now_ms=T0 + 6
        )
        assert resumed is not None
        assert resumed.paused is False
        assert resumed.last_tick_ms == T0 + 60_000
        # a resume never moves the last tick back
        again = await schedules.set_schedule_paused(
            "s", paused=False, through_ms=T0 + 1, now_ms=T0 + 7
        )
        assert again is not None
        assert again.last_tick_ms == T0 + 60_000
        assert await schedules.list_schedules() == [again]

    async def test_any_name_is_kept_literally(self, store: Store) -> None:
        schedules = _keeping(store)
        for name in WEIRD_IDS:
            await schedules.save_schedule(schedule_record(name, workflow=name))
        listed = await schedules.list_schedules()
        assert sorted(s.name for s in listed) == sorted(WEIRD_IDS)
        assert all(s.workflow == s.name for s in listed)
        for name in WEIRD_IDS:
            await schedules.mark_schedule_ticked(name, tick_ms=T0 + 7, now_ms=T0)
        assert {s.last_tick_ms for s in await schedules.list_schedules()} == {T0 + 7}
