"""Redis: the step cache's index (`SupportsStepCache`), one hash `{prefix}stepcache`.

Each field is a cache key; its value the packed entry (step, workflow, run id,
seq, created, expiry). An expired entry is a miss (time is passed in); `clear`
removes entries, and a lookup whose row is gone is a miss. The set
`{prefix}stepcache:run:{run_id}` lists the keys a run recorded, so that
`delete_runs.lua` deletes the entries still naming its rows with the run.
"""

from __future__ import annotations

from collections.abc import Sequence

from resumable.errors import CorruptCheckpointError
from resumable.stores.protocol import StepRecord
from resumable.stores.redis.codec import as_bytes, pack, unpack
from resumable.stores.redis.codec import to_bytes as _b
from resumable.stores.redis.codec import to_str as _s
from resumable.stores.redis.connection import RedisClient
from resumable.stores.redis.runs import step_from_packed
from resumable.stores.step_cache import CacheEntry


def _index(conn: RedisClient) -> bytes:
    return conn.keys.base + b"stepcache"


def _by_run(conn: RedisClient, run_id: str) -> bytes:
    """The set of the keys whose entries `run_id` recorded (some may point elsewhere now)."""
    return _index(conn) + b":run:" + _b(run_id)


def _packed(entry: CacheEntry) -> bytes:
    expires = None if entry.expires_at_ms is None else str(entry.expires_at_ms)
    return pack(
        [
            _b(entry.step),
            _b(entry.workflow),
            _b(entry.run_id),
            str(entry.seq).encode(),
            str(entry.created_at_ms).encode(),
            None if expires is None else expires.encode(),
        ]
    )


def _entry(key: str, data: bytes) -> CacheEntry:
    try:
        step, workflow, run_id, seq, created, expires = unpack(data)
        if step is None or workflow is None or run_id is None:
            raise ValueError("a name is missing")
        return CacheEntry(
            key=key,
            step=_s(step),
            workflow=_s(workflow),
            run_id=_s(run_id),
            seq=int(seq or b""),
            created_at_ms=int(created or b""),
            expires_at_ms=None if expires is None else int(expires),
        )
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptCheckpointError(
            place=f"step cache entry {key!r}", detail=str(exc)
        ) from exc


async def put_cache_entries(conn: RedisClient, entries: Sequence[CacheEntry]) -> None:
    """`SupportsStepCache.put_cache_entries`: one HSET (the last write of a key wins)."""
    if not entries:
        return
    client = await conn.ready()
    fields: dict[str | bytes, bytes] = {e.key: _packed(e) for e in entries}
    by_run: dict[str, list[str]] = {}
    for entry in entries:
        by_run.setdefault(entry.run_id, []).append(entry.key)
    with conn.boundary("put cache entries"):
        async with client.pipeline(transaction=True) as pipe:  # MULTI/EXEC
            pipe.hset(_index(conn), mapping=fields)  # type: ignore[arg-type]
            for run_id, keys in by_run.items():  # `delete_runs.lua` deletes these
                pipe.sadd(_by_run(conn, run_id), *keys)
            await pipe.execute()


async def lookup_cache(
    conn: RedisClient, key: str, *, now_ms: int
) -> tuple[CacheEntry, StepRecord] | None:
    """`SupportsStepCache.lookup_cache`: the entry, then the row it names."""
    client = await conn.ready()
    with conn.boundary("look up cache"):
        data = await client.hget(_index(conn), key)
    if data is None:
        return None
    entry = _entry(key, as_bytes(data))
    if not entry.is_live(now_ms):
        return None
    with conn.boundary("look up cache"):
        row = await client.hget(conn.keys.steps(entry.run_id), str(entry.seq))
    if row is None:
        return None
    return entry, step_from_packed(entry.run_id, entry.seq, as_bytes(row))


async def clear_cache(
    conn: RedisClient, *, step: str | None, workflow: str | None
) -> int:
    """`SupportsStepCache.clear_cache`: the matching fields, deleted."""
    client = await conn.ready()
    with conn.boundary("clear cache"):
        found = await client.hgetall(_index(conn))
    doomed = []
    for field, data in found.items():
        key = _s(as_bytes(field))
        entry = _entry(key, as_bytes(data))
        if (step is None or entry.step == step) and (
            workflow is None or entry.workflow == workflow
        ):
            doomed.append(field)
    if not doomed:
        return 0
    with conn.boundary("clear cache"):
        return int(await client.hdel(_index(conn), *doomed))
