"""RedisStore's run listing and counting: index scans merged newest first.

Runs are listed from the narrowest index the query names (parent, fork, queue,
workflow, status, or every run), paged newest first, and matched in Python with
`_rules.matches`; counts come from the counts the scripts keep where those answer.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncGenerator
from typing import Final, cast

from redis.asyncio import Redis

from resumable.errors import CorruptCheckpointError
from resumable.stores import _rules
from resumable.stores.protocol import RunQuery, RunRecord
from resumable.stores.redis import runs as _rec
from resumable.stores.redis.codec import to_bytes as _b
from resumable.stores.redis.codec import to_str as _s
from resumable.stores.redis.connection import RedisClient
from resumable.stores.redis.runs import Keys

PAGE_MAX: Final = 500


async def list_runs(conn: RedisClient, query: RunQuery) -> list[RunRecord]:
    """`Store.list_runs`: the narrowest index drives the scan, the rest is matched."""
    if query.limit <= 0:
        return []
    client = await conn.ready()
    page = min(max(query.limit * 2, 32), PAGE_MAX)
    found: list[RunRecord] = []
    seen: set[bytes] = set()
    batch: list[bytes] = []
    scan = _newest_first(client, _index_keys(conn.keys, query), page, query.after)
    # the narrowest index drives the scan; the other filters apply in Python
    with conn.boundary("list runs"):
        async with contextlib.aclosing(scan):
            async for member in scan:
                if member in seen:  # a run whose status changed mid-scan
                    continue
                seen.add(member)
                batch.append(member)
                if len(batch) >= page:
                    found += await _matching(conn.keys, client, batch, query)
                    batch = []
                    if len(found) >= query.limit:
                        break
        if batch and len(found) < query.limit:
            found += await _matching(conn.keys, client, batch, query)
    found.sort(key=lambda run: (run.created_at_ms, run.run_id), reverse=True)
    return found[: query.limit]


async def count_runs(
    conn: RedisClient, query: RunQuery
) -> dict[tuple[str, str | None], int]:
    """`Store.count_runs`, from the counts the scripts keep where they answer it."""
    if not _is_counted(query):
        return await count_runs_by_reading(conn, query)
    client = await conn.ready()
    with conn.boundary("count runs"):
        found = _rec.bytes_dict(await client.hgetall(conn.keys.counts))
    counts: dict[tuple[str, str | None], int] = {}
    for field, value in found.items():
        key, n = _count_entry(conn.keys.counts, field, value)
        status = key[0]
        wanted = not query.status or status in query.status
        if n > 0 and wanted and query.queue in (None, key[1]):
            counts[key] = n
    return counts


def _count_entry(
    key: bytes, field: bytes, value: bytes
) -> tuple[tuple[str, str | None], int]:
    """A field of the counts hash as ((status, queue), count), checked.

    Raises:
        CorruptCheckpointError: The field or count is not one the scripts write.
    """
    try:
        status, _, queue = _s(field).partition("\n")
        if value.removeprefix(b"-").isdigit() and len(value) < 19:
            return (status, None if queue == "-" else queue[1:]), int(value)
    except UnicodeDecodeError:
        pass
    raise CorruptCheckpointError(
        place=f"the run counts ({_s(key)!r})",
        detail=f"field {field!r:.60} holds {value!r:.40}, not a count of runs; "
        f"restore the hash from a backup (the counts of other filters, such as "
        f"by workflow, are read from the runs themselves and still work)",
    )


async def count_runs_by_reading(
    conn: RedisClient, query: RunQuery
) -> dict[tuple[str, str | None], int]:
    """`count_runs` by reading every run the query's narrowest index holds.

    The plain version of the counts the scripts keep (for the filters those
    cannot answer: workflow, parent, fork, version, prefix, time).
    """
    client = await conn.ready()
    counts: Counter[tuple[str, str | None]] = Counter()
    batch: list[bytes] = []
    scan = _newest_first(client, _index_keys(conn.keys, query), PAGE_MAX, None)
    # no count index: every run the narrowest index holds is read and matched
    with conn.boundary("count runs"):
        async with contextlib.aclosing(scan):
            async for member in scan:
                batch.append(member)
                if len(batch) >= PAGE_MAX:
                    counts.update(
                        (run.status, run.queue)
                        for run in await _matching(conn.keys, client, batch, query)
                    )
                    batch = []
        counts.update(
            (run.status, run.queue)
            for run in await _matching(conn.keys, client, batch, query)
        )
    return dict(counts)


def _index_keys(keys: Keys, query: RunQuery) -> list[bytes]:
    for kind, value in (
        (b"parent:", query.parent_id),
        (b"forks:", query.forked_from),
        (b"queue:", query.queue),
        (b"wf:", query.workflow),
    ):
        if value is not None:
            return [keys.of(kind, value)]
    if query.status:
        return [keys.of(b"st:", status) for status in sorted(set(query.status))]
    return [keys.runs]


async def _newest_first(
    client: Redis,
    keys: list[bytes],
    page: int,
    after: tuple[int, str] | None,
) -> AsyncGenerator[bytes, None]:
    """Members of a few zsets merged by (score, member), highest first.

    With `after`, only those listed after that (created_at_ms, run_id).
    """
    cursors = [Cursor(key, after) for key in keys]
    for cursor in cursors:
        await cursor.fill(client, page)
    while True:
        live = [cursor for cursor in cursors if cursor.rows]
        if not live:
            return
        best = max(live, key=lambda cursor: cursor.rows[-1])
        yield best.rows.pop()[1]
        if not best.rows and not best.done:
            await best.fill(client, page)


async def _matching(
    keys: Keys, client: Redis, members: list[bytes], query: RunQuery
) -> list[RunRecord]:
    if query.run_id_prefix is not None:  # by id alone: no run read for the rest
        prefix = _b(query.run_id_prefix)
        members = [member for member in members if member.startswith(prefix)]
    if not members:
        return []
    async with client.pipeline(transaction=False) as pipe:
        for member in members:
            pipe.hgetall(keys.base + b"run:" + member)
        hashes = await pipe.execute()
    runs = (
        _rec.run_from_hash(_s(member), _rec.bytes_dict(found))
        for member, found in zip(members, hashes, strict=True)
        if found
    )
    return [run for run in runs if _rules.matches(run, query)]


def _is_counted(query: RunQuery) -> bool:
    """Whether the kept counts answer the query: filtered by status and queue only."""
    return (
        query.workflow is None
        and query.parent_id is None
        and query.forked_from is None
        and query.updated_before_ms is None
        and query.version is None
        and query.run_id_prefix is None
        and query.created_since_ms is None
        and query.created_before_ms is None
    )


class Cursor:
    """Pages through one zset from its highest (score, member) down."""

    def __init__(self, key: bytes, after: tuple[int, str] | None = None) -> None:
        self.key = key
        self.offset = 0
        self.done = False
        self.rows: list[tuple[float, bytes]] = []  # lowest first: pop() is the next
        self.top: float | str = "+inf" if after is None else after[0]
        self.after = None if after is None else (float(after[0]), _b(after[1]))

    async def fill(self, client: Redis, page: int) -> None:
        """Read the next page of up to `page` rows below those already read."""
        self.rows = []
        while not self.rows and not self.done:
            found = cast(
                "list[tuple[bytes, float]]",
                await client.zrevrangebyscore(
                    self.key,
                    self.top,
                    "-inf",
                    start=self.offset,
                    num=page,
                    withscores=True,
                ),
            )
            self.offset += len(found)
            self.done = len(found) < page
            rows = [(float(score), _rec.as_bytes(member)) for member, score in found]
            # runs created in the same ms as `after` and listed before it
            self.rows = [row for row in rows if self.after is None or row < self.after]
        self.rows.reverse()
