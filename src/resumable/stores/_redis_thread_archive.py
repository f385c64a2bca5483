"""RedisStore's `SupportsThreadArchive`: a thread's older snapshots swapped for a stub.

A thread's stub is the hash `{prefix}tstub:<thread>` (`key`: the object's key,
`stub`: the packed stub) and `{prefix}tstubs` lists the archived threads; both
are new key families, absent on data written before, so no migration is needed.
The swaps run as scripts (`archive_snapshots.lua`, `restore_snapshots.lua`),
atomic with `save_snapshot.lua`'s check that the chunks it names exist.
`ThreadArchiveMethods` is mixed into `RedisStore`, whose client it uses.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence

from resumable.stores import _redis_records as _rec
from resumable.stores._records import converter
from resumable.stores._redis_client import RedisClient
from resumable.stores._redis_packing import pack as _pack
from resumable.stores._redis_packing import to_bytes as _b
from resumable.stores._redis_packing import to_str as _s
from resumable.stores._redis_packing import unpack as _unpack
from resumable.stores.protocol import SnapshotRecord
from resumable.stores.stubs import ThreadStub, keys_of, namespaces_of


def _packed(stub: ThreadStub) -> bytes:
    return _pack(
        [
            _b(stub.key),
            _rec.num(stub.size),
            _rec.num(stub.snapshots),
            _rec.num(stub.chunks),
            _rec.num(stub.archived_at_ms),
            json.dumps([list(pair) for pair in stub.newest]).encode(),
            json.dumps(list(stub.refers_to)).encode(),
        ]
    )


@converter(
    "thread archive stub", lambda thread_id, packed: f"thread {thread_id!r} stub"
)
def _unpacked(thread_id: str, packed: bytes) -> ThreadStub:
    key, size, snapshots, chunks, archived, newest, refers_to = _unpack(packed)
    return ThreadStub(
        thread_id=thread_id,
        key=_s(key or b""),
        size=_rec.int_or_zero(size),
        snapshots=_rec.int_or_zero(snapshots),
        chunks=_rec.int_or_zero(chunks),
        archived_at_ms=_rec.int_or_zero(archived),
        newest=namespaces_of(json.loads(newest or b"[]")),
        refers_to=keys_of(json.loads(refers_to or b"[]")),
    )


def _snapshot_args(snapshot: SnapshotRecord) -> list[bytes]:
    return [
        _b(snapshot.namespace),
        _b(snapshot.checkpoint_id),
        _rec.snapshot_packed(snapshot),
        _rec.num(snapshot.created_at_ms),
        _rec.num(len(snapshot.chunk_refs)),
        *(_b(ref) for ref in snapshot.chunk_refs),
    ]


class ThreadArchiveMethods:
    """`SupportsThreadArchive` for `RedisStore`, which provides `_conn`."""

    _conn: RedisClient

    async def archive_snapshots(
        self,
        stub: ThreadStub,
        *,
        moved: Collection[tuple[str, str]],
        chunks: Collection[str],
        replaces: str | None,
    ) -> bool:
        keys, pairs = self._conn.keys, sorted(set(moved))
        done = await self._conn.script(
            "archive_snapshots",
            [keys.of(b"tstub:", stub.thread_id), keys.base + b"tstubs"],
            [
                keys.base,
                b"" if replaces is None else _b(replaces),
                _b(stub.key),
                _packed(stub),
                _b(stub.thread_id),
                _rec.num(len(pairs)),
                *(_b(part) for pair in pairs for part in pair),
                *(_b(digest) for digest in chunks),
            ],
        )
        return bool(done)

    async def load_thread_stub(self, thread_id: str) -> ThreadStub | None:
        client = await self._conn.ready()
        with self._conn.boundary("load thread stub"):
            packed = await client.hget(self._conn.keys.of(b"tstub:", thread_id), "stub")
        return None if packed is None else _unpacked(thread_id, _rec.as_bytes(packed))

    async def restore_snapshots(
        self,
        stub: ThreadStub,
        snapshots: Sequence[SnapshotRecord],
        chunks: Mapping[str, bytes],
    ) -> bool:
        keys = self._conn.keys
        args = [
            keys.base,
            _b(stub.key),
            _b(stub.thread_id),
            _rec.num(len(chunks)),
            *(part for digest, data in chunks.items() for part in (_b(digest), data)),
        ]
        for snapshot in snapshots:
            if snapshot.thread_id == stub.thread_id:
                args += _snapshot_args(snapshot)
        done = await self._conn.script(
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
        self, *, after: str | None, limit: int
    ) -> list[ThreadStub]:
        client = await self._conn.ready()
        low = b"-" if after is None else b"(" + _b(after)
        with self._conn.boundary("list thread stubs"):
            ids = await client.zrangebylex(
                self._conn.keys.base + b"tstubs", low, b"+", 0, limit
            )
            found = [
                await client.hget(
                    self._conn.keys.of(b"tstub:", _s(_rec.as_bytes(i))), "stub"
                )
                for i in ids
            ]
        return [
            _unpacked(_s(_rec.as_bytes(i)), _rec.as_bytes(packed))
            for i, packed in zip(ids, found, strict=True)
            if packed is not None
        ]
