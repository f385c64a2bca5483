"""RedisStore's payload scan and compare-and-swap, for `rekey`.

Payloads live in hashes: runs' `input`/`output` fields, and packed records in the
steps, inputs and snapshot hashes. A scan walks the store's own indexes, sorts the
keys, and returns the page after `after` (each page re-reads the index: rekey is
a rare, batched maintenance pass). A replace WATCHes the hash, checks that the
payload still holds the bytes the scan saw, and rewrites it in a MULTI block.
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import WatchError

from resumable.stores.protocol import Payload, PayloadKind
from resumable.stores.redis.codec import escape_glob as _escape_glob
from resumable.stores.redis.codec import pack as _pack
from resumable.stores.redis.codec import to_bytes as _b
from resumable.stores.redis.codec import to_str as _s
from resumable.stores.redis.codec import unpack as _unpack
from resumable.stores.redis.connection import RedisClient

# kind -> index of the payload inside a packed record (None: a plain hash field)
_PACKED_AT: dict[str, int | None] = {
    "run.input": None,
    "run.output": None,
    "step.output": 3,
    "step.usage": 7,
    "input.value": 0,
    "snapshot.manifest": 1,
    "snapshot.metadata": 4,
    "chunk.data": None,
}


async def scan_payloads(
    conn: RedisClient,
    kind: PayloadKind,
    *,
    after: tuple[str | int, ...] | None,
    limit: int,
) -> list[Payload]:
    """Up to `limit` payloads of a kind after `after`, in key order."""
    found = sorted(
        (key, data)
        for key, data in await _all(conn, kind)
        if data is not None and (after is None or key > after)
    )
    return [Payload(kind=kind, key=key, data=data) for key, data in found[:limit]]


async def replace_payload(conn: RedisClient, payload: Payload, *, data: bytes) -> bool:
    """Swap in `data` if the payload still holds `payload.data`."""
    conn.check_writable("rekey")
    hash_key, field = _location(conn, payload)
    at = _PACKED_AT[payload.kind]
    client: Any = await conn.ready()  # redis-py types replies as bytes | str
    with conn.boundary("rekey"):
        async with client.pipeline(transaction=True) as pipe:
            try:
                await pipe.watch(hash_key)
                current = await pipe.hget(hash_key, field)
                if current is None:
                    return False
                current = bytes(current)
                if at is None:
                    if current != payload.data:
                        return False
                    new = data
                else:
                    items = _unpack(current)
                    if items[at] != payload.data:
                        return False
                    items[at] = data
                    new = _pack(items)
                pipe.multi()
                pipe.hset(hash_key, field, new)
                await pipe.execute()
            except WatchError:
                return False
    return True


def _location(conn: RedisClient, payload: Payload) -> tuple[bytes, bytes]:

    keys, key = conn.keys, payload.key
    kind = payload.kind
    if kind in ("run.input", "run.output"):
        return keys.run(str(key[0])), kind.split(".")[1].encode()
    if kind in ("step.output", "step.usage"):
        return keys.steps(str(key[0])), str(int(key[1])).encode()
    if kind == "input.value":
        return keys.inputs(str(key[0])), _b(str(key[1]))
    if kind in ("snapshot.manifest", "snapshot.metadata"):
        return keys.snapshots(str(key[0]), str(key[1]))[1], _b(str(key[2]))
    return keys.chunks, _b(str(key[0]))


async def _all(
    conn: RedisClient, kind: PayloadKind
) -> list[tuple[tuple[str | int, ...], bytes | None]]:

    client: Any = await conn.ready()  # redis-py types replies as bytes | str
    keys = conn.keys
    at = _PACKED_AT[kind]
    found: list[tuple[tuple[str | int, ...], bytes | None]] = []
    with conn.boundary("rekey scan"):
        if kind == "chunk.data":
            async for digest, data in client.hscan_iter(keys.chunks):
                found.append(((_s(digest),), bytes(data)))
            return found
        if kind.startswith("snapshot."):
            pattern = _escape_glob(keys.base + b"nss:") + b"*"
            async for nss_key in client.scan_iter(match=pattern):
                thread = _s(bytes(nss_key)[len(keys.base) + 4 :])
                for namespace in await client.smembers(nss_key):
                    records_key = keys.snapshots(thread, _s(namespace))[1]
                    for checkpoint, packed in (
                        await client.hgetall(records_key)
                    ).items():
                        item = _unpack(bytes(packed))[at] if at is not None else None
                        found.append(((thread, _s(namespace), _s(checkpoint)), item))
            return found
        run_ids = [_s(member) for member in await client.zrange(keys.runs, 0, -1)]
        for run_id in run_ids:
            found.extend(await _of_run(client, keys, kind, run_id, at))
    return found


async def _of_run(
    client: Any, keys: Any, kind: PayloadKind, run_id: str, at: int | None
) -> list[tuple[tuple[str | int, ...], bytes | None]]:

    if kind in ("run.input", "run.output"):
        value = await client.hget(keys.run(run_id), kind.split(".")[1])
        return [((run_id,), None if value is None else bytes(value))]
    if kind in ("step.output", "step.usage"):
        out: list[tuple[tuple[str | int, ...], bytes | None]] = []
        for seq, packed in (await client.hgetall(keys.steps(run_id))).items():
            items = _unpack(bytes(packed))
            name = _s(items[0] or b"")
            out.append(
                ((run_id, int(seq), name), items[at] if at is not None else None)
            )
        return out
    return [
        ((run_id, _s(key)), _unpack(bytes(packed))[0])
        for key, packed in (await client.hgetall(keys.inputs(run_id))).items()
    ]
