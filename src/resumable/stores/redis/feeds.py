"""Run feeds on Redis (`KeepsFeeds`): one hash per run, written by `append_feed.lua`.

The hash holds each channel's entries under `e<prefix>:<offset>`, its last offset
under `n<prefix>` and the keys it saw under `t<prefix>:<once_key>`, where the
prefix is `<length>:<channel>` so that no two channels' fields can meet.
`delete_runs.lua` deletes the hash with the run.
"""

from __future__ import annotations

from collections.abc import Sequence

from resumable.errors import CorruptCheckpointError, RunNotFound
from resumable.stores.feeds import FeedEntry
from resumable.stores.redis.codec import num, to_bytes
from resumable.stores.redis.codec import to_bytes as _b
from resumable.stores.redis.connection import RedisClient


def _prefix(channel: str) -> bytes:
    name = _b(channel)
    return num(len(name)) + b":" + name


async def append_feed(
    conn: RedisClient,
    run_id: str,
    channel: str,
    payloads: Sequence[bytes],
    *,
    now_ms: int,
    once_key: str | None,
) -> int | None:
    """`KeepsFeeds.append_feed`: the script appends, or sees the once_key and returns 0."""
    result = await conn.script(
        "append_feed",
        [conn.keys.run(run_id), conn.keys.of(b"feed:", run_id)],
        [_prefix(channel), _b(once_key or ""), num(now_ms), *payloads],
        run_id=run_id,
    )
    if result == -1:
        raise RunNotFound(run_id=run_id)
    return int(result) if result else None


async def read_feed(
    conn: RedisClient, run_id: str, channel: str, *, after: int, limit: int
) -> list[FeedEntry]:
    """`KeepsFeeds.read_feed`: one HMGET of the next `limit` offsets."""
    if limit <= 0:
        return []
    prefix = b"e" + _prefix(channel) + b":"
    offsets = range(max(after, 0) + 1, max(after, 0) + limit + 1)
    client = await conn.ready()
    with conn.boundary("read feed"):
        found = await client.hmget(
            conn.keys.of(b"feed:", run_id), [prefix + num(o) for o in offsets]
        )
    entries: list[FeedEntry] = []
    for offset, value in zip(offsets, found, strict=True):
        if value is None:
            break
        raw = value if isinstance(value, bytes) else to_bytes(value)
        created, sep, payload = raw.partition(b":")
        if not sep or not created.isdigit():
            raise CorruptCheckpointError(
                place=f"run {run_id!r}, feed {channel!r} entry {offset}",
                detail="no creation time before the payload",
            )
        entries.append(
            FeedEntry(
                run_id=run_id,
                channel=channel,
                offset=offset,
                payload=payload,
                created_at_ms=int(created),
            )
        )
    return entries
