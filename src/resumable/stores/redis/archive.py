"""RedisStore's archive: a run's journal, or a thread's older snapshots, swapped for a stub.

The archived rows go to an object (written and read by `resumable.stores.archive`);
the store keeps a stub saying where, and the swaps are scripts, fenced or checked
so that nothing changed since the rows were read:

    archived:<run>    string  the run's packed stub (`archive_journal.lua`,
                              `restore_journal.lua` swap it with the journal)
    archived          zset    archived run ids (score 0), listed by id
    tstub:<thread>    hash    `key`: the object's key, `stub`: the packed stub
    tstubs            zset    archived thread ids, listed by id

Thread stubs are a key family absent on data written before them, so no migration
is needed; `archive_snapshots.lua` and `restore_snapshots.lua` are atomic with
`save_snapshot.lua`'s check that the chunks it names exist.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence

from resumable.stores._records import converter
from resumable.stores.protocol import InputRecord, SnapshotRecord, StepRecord
from resumable.stores.redis.codec import as_bytes, int_or_zero, num, pack, unpack
from resumable.stores.redis.codec import to_bytes as _b
from resumable.stores.redis.codec import to_str as _s
from resumable.stores.redis.connection import RedisClient
from resumable.stores.redis.runs import step_packed
from resumable.stores.redis.snapshots import refs_argv, snapshot_packed
from resumable.stores.stubs import (
    ArchiveStub,
    ThreadStub,
    keys_of,
    most_run_refs,
    most_thread_refs,
    namespaces_of,
)


# --- runs -----------------------------------------------------------------------
def stub_packed(stub: ArchiveStub) -> bytes:
    """A run's archive stub as stored."""
    return pack(
        [
            _b(stub.key),
            num(stub.size),
            num(stub.steps),
            num(stub.inputs),
            num(stub.fence),
            num(stub.archived_at_ms),
            "\n".join(stub.refers_to).encode(),
        ]
    )


@converter("archive stub", lambda run_id, packed: f"run {run_id!r} archive stub")
def stub_from_packed(run_id: str, packed: bytes) -> ArchiveStub:
    """The run's archive stub back from `stub_packed`."""
    key, size, steps, inputs, fence, archived, refers_to = unpack(packed)
    records, values = int_or_zero(steps), int_or_zero(inputs)
    return ArchiveStub(
        run_id=run_id,
        key=_s(key or b""),
        size=int_or_zero(size),
        steps=records,
        inputs=values,
        fence=int_or_zero(fence),
        archived_at_ms=int_or_zero(archived),
        refers_to=keys_of(
            refers_to or b"", most=most_run_refs(records, values), lines=True
        ),
    )


async def archive_journal(conn: RedisClient, stub: ArchiveStub) -> bool:
    """Swap the run's journal and inputs for `stub`, if unchanged since they were read."""
    keys = conn.keys
    run_id = stub.run_id
    done = await conn.script(
        "archive_journal",
        [
            keys.run(run_id),
            keys.steps(run_id),
            keys.inputs(run_id),
            keys.stub(run_id),
            keys.stubs,
        ],
        [
            num(stub.fence),
            num(stub.steps),
            num(stub.inputs),
            stub_packed(stub),
            _b(run_id),
        ],
        run_id=run_id,
    )
    return bool(done)


async def load_archive_stub(conn: RedisClient, run_id: str) -> ArchiveStub | None:
    """The run's stub, if its journal is archived."""
    client = await conn.ready()
    with conn.boundary("load archive stub"):
        packed = await client.get(conn.keys.stub(run_id))
    return None if packed is None else stub_from_packed(run_id, as_bytes(packed))


async def restore_journal(
    conn: RedisClient,
    stub: ArchiveStub,
    steps: Sequence[StepRecord],
    inputs: Sequence[InputRecord],
) -> bool:
    """Put the journal and inputs back and drop the stub, if it is still `stub`."""
    keys, run_id = conn.keys, stub.run_id
    args = [stub_packed(stub), _b(run_id), num(len(steps))]
    for step in steps:
        args += [num(step.seq), step_packed(step)]
    for record in inputs:
        args += [_b(record.key), pack([record.value, num(record.sent_at_ms)])]
    done = await conn.script(
        "restore_journal",
        [keys.stub(run_id), keys.steps(run_id), keys.inputs(run_id), keys.stubs],
        args,
        run_id=run_id,
    )
    return bool(done)


async def list_archive_stubs(
    conn: RedisClient, *, after: str | None, limit: int
) -> list[ArchiveStub]:
    """Archived runs' stubs, by run id after `after`."""
    client = await conn.ready()
    low = b"-" if after is None else b"(" + _b(after)
    with conn.boundary("list archive stubs"):
        ids = await client.zrangebylex(conn.keys.stubs, low, b"+", 0, limit)
        found = (
            await client.mget([conn.keys.stub(_s(as_bytes(i))) for i in ids])
            if ids
            else []
        )
    return [
        stub_from_packed(_s(as_bytes(i)), as_bytes(packed))
        for i, packed in zip(ids, found, strict=True)
        if packed is not None
    ]


# --- threads --------------------------------------------------------------------
def thread_stub_packed(stub: ThreadStub) -> bytes:
    """A thread's archive stub as stored (the `stub` field of `tstub:<thread>`)."""
    return pack(
        [
            _b(stub.key),
            num(stub.size),
            num(stub.snapshots),
            num(stub.chunks),
            num(stub.archived_at_ms),
            json.dumps([list(pair) for pair in stub.newest]).encode(),
            json.dumps(list(stub.refers_to)).encode(),
        ]
    )


@converter(
    "thread archive stub", lambda thread_id, packed: f"thread {thread_id!r} stub"
)
def thread_stub_from_packed(thread_id: str, packed: bytes) -> ThreadStub:
    """The thread's archive stub back from `thread_stub_packed`."""
    key, size, snapshots, chunks, archived, newest, refers_to = unpack(packed)
    held, pieces = int_or_zero(snapshots), int_or_zero(chunks)
    return ThreadStub(
        thread_id=thread_id,
        key=_s(key or b""),
        size=int_or_zero(size),
        snapshots=held,
        chunks=pieces,
        archived_at_ms=int_or_zero(archived),
        newest=namespaces_of(json.loads(newest or b"[]")),
        refers_to=keys_of(refers_to or b"[]", most=most_thread_refs(held, pieces)),
    )


async def archive_snapshots(
    conn: RedisClient,
    stub: ThreadStub,
    *,
    moved: Collection[tuple[str, str]],
    chunks: Collection[str],
    replaces: str | None,
) -> bool:
    """Swap the thread's `moved` snapshots for its stub, if none changed meanwhile."""
    keys, pairs = conn.keys, sorted(set(moved))
    done = await conn.script(
        "archive_snapshots",
        [keys.of(b"tstub:", stub.thread_id), keys.base + b"tstubs"],
        [
            keys.base,
            b"" if replaces is None else _b(replaces),
            _b(stub.key),
            thread_stub_packed(stub),
            _b(stub.thread_id),
            num(len(pairs)),
            *(_b(part) for pair in pairs for part in pair),
            *(_b(digest) for digest in chunks),
        ],
    )
    return bool(done)


async def load_thread_stub(conn: RedisClient, thread_id: str) -> ThreadStub | None:
    """The thread's stub, if it is archived."""
    client = await conn.ready()
    with conn.boundary("load thread stub"):
        packed = await client.hget(conn.keys.of(b"tstub:", thread_id), "stub")
    return (
        None if packed is None else thread_stub_from_packed(thread_id, as_bytes(packed))
    )


async def restore_snapshots(
    conn: RedisClient,
    stub: ThreadStub,
    snapshots: Sequence[SnapshotRecord],
    chunks: Mapping[str, bytes],
) -> bool:
    """Put the stub's snapshots and chunks back and drop the stub, if it is current."""
    keys = conn.keys
    args = [
        keys.base,
        _b(stub.key),
        _b(stub.thread_id),
        num(len(chunks)),
        *(part for digest, data in chunks.items() for part in (_b(digest), data)),
    ]
    for snapshot in snapshots:
        if snapshot.thread_id == stub.thread_id:
            args += [
                _b(snapshot.namespace),
                _b(snapshot.checkpoint_id),
                snapshot_packed(snapshot),
                num(snapshot.created_at_ms),
                *refs_argv(snapshot),
            ]
    done = await conn.script(
        "restore_snapshots",
        [
            keys.of(b"tstub:", stub.thread_id),
            keys.base + b"tstubs",
            keys.threads,
            keys.of(b"nss:", stub.thread_id),
        ],
        args,
    )
    return bool(done)


async def list_thread_stubs(
    conn: RedisClient, *, after: str | None, limit: int
) -> list[ThreadStub]:
    """Archived threads' stubs, by thread id after `after`."""
    client = await conn.ready()
    low = b"-" if after is None else b"(" + _b(after)
    with conn.boundary("list thread stubs"):
        ids = await client.zrangebylex(conn.keys.base + b"tstubs", low, b"+", 0, limit)
        found = [
            await client.hget(conn.keys.of(b"tstub:", _s(as_bytes(i))), "stub")
            for i in ids
        ]
    return [
        thread_stub_from_packed(_s(as_bytes(i)), as_bytes(packed))
        for i, packed in zip(ids, found, strict=True)
        if packed is not None
    ]
