"""RedisStore's runs and their journals and inputs, and the listing of runs.

A run is the hash `run:<id>` (the truth: every script re-checks it), its journal
`steps:<id>` (seq -> packed step), its inputs `inputs:<id>`. Each write is one
script of `scripts/` that keeps the indexes in step; the reads are plain commands.

Runs are listed from the narrowest index the query names (parent, fork, queue,
workflow, status, or every run), paged newest first, and matched in Python with
`_rules.matches`; counts come from the counts the scripts keep where those answer.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncGenerator, Collection, Mapping
from typing import Any, Final, cast

from redis.asyncio import Redis

from resumable.errors import CorruptCheckpointError, LeaseLost, RunNotFound
from resumable.stores import _rules
from resumable.stores._records import converter
from resumable.stores.protocol import (
    RUN_STATUSES,
    DeleteResult,
    InputRecord,
    Lease,
    RunQuery,
    RunRecord,
    RunStatus,
    RunUpdate,
    StepRecord,
    StepStatus,
)
from resumable.stores.redis.codec import (
    as_bytes,
    bytes_dict,
    int_or_zero,
    num,
    pack,
    pairs,
    text_or_none,
    unpack,
)
from resumable.stores.redis.codec import to_bytes as _b
from resumable.stores.redis.codec import to_str as _s
from resumable.stores.redis.connection import Keys, RedisClient


def run_fields(run: RunRecord) -> list[tuple[str, bytes]]:
    """The run's hash fields (a None field is left out)."""
    values: list[tuple[str, str | bytes | int | None]] = [
        ("workflow", run.workflow),
        ("status", run.status),
        ("input", run.input),
        ("output", run.output),
        ("created_at_ms", run.created_at_ms),
        ("updated_at_ms", run.updated_at_ms),
        ("parent_id", run.parent_id),
        ("forked_from", run.forked_from),
        ("fork_seq", run.fork_seq),
        ("queue", run.queue),
        ("lease_owner", run.lease_owner),
        ("lease_expires_at_ms", run.lease_expires_at_ms),
        ("fence", run.fence),
        ("wake_at_ms", run.wake_at_ms),
        ("expires_at_ms", run.expires_at_ms),
        ("version", run.version),
    ]
    encoded: list[tuple[str, bytes]] = []
    for name, value in values:
        if value is None:
            continue
        if isinstance(value, bytes):
            encoded.append((name, value))
        elif isinstance(value, str):
            encoded.append((name, _b(value)))
        else:
            encoded.append((name, num(value)))
    return encoded


@converter("run", lambda run_id, found: f"run {run_id!r}")
def run_from_hash(run_id: str, found: Mapping[bytes, bytes]) -> RunRecord:
    """The run its hash holds (`run_fields` reversed)."""

    def text(name: str) -> str | None:
        return text_or_none(found.get(name.encode()))

    def number(name: str) -> int | None:
        value = found.get(name.encode())
        return None if value is None else int(value)

    return RunRecord(
        run_id=run_id,
        workflow=text("workflow") or "",
        status=cast("RunStatus", text("status")),
        input=found.get(b"input", b""),
        output=found.get(b"output"),
        created_at_ms=number("created_at_ms") or 0,
        updated_at_ms=number("updated_at_ms") or 0,
        parent_id=text("parent_id"),
        forked_from=text("forked_from"),
        fork_seq=number("fork_seq"),
        queue=text("queue"),
        lease_owner=text("lease_owner"),
        lease_expires_at_ms=number("lease_expires_at_ms") or 0,
        fence=number("fence") or 0,
        wake_at_ms=number("wake_at_ms"),
        expires_at_ms=number("expires_at_ms"),
        version=text("version"),
    )


def step_packed(step: StepRecord) -> bytes:
    """A step as the journal hash holds it (`delete_runs.lua` sizes items 3 and 7)."""
    return pack(
        [
            _b(step.name),
            _b(step.fingerprint),
            _b(step.status),
            step.output,
            num(step.attempts),
            num(step.started_at_ms),
            num(step.finished_at_ms),
            step.usage,
        ]
    )


@converter("input")
def inputs_from_hash(found: Mapping[Any, Any]) -> dict[str, bytes]:
    """Each input's value by key, from the inputs hash."""
    return {_s(key): unpack(packed)[0] or b"" for key, packed in found.items()}


@converter(
    "step",
    lambda run_id, seq, data: (
        f"run {run_id!r} step #{_s(seq) if isinstance(seq, bytes) else seq}"
    ),
)
def step_from_packed(run_id: str, seq: bytes | int, data: bytes) -> StepRecord:
    """The step `step_packed` packed."""
    name, fingerprint, status, output, attempts, started, finished, usage = unpack(data)
    return StepRecord(
        run_id=run_id,
        seq=int(seq),
        name=text_or_none(name) or "",
        fingerprint=text_or_none(fingerprint) or "",
        status=cast("StepStatus", text_or_none(status)),
        output=output,
        attempts=int_or_zero(attempts),
        started_at_ms=int_or_zero(started),
        finished_at_ms=int_or_zero(finished),
        usage=usage,
    )


# --- runs -----------------------------------------------------------------------
async def create_run(conn: RedisClient, run: RunRecord) -> RunRecord:
    """`Store.create_run`: the stored run if one has the id already, else `run`."""
    fields: list[bytes] = []
    for name, value in run_fields(run):
        fields += [name.encode(), value]
    result = await conn.script(
        "create_run",
        [conn.keys.run(run.run_id)],
        [conn.keys.base, _b(run.run_id), *fields],
        run_id=run.run_id,
    )
    await conn.warn_if_unpersisted()
    if isinstance(result, list):
        return run_from_hash(run.run_id, pairs(result))
    return run


async def get_run(conn: RedisClient, run_id: str) -> RunRecord | None:
    """`Store.get_run`: the run's hash, read."""
    client = await conn.ready()
    with conn.boundary("get run"):
        found = await client.hgetall(conn.keys.run(run_id))
    return run_from_hash(run_id, bytes_dict(found)) if found else None


async def acquire_lease(
    conn: RedisClient,
    run_id: str,
    *,
    owner: str,
    now_ms: int,
    ttl_ms: int,
    take_over: str | None = None,
) -> Lease | None:
    """`Store.acquire_lease`: the run's fence bumped if its lease is free (or taken over)."""
    expires = now_ms + ttl_ms
    result = await conn.script(
        "acquire_lease",
        [conn.keys.run(run_id)],
        [
            conn.keys.base,
            _b(run_id),
            _b(owner),
            num(now_ms),
            num(expires),
            b"1" if take_over is not None else b"0",
            _b(take_over or ""),
        ],
        run_id=run_id,
    )
    if result == -1:
        raise RunNotFound(run_id=run_id)
    if result == 0:
        return None
    fence, taken_from = result
    return Lease(
        run_id=run_id,
        owner=owner,
        fence=int(fence),
        expires_at_ms=expires,
        taken_from=None if taken_from is None else _s(taken_from),
    )


async def renew_lease(
    conn: RedisClient, run_id: str, *, fence: int, now_ms: int, ttl_ms: int
) -> None:
    """`Store.renew_lease`: LeaseLost unless the run still holds `fence`."""
    renewed = await conn.script(
        "renew_lease",
        [conn.keys.run(run_id)],
        [conn.keys.base, _b(run_id), num(fence), num(now_ms + ttl_ms)],
        run_id=run_id,
    )
    if not renewed:
        raise LeaseLost(run_id=run_id, fence=fence)


async def update_run(
    conn: RedisClient, run_id: str, *, fence: int, update: RunUpdate
) -> None:
    """`Store.update_run`: LeaseLost unless the run still holds `fence`."""
    updated = await conn.script(
        "update_run",
        [conn.keys.run(run_id)],
        [
            conn.keys.base,
            _b(run_id),
            num(fence),
            _b(update.status),
            num(update.now_ms),
            b"0" if update.output is None else b"1",
            update.output or b"",
            b"" if update.wake_at_ms is None else num(update.wake_at_ms),
            b"" if update.expires_at_ms is None else num(update.expires_at_ms),
        ],
        run_id=run_id,
    )
    if not updated:
        raise LeaseLost(run_id=run_id, fence=fence)


async def cancel_run(conn: RedisClient, run_id: str, *, now_ms: int) -> RunRecord:
    """`Store.cancel_run`: the run as the script left it."""
    flat = await conn.script(
        "cancel_run",
        [conn.keys.run(run_id)],
        [conn.keys.base, _b(run_id), num(now_ms)],
        run_id=run_id,
    )
    if not flat:
        raise RunNotFound(run_id=run_id)
    return run_from_hash(run_id, pairs(flat))


async def reopen_run(conn: RedisClient, run_id: str, *, now_ms: int) -> bool:
    """`Store.reopen_run`: whether the script reopened it."""
    result = await conn.script(
        "reopen_run",
        [conn.keys.run(run_id)],
        [conn.keys.base, _b(run_id), num(now_ms)],
        run_id=run_id,
    )
    if result == -1:
        raise RunNotFound(run_id=run_id)
    return bool(result)


async def delete_runs(conn: RedisClient, run_ids: Collection[str]) -> DeleteResult:
    """`Store.delete_runs`: one script deletes the runs, their journals, inputs, indexes."""
    ids = list(run_ids)
    if not ids:
        return DeleteResult()
    result = await conn.script(
        "delete_runs",
        [conn.keys.runs],
        [conn.keys.base, *(_b(run_id) for run_id in ids)],
    )
    deleted = tuple(_s(run_id) for run_id in result[3:])
    return DeleteResult(
        runs=len(deleted),
        steps=int(result[0]),
        inputs=int(result[1]),
        run_ids=deleted,
        bytes=int(result[2]),
    )


async def count_all_runs(conn: RedisClient) -> None:
    """Build the run counts (`counts`) from every run: the schema 1 -> 2 migration."""
    await conn.script(
        "count_all_runs",
        [conn.keys.meta],
        [conn.keys.base, *(_b(status) for status in RUN_STATUSES)],
    )


# --- journal --------------------------------------------------------------------
async def load_journal(
    conn: RedisClient, run_id: str, *, up_to_seq: int | None = None
) -> list[StepRecord]:
    """`Store.load_journal`: the journal hash, read and sorted by seq."""
    client = await conn.ready()
    with conn.boundary("load journal"):
        found = bytes_dict(await client.hgetall(conn.keys.steps(run_id)))
    steps = [step_from_packed(run_id, seq, data) for seq, data in found.items()]
    steps.sort(key=lambda step: step.seq)
    return [s for s in steps if up_to_seq is None or s.seq <= up_to_seq]


async def commit_step(conn: RedisClient, step: StepRecord, *, fence: int) -> None:
    """`Store.commit_step`: LeaseLost unless the run still holds `fence`."""
    committed = await conn.script(
        "commit_step",
        [conn.keys.run(step.run_id), conn.keys.steps(step.run_id)],
        [num(fence), num(step.seq), step_packed(step)],
        run_id=step.run_id,
        seq=step.seq,
    )
    if not committed:
        raise LeaseLost(run_id=step.run_id, seq=step.seq, fence=fence)


# --- inputs ---------------------------------------------------------------------
async def send_input(conn: RedisClient, record: InputRecord) -> bool:
    """`Store.send_input`: whether the key was new (the script wakes a waiting run)."""
    result = await conn.script(
        "send_input",
        [conn.keys.run(record.run_id), conn.keys.inputs(record.run_id)],
        [
            conn.keys.base,
            _b(record.run_id),
            _b(record.key),
            pack([record.value, num(record.sent_at_ms)]),
            num(record.sent_at_ms),
        ],
        run_id=record.run_id,
    )
    if result == -1:
        raise RunNotFound(run_id=record.run_id)
    return bool(result)


async def get_inputs(conn: RedisClient, run_id: str) -> dict[str, bytes]:
    """`Store.get_inputs`: the inputs hash, read."""
    client = await conn.ready()
    with conn.boundary("get inputs"):
        found = bytes_dict(await client.hgetall(conn.keys.inputs(run_id)))
    return inputs_from_hash(found)


async def list_inputs(conn: RedisClient, run_id: str) -> list[InputRecord]:
    """`Store.list_inputs`: the inputs hash, read, oldest first."""
    client = await conn.ready()
    with conn.boundary("list inputs"):
        found = bytes_dict(await client.hgetall(conn.keys.inputs(run_id)))
    records = []
    for key, packed in found.items():
        value, sent_at_ms = unpack(packed)[:2]
        records.append(
            InputRecord(
                run_id=run_id,
                key=_s(key),
                value=value or b"",
                sent_at_ms=int(sent_at_ms or 0),
            )
        )
    return sorted(records, key=lambda rec: (rec.sent_at_ms, rec.key))


# --- listing --------------------------------------------------------------------
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
        found = bytes_dict(await client.hgetall(conn.keys.counts))
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
        run_from_hash(_s(member), bytes_dict(found))
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
            rows = [(float(score), as_bytes(member)) for member, score in found]
            # runs created in the same ms as `after` and listed before it
            self.rows = [row for row in rows if self.after is None or row < self.after]
        self.rows.reverse()
