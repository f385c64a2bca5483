"""RedisStore's snapshots, their chunks and threads.

A thread's namespace is two keys, `cps:<n>:<thread><ns>` (checkpoint ids) and
`cp:<n>:<thread><ns>` (id -> packed snapshot); chunks are shared by hash, with
reference counts. Every write is one Lua script (`scripts/`), which keeps the
chunk reference counts, the orphans set and the threads zset in step with the
records.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Mapping, Sequence
from typing import Final

from redis.asyncio import Redis

from resumable.errors import ChunksMissing
from resumable.stores._records import checked_thread, converter
from resumable.stores.packing import check_swap
from resumable.stores.protocol import NO_CHUNKS, SnapshotRecord, ThreadRecord
from resumable.stores.redis.codec import (
    as_bytes,
    escape_glob,
    int_or_zero,
    num,
    pack,
    text_or_none,
    unpack_first,
    unpack_ids,
)
from resumable.stores.redis.codec import to_bytes as _b
from resumable.stores.redis.codec import to_str as _s
from resumable.stores.redis.connection import RedisClient
from resumable.stores.redis.runs import PAGE_MAX, Cursor

_HMGET_SLICE: Final = 1000
_PUT_BATCH_BYTES: Final = 4 << 20


_HEAD: Final = 5
"""A packed snapshot's items before its chunk refs (lib.lua's snapshot_refs)."""


def snapshot_packed(snapshot: SnapshotRecord) -> bytes:
    """A snapshot as its namespace's records hash holds it: each chunk listed once."""
    # refs come last: lib.lua's snapshot_refs() skips the first five items
    return pack(
        [
            None if snapshot.parent_id is None else _b(snapshot.parent_id),
            snapshot.manifest,
            num(snapshot.created_at_ms),
            None if snapshot.label is None else _b(snapshot.label),
            snapshot.metadata,
            *refs_argv(snapshot)[1:],
        ]
    )


def refs_argv(snapshot: SnapshotRecord) -> list[bytes]:
    """A snapshot's chunk refs as the scripts take them: how many, then each once.

    Listed once, as in its record, so a script counts one reference per chunk
    both when it saves the record and when it deletes it.
    """
    refs = [_b(ref) for ref in dict.fromkeys(snapshot.chunk_refs)]
    return [num(len(refs)), *refs]


@converter(
    "snapshot",
    lambda thread_id, namespace, checkpoint_id, *_: (
        f"thread {thread_id!r} checkpoint {checkpoint_id!r}"
    ),
)
def snapshot_from_packed(
    thread_id: str, namespace: str, checkpoint_id: str, data: bytes, stored: int
) -> SnapshotRecord:
    """The snapshot `snapshot_packed` packed, in a store holding `stored` chunks.

    A record lists each of its chunks once, and only stored ones (a save naming
    a missing chunk is refused, and a collection deletes only chunks no record
    lists), so it lists at most `stored`: one listing more is damaged, refused
    before more than `stored` refs are decoded.
    """
    parent, manifest, created, label, metadata = unpack_first(data, _HEAD)
    return SnapshotRecord(
        thread_id=thread_id,
        checkpoint_id=checkpoint_id,
        parent_id=text_or_none(parent),
        manifest=manifest or b"",
        chunk_refs=unpack_ids(
            data, skip=_HEAD, most=stored, what="chunks, which the store holds"
        ),
        created_at_ms=int_or_zero(created),
        namespace=namespace,
        label=text_or_none(label),
        metadata=metadata,
    )


async def put_chunks(conn: RedisClient, chunks: Mapping[str, bytes]) -> None:
    """Store chunks by hash, in batches of about `_PUT_BATCH_BYTES`."""
    keys = [conn.keys.chunks, conn.keys.chunkrefs, conn.keys.orphans]
    args: list[bytes] = [conn.keys.base]
    size = 0
    for digest, data in chunks.items():
        args += [_b(digest), data]
        size += len(data)
        if size >= _PUT_BATCH_BYTES:  # chunks are independent: batches may split
            await conn.script("put_chunks", keys, args)
            args, size = [conn.keys.base], 0
    if len(args) > 1:
        await conn.script("put_chunks", keys, args)


async def get_chunks(conn: RedisClient, hashes: Collection[str]) -> dict[str, bytes]:
    """The chunks stored under `hashes` (missing ones left out)."""
    wanted = list(dict.fromkeys(hashes))
    if not wanted:
        return {}
    client = await conn.ready()
    found: dict[str, bytes] = {}
    with conn.boundary("get chunks"):
        for start in range(0, len(wanted), _HMGET_SLICE):
            part = wanted[start : start + _HMGET_SLICE]
            values = await client.hmget(conn.keys.chunks, [_b(h) for h in part])
            found.update(
                (digest, as_bytes(value))
                for digest, value in zip(part, values, strict=True)
                if value is not None
            )
    return found


async def save_snapshot(
    conn: RedisClient,
    snapshot: SnapshotRecord,
    *,
    chunks: Mapping[str, bytes] = NO_CHUNKS,
) -> None:
    """Save a snapshot and its new chunks (ChunksMissing if it names a lost one)."""
    ids_key, records_key = conn.keys.snapshots(snapshot.thread_id, snapshot.namespace)
    missing = await conn.script(
        "save_snapshot",
        [
            ids_key,
            records_key,
            conn.keys.of(b"nss:", snapshot.thread_id),
            conn.keys.chunks,
            conn.keys.chunkrefs,
            conn.keys.orphans,
            conn.keys.threads,
        ],
        [
            conn.keys.base,
            _b(snapshot.checkpoint_id),
            snapshot_packed(snapshot),
            _b(snapshot.namespace),
            *refs_argv(snapshot),
            _b(snapshot.thread_id),
            num(snapshot.created_at_ms),
            *itertools.chain.from_iterable(
                (_b(digest), data) for digest, data in chunks.items()
            ),
        ],
    )
    if missing:
        raise ChunksMissing(
            store=conn.url,
            thread_id=snapshot.thread_id,
            hashes=tuple(_s(ref) for ref in missing),
        )


async def load_snapshot(
    conn: RedisClient,
    thread_id: str,
    *,
    namespace: str = "",
    checkpoint_id: str | None = None,
) -> SnapshotRecord | None:
    """The thread's newest snapshot in `namespace`, or the one named."""
    result = await conn.script(
        "load_snapshot",
        [*conn.keys.snapshots(thread_id, namespace), conn.keys.chunks],
        [
            b"0" if checkpoint_id is None else b"1",
            _b(checkpoint_id or ""),
        ],
    )
    if not result:
        return None
    return snapshot_from_packed(
        thread_id, namespace, _s(result[0]), result[1], int(result[2])
    )


async def list_snapshots(
    conn: RedisClient,
    thread_id: str,
    *,
    namespace: str | None = "",
    before: str | None = None,
    limit: int | None = None,
) -> list[SnapshotRecord]:
    """The thread's snapshots, newest first."""
    flat = await conn.script(
        "list_snapshots",
        [conn.keys.of(b"nss:", thread_id)],
        [
            conn.keys.base,
            _b(thread_id),
            b"1" if namespace is None else b"0",
            _b(namespace or ""),
            b"0" if before is None else b"1",
            _b(before or ""),
            num(-1 if limit is None else limit),
        ],
    )
    stored = int(flat[0])
    found = [
        snapshot_from_packed(
            thread_id, _s(flat[i]), _s(flat[i + 1]), flat[i + 2], stored
        )
        for i in range(1, len(flat), 3)
    ]
    found.sort(key=lambda snap: (snap.checkpoint_id, snap.namespace), reverse=True)
    return found if limit is None else found[:limit]


async def swap_snapshots(
    conn: RedisClient,
    thread_id: str,
    old: Sequence[SnapshotRecord],
    *,
    by: SnapshotRecord | None,
    chunks: Mapping[str, bytes] = NO_CHUNKS,
) -> bool:
    """Swap the records `old`, if all are stored as read, for `by` (or none).

    Stores `chunks` with it; ChunksMissing if `by` names a chunk neither given
    nor stored.
    """
    check_swap(thread_id, old, by)
    new: list[bytes] = [b"0", b"", b"", b"", b"0", b"0"]
    if by is not None:
        new = [
            b"1",
            _b(by.namespace),
            _b(by.checkpoint_id),
            snapshot_packed(by),
            num(by.created_at_ms),
            *refs_argv(by),
        ]
    replaced = await conn.script(
        "swap_snapshots",
        [
            conn.keys.of(b"nss:", thread_id),
            conn.keys.threads,
            conn.keys.chunks,
            conn.keys.chunkrefs,
            conn.keys.orphans,
        ],
        [
            conn.keys.base,
            _b(thread_id),
            *new,
            str(len(chunks)).encode(),
            *itertools.chain.from_iterable(
                (_b(digest), data) for digest, data in chunks.items()
            ),
            *(
                part
                for record in old
                for part in (
                    _b(record.namespace),
                    _b(record.checkpoint_id),
                    record.manifest,
                )
            ),
        ],
    )
    if len(replaced) > 1:
        raise ChunksMissing(
            store=conn.url,
            thread_id=thread_id,
            hashes=tuple(_s(ref) for ref in replaced[1:]),
        )
    return bool(replaced[0])


async def delete_snapshots(
    conn: RedisClient, thread_id: str, keys: Collection[tuple[str, str]]
) -> int:
    """Delete the thread's snapshots at `keys`; how many there were."""
    pairs = [_b(part) for key in sorted(set(keys)) for part in key]
    if not pairs:
        return 0
    deleted = await conn.script(
        "delete_snapshots",
        [conn.keys.of(b"nss:", thread_id), conn.keys.threads],
        [conn.keys.base, _b(thread_id), *pairs],
    )
    return int(deleted)


async def delete_thread(conn: RedisClient, thread_id: str) -> int:
    """Delete the thread's snapshots; how many there were."""
    deleted = await conn.script(
        "delete_thread",
        [conn.keys.of(b"nss:", thread_id), conn.keys.threads],
        [conn.keys.base, _b(thread_id)],
    )
    return int(deleted)


async def list_threads(
    conn: RedisClient,
    *,
    prefix: str | None = None,
    after: tuple[int, str] | None = None,
    limit: int = 100,
) -> list[ThreadRecord]:
    """Threads newest first, after `after`, matching `prefix`."""
    client = await conn.ready()
    cursor = Cursor(conn.keys.threads, after)
    wanted = None if prefix is None else _b(prefix)
    found: list[ThreadRecord] = []
    # a prefix is matched while paging: the zset is ordered by time, not by id
    with conn.boundary("list threads"):
        while len(found) < limit:
            if not cursor.rows:
                await cursor.fill(client, PAGE_MAX)
                if not cursor.rows:
                    break
            score, member = cursor.rows.pop()
            if wanted is None or member.startswith(wanted):
                found.append(_thread_of(member, score))
    return found


def _thread_of(member: bytes, score: float) -> ThreadRecord:
    """A thread-index entry as a record, checked (`_records.checked_thread`)."""
    try:
        thread_id: object = _s(member)
    except UnicodeDecodeError:
        thread_id = member
    ms = int(score) if math.isfinite(score) and score.is_integer() else score
    return checked_thread(thread_id, ms)


async def delete_unreferenced_chunks(conn: RedisClient, limit: int) -> int:
    """Delete up to `limit` chunks no snapshot names."""
    if limit <= 0:
        return 0
    deleted = await conn.script(
        "delete_unreferenced_chunks",
        [conn.keys.chunks, conn.keys.chunkrefs, conn.keys.orphans],
        [num(limit)],
    )
    return int(deleted)


async def index_threads(conn: RedisClient, client: Redis) -> None:
    """Build the threads zset from every thread's snapshots: the schema 1 -> 2 migration."""
    nss = conn.keys.base + b"nss:"
    with conn.boundary("migrate to schema 2"):
        async for key in client.scan_iter(match=escape_glob(nss) + b"*"):
            thread_id = _s(as_bytes(key)[len(nss) :])
            snapshots = await list_snapshots(conn, thread_id, namespace=None)
            if snapshots:
                newest = max(snap.created_at_ms for snap in snapshots)
                await client.zadd(conn.keys.threads, {_b(thread_id): newest}, gt=True)
