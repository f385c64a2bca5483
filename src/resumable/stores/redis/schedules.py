"""Schedules on Redis (`KeepsSchedules`): a hash per schedule, a set of their names.

Writes are Lua scripts (`save_schedule`, `set_schedule_paused`,
`mark_schedule_ticked`), so keeping the state while taking a new definition, and
raising `last_tick_ms` but never lowering it, are each one atomic step.
"""

from __future__ import annotations

from collections.abc import Sequence

from resumable.errors import StoreError
from resumable.stores.protocol import ScheduleRecord
from resumable.stores.redis.codec import (
    as_bytes,
    bytes_dict,
    num,
    pairs,
    to_bytes,
    to_str,
)
from resumable.stores.redis.connection import RedisClient


def schedule_from_hash(
    store: str, name: str, fields: dict[bytes, bytes]
) -> ScheduleRecord:
    """A schedule's hash as its record.

    Raises:
        StoreError: the hash lacks a field or holds a number that is none (it
            was changed by hand); the message names the schedule.
    """
    try:
        last = fields.get(b"last_tick_ms")
        return ScheduleRecord(
            name=name,
            workflow=to_str(fields[b"workflow"]),
            cron=to_str(fields[b"cron"]),
            tz=to_str(fields[b"tz"]),
            catch_up=int(fields[b"catch_up"]),
            paused=fields.get(b"paused") == b"1",
            last_tick_ms=None if last is None else int(last),
            created_at_ms=int(fields[b"created_at_ms"]),
            updated_at_ms=int(fields[b"updated_at_ms"]),
        )
    except (KeyError, ValueError) as exc:
        raise StoreError(
            store=store,
            detail=f"schedule {name!r} is damaged ({type(exc).__name__}: {exc}); "
            f"delete its hash and restart a worker that declares it to save it again",
        ) from exc


async def save_schedule(conn: RedisClient, record: ScheduleRecord) -> ScheduleRecord:
    """`KeepsSchedules.save_schedule`."""
    flat = await conn.script(
        "save_schedule",
        [conn.keys.schedule(record.name), conn.keys.schedules],
        [
            to_bytes(record.name),
            to_bytes(record.workflow),
            to_bytes(record.cron),
            to_bytes(record.tz),
            num(record.catch_up),
            num(record.created_at_ms),
            num(record.updated_at_ms),
        ],
    )
    return schedule_from_hash(conn.url, record.name, pairs(flat))


async def list_schedules(conn: RedisClient) -> list[ScheduleRecord]:
    """`KeepsSchedules.list_schedules`: the set, then each hash (one round trip)."""
    client = await conn.ready()
    with conn.boundary("list schedules"):
        members = await client.smembers(conn.keys.schedules)
        names = sorted(to_str(as_bytes(n)) for n in members)
        async with client.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hgetall(conn.keys.schedule(name))
            found: Sequence[dict[bytes, bytes]] = await pipe.execute()
    return [
        schedule_from_hash(conn.url, name, bytes_dict(fields))
        for name, fields in zip(names, found, strict=True)
        if fields  # a name whose hash is gone (deleted by hand) is no schedule
    ]


async def set_schedule_paused(
    conn: RedisClient, name: str, *, paused: bool, through_ms: int | None, now_ms: int
) -> ScheduleRecord | None:
    """`KeepsSchedules.set_schedule_paused`."""
    flat = await conn.script(
        "set_schedule_paused",
        [conn.keys.schedule(name)],
        [
            b"1" if paused else b"0",
            b"" if through_ms is None else num(through_ms),
            num(now_ms),
        ],
    )
    return schedule_from_hash(conn.url, name, pairs(flat)) if flat else None


async def mark_schedule_ticked(
    conn: RedisClient, name: str, *, tick_ms: int, now_ms: int
) -> bool:
    """`KeepsSchedules.mark_schedule_ticked`."""
    raised = await conn.script(
        "mark_schedule_ticked", [conn.keys.schedule(name)], [num(tick_ms), num(now_ms)]
    )
    return bool(raised == 1)
