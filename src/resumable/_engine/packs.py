"""Packs: a thread's older snapshots, swapped for one compressed record per run.

A conversation or a LangGraph thread adds a snapshot (and LangGraph a pending-writes
record) at every step. Such rows are small and alike: ids, a parent, a delta
manifest, metadata. On their own they cost more bytes than the content a step adds.
Every PACK_EVERY saves in a namespace, the engine swaps that namespace's older loose
snapshots for one record in namespace `roles.pack_namespace(namespace)` (role
`SnapshotRole.PACK`), their bodies compressed together. Readers see the same
records either way: `find` and `history` merge packs with loose rows. Only a
store that declares `PacksSnapshots` gets packs; on any other, rows stay loose.

Every write of a pack is a compare-and-swap (`PacksSnapshots.swap_snapshots`):
it replaces the loose rows and the pack exactly as this engine read them, or
nothing. Two engines packing one thread, or packing while another deletes from
a pack (`delete_states`), cannot overwrite each other's rows: the later swap is
refused, and the packer gives up (packing only saves space) while a delete
reads again and retries.

A pack's checkpoint_id is its oldest row's id and its label the newest row's
(`roles.pack_label`). The packs of a namespace never overlap, and its newest
KEEP_LOOSE snapshots stay loose, so a thread's latest snapshot is a loose row.

A pack's body is a 4-byte header length, the header (JSON: one entry per row with
its fields and the lengths of its manifest and metadata bodies), then the bodies.
The pack is sealed (checksummed or encrypted, compressed) like any manifest, so
`rekey` rewrites it like one; its rows' bodies are sealed again when read.
"""

from __future__ import annotations

import json
import logging
import struct
from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

from resumable._engine.damage import reading
from resumable.errors import CapabilityMissing, CorruptCheckpointError
from resumable.serde import Serde
from resumable.stores.packing import through
from resumable.stores.protocol import (
    NO_CHUNKS,
    PacksSnapshots,
    SnapshotRecord,
    SnapshotStore,
)
from resumable.stores.roles import (
    SnapshotRole,
    newest_packed,
    pack_label,
    pack_namespace,
    packed_namespace,
    snapshot_role,
)

PACK_EVERY = 16
"""Saves in one namespace between two attempts to pack it."""
KEEP_LOOSE = 2
"""The newest snapshots of a namespace that are never packed."""
PACK_MIN = 8
"""Fewer packable snapshots than this are left loose until the next attempt."""
PACK_MAX = 256
"""Rows per pack at most."""
_DECODED_MAX = 16  # decoded packs kept per engine
_COUNTED_MAX = 10_000  # (thread, namespace) save counters kept per engine
_HEADER_LEN: Final = struct.Struct(">I")
_FORMAT: Final = 1
_log = logging.getLogger("resumable")
_PackKey = tuple[str, str, str]  # thread_id, pack namespace, checkpoint_id


class _Packed(NamedTuple):
    """A pack this engine wrote or read, and what rewriting it with more rows reuses."""

    record: SnapshotRecord  # as stored: the rest holds only for its manifest bytes
    rows: list[SnapshotRecord]  # oldest first, sealed as loose rows are
    entries: list[str]  # each row's entry in the header, as JSON
    bodies: list[bytes]  # the rows' manifests and metadata, opened, in body order


def is_pack_namespace(namespace: str) -> bool:
    """Whether records in `namespace` are packs."""
    return snapshot_role(namespace) is SnapshotRole.PACK


class Packs:
    """Finds snapshots loose or packed, and packs a namespace's older ones."""

    def __init__(
        self, store: SnapshotStore, serde: Serde, *, packing: bool = True
    ) -> None:
        self.store, self.serde = store, serde
        self.swaps: PacksSnapshots | None = (
            store if packing and isinstance(store, PacksSnapshots) else None
        )
        """The store, if it declares `PacksSnapshots` (and `packing`): `saved`
        packs every PACK_EVERY saves; None: snapshots stay loose."""
        self.packing = self.swaps is not None
        self._envelope = serde.envelope.with_compress_over(0)
        self._saves: dict[tuple[str, str], int] = {}
        self._decoded: dict[_PackKey, _Packed] = {}

    def _swaps(self) -> PacksSnapshots:
        """The store's swap, for a pack met on it.

        Raises:
            CapabilityMissing: the store does not declare `PacksSnapshots` (its
                packs were written through another store, say).
        """
        if self.swaps is None:
            raise CapabilityMissing(
                store=self.store.url, capability="PacksSnapshots", call="swap_snapshots"
            )
        return self.swaps

    async def find(
        self, thread_id: str, namespace: str, checkpoint_id: str | None
    ) -> SnapshotRecord | None:
        """The snapshot (the latest if `checkpoint_id` is None), loose or packed."""
        record = await self.store.load_snapshot(
            thread_id, namespace=namespace, checkpoint_id=checkpoint_id
        )
        if record is not None or is_pack_namespace(namespace):
            return record
        before = None if checkpoint_id is None else through(checkpoint_id)
        packs = await self.store.list_snapshots(
            thread_id, namespace=pack_namespace(namespace), before=before, limit=1
        )
        if not packs:
            return None
        rows = self.rows(packs[0], namespace)
        if checkpoint_id is None:  # every loose row is gone: the newest packed one
            return rows[-1] if rows else None
        return next((row for row in rows if row.checkpoint_id == checkpoint_id), None)

    async def history(
        self,
        thread_id: str,
        *,
        namespace: str | None,
        before: str | None,
        limit: int | None,
    ) -> list[SnapshotRecord]:
        """A thread's snapshots newest first, as `Store.list_snapshots`, packs unpacked."""
        if namespace is None:
            return await self._every_namespace(thread_id, before, limit)
        loose = await self.store.list_snapshots(
            thread_id, namespace=namespace, before=before, limit=limit
        )
        if is_pack_namespace(namespace):
            return loose
        packed: list[SnapshotRecord] = []
        cursor = before
        while limit is None or len(packed) < limit:
            # packs never overlap: the newest ones hold the newest packed rows
            packs = await self.store.list_snapshots(
                thread_id,
                namespace=pack_namespace(namespace),
                before=cursor,
                limit=None if limit is None else 1,
            )
            for pack in packs:
                rows = self.rows(pack, namespace)
                packed.extend(
                    row
                    for row in reversed(rows)
                    if before is None or row.checkpoint_id < before
                )
            if limit is None or not packs:
                break
            cursor = packs[-1].checkpoint_id
        return _newest_first([*loose, *packed], limit)

    async def _every_namespace(
        self, thread_id: str, before: str | None, limit: int | None
    ) -> list[SnapshotRecord]:
        # a pack sorts by its oldest row: read them all, then cut
        found: list[SnapshotRecord] = []
        for record in await self.store.list_snapshots(
            thread_id, namespace=None, before=None, limit=None
        ):
            with reading(f"thread {thread_id!r} checkpoint {record.checkpoint_id!r}"):
                if record.role is not SnapshotRole.PACK:
                    found.append(record)
                    continue
                found.extend(self.rows(record, packed_namespace(record.namespace)))
        if before is not None:
            found = [record for record in found if record.checkpoint_id < before]
        return _newest_first(found, limit)

    async def saved(self, thread_id: str, namespace: str) -> None:
        """Count a save; every PACK_EVERY saves in a namespace, pack it."""
        if not self.packing:
            return
        key = (thread_id, namespace)
        if len(self._saves) >= _COUNTED_MAX and key not in self._saves:
            self._saves.clear()
        count = self._saves.get(key, 0) + 1
        if count < PACK_EVERY:
            self._saves[key] = count
            return
        self._saves[key] = 0
        try:
            await self.pack(thread_id, namespace)
        except Exception as exc:  # noqa: BLE001 - the save itself succeeded
            # packing only saves space: the rows stay loose and readable, and the
            # next attempt (PACK_EVERY saves on) packs them
            _log.warning(
                "thread %r namespace %r: packing older snapshots failed, they stay "
                "as they are (%s: %s)",
                thread_id,
                namespace,
                type(exc).__name__,
                exc,
            )

    async def pack(
        self,
        thread_id: str,
        namespace: str,
        *,
        keep_loose: int | None = None,
        least: int | None = None,
    ) -> int:
        """Pack a namespace's older loose snapshots; returns how many were packed.

        The newest `keep_loose` (default `KEEP_LOOSE`) stay loose, and fewer
        than `least` (default `PACK_MIN`) packable rows are left as they are
        (archiving packs all but the newest first).

        They fill up the newest pack first (rewritten under the same id), then new
        ones. Each swap names the loose rows and the pack it extends as read: if
        another engine packed or deleted any of them since, it is refused, and
        packing stops there (the rows stay as they are, readable).
        """
        loose = await self.store.list_snapshots(thread_id, namespace=namespace)
        newest = await self.store.list_snapshots(
            thread_id, namespace=pack_namespace(namespace), limit=1
        )
        # rows older than the newest pack's newest row (a late save) stay loose
        after = newest_packed(newest[0].label) if newest else None
        keep = KEEP_LOOSE if keep_loose is None else keep_loose
        candidates = [
            row
            for row in reversed(loose[keep:])
            if after is None or row.checkpoint_id > after
        ]
        if not candidates or len(candidates) < (PACK_MIN if least is None else least):
            return 0
        held = self._packed(newest[0], namespace) if newest else None
        if held is not None and len(held.rows) >= PACK_MAX:
            held = None
        packed, start = 0, 0
        while start < len(candidates):
            room = PACK_MAX - (0 if held is None else len(held.rows))
            taken = candidates[start : start + room]
            pack = self._pack_record(thread_id, namespace, held, taken)
            old = [*taken, *(() if held is None else (held.record,))]
            if not await self._swaps().swap_snapshots(
                thread_id, old, by=pack.record, durable=False
            ):
                break  # another engine packed or deleted some of them meanwhile
            # the next merge reads it back, and the next pack extends it: no opening
            self._remember(pack)
            packed += len(taken)
            start += len(taken)
            held = None
        return packed

    async def rewrite(
        self,
        pack: SnapshotRecord,
        namespace: str,
        rows: Sequence[SnapshotRecord],
        *,
        chunks: Mapping[str, bytes] = NO_CHUNKS,
    ) -> bool:
        """Store `pack` anew holding `rows` (oldest first, as `rows` gives them).

        No rows: the pack is deleted. One atomic compare-and-swap: a crash leaves
        the old pack or the new one, never a part. A pack keeps its id unless its
        oldest row went: then the new one replaces it. `chunks` are new chunks
        the rows name (a row rewritten whole), stored by the same swap. Returns
        False, changing nothing, if the stored pack is no longer `pack` (another
        engine extended or rewrote it): read it again to try again.

        Raises:
            ChunksMissing: a row names a chunk neither in `chunks` nor stored.
        """
        if not rows:
            return await self._swaps().swap_snapshots(pack.thread_id, [pack], by=None)
        new = self._pack_record(pack.thread_id, namespace, None, rows)
        if not await self._swaps().swap_snapshots(
            pack.thread_id, [pack], by=new.record, chunks=chunks
        ):
            return False
        self._remember(new)
        return True

    def forget(self, thread_id: str) -> None:
        """Drop what is cached about a thread (after it was deleted)."""
        for key in [key for key in self._saves if key[0] == thread_id]:
            del self._saves[key]

    def rows(self, pack: SnapshotRecord, namespace: str) -> list[SnapshotRecord]:
        """The snapshots a pack holds, oldest first."""
        return self._packed(pack, namespace).rows

    def _packed(self, pack: SnapshotRecord, namespace: str) -> _Packed:
        key = (pack.thread_id, pack.namespace, pack.checkpoint_id)
        cached = self._decoded.get(key)
        if cached is not None and cached.record.manifest == pack.manifest:
            return cached
        unpacked = self._unpack(pack, namespace)
        self._remember(unpacked)
        return unpacked

    def _remember(self, pack: _Packed) -> None:
        record = pack.record
        key = (record.thread_id, record.namespace, record.checkpoint_id)
        self._decoded.pop(key, None)
        if len(self._decoded) >= _DECODED_MAX:
            del self._decoded[next(iter(self._decoded))]
        self._decoded[key] = pack

    def _pack_record(
        self,
        thread_id: str,
        namespace: str,
        held: _Packed | None,
        taken: Sequence[SnapshotRecord],
    ) -> _Packed:
        """The pack of `held`'s rows and then `taken`.

        Only `taken` rows are opened: `held` keeps its rows opened.
        """
        open_ = self.serde.envelope.open
        entries = [] if held is None else list(held.entries)
        bodies = [] if held is None else list(held.bodies)
        for row in taken:
            place = snapshot_place(row.thread_id, row.checkpoint_id)
            manifest = open_(row.manifest, place=place)
            metadata = (
                None
                if row.metadata is None
                else open_(
                    row.metadata,
                    place=snapshot_place(row.thread_id, row.checkpoint_id, "metadata"),
                )
            )
            entry = [
                row.checkpoint_id,
                row.parent_id,
                row.created_at_ms,
                row.label,
                list(row.chunk_refs),
                len(manifest),
                -1 if metadata is None else len(metadata),
            ]
            entries.append(_json(entry))
            bodies.append(manifest)
            if metadata is not None:
                bodies.append(metadata)
        # {"v": _FORMAT, "rows": [entry, ...]}, as json.dumps writes it
        header = f'{{"v":{_FORMAT},"rows":[{",".join(entries)}]}}'.encode(
            "utf-8", "surrogatepass"
        )
        body = b"".join((_HEADER_LEN.pack(len(header)), header, *bodies))
        rows = [*([] if held is None else held.rows), *taken]
        first, last = rows[0].checkpoint_id, rows[-1].checkpoint_id
        refs = dict.fromkeys(ref for row in rows for ref in row.chunk_refs)
        record = SnapshotRecord(
            thread_id=thread_id,
            namespace=pack_namespace(namespace),
            checkpoint_id=first,
            parent_id=None,
            manifest=self._envelope.seal(body, place=pack_place(thread_id, first)),
            chunk_refs=tuple(refs),
            created_at_ms=max(row.created_at_ms for row in rows),
            label=pack_label(last),
        )
        return _Packed(record, rows, entries, bodies)

    def _unpack(self, pack: SnapshotRecord, namespace: str) -> _Packed:
        place = pack_place(pack.thread_id, pack.checkpoint_id)
        body = self._envelope.open(pack.manifest, place=place)
        seal = self.serde.envelope.seal
        try:
            (length,) = _HEADER_LEN.unpack_from(body)
            header = json.loads(body[4 : 4 + length].decode("utf-8", "surrogatepass"))
            if header["v"] != _FORMAT:
                raise ValueError(f"unknown pack format {header['v']!r}")
            pos = 4 + length
            rows: list[SnapshotRecord] = []
            bodies: list[bytes] = []
            for entry in header["rows"]:
                checkpoint_id, parent, created, label, refs, size, meta = entry
                manifest = body[pos : pos + size]
                pos += size
                metadata = None if meta < 0 else body[pos : pos + meta]
                pos += max(meta, 0)
                bodies.append(manifest)
                if metadata is not None:
                    bodies.append(metadata)
                checkpoint_id = str(checkpoint_id)
                rows.append(
                    SnapshotRecord(
                        thread_id=pack.thread_id,
                        namespace=namespace,
                        checkpoint_id=checkpoint_id,
                        parent_id=None if parent is None else str(parent),
                        manifest=seal(
                            manifest,
                            place=snapshot_place(pack.thread_id, checkpoint_id),
                        ),
                        chunk_refs=tuple(map(str, refs)),
                        created_at_ms=int(created),
                        label=None if label is None else str(label),
                        metadata=None
                        if metadata is None
                        else seal(
                            metadata,
                            place=snapshot_place(
                                pack.thread_id, checkpoint_id, "metadata"
                            ),
                        ),
                    )
                )
            if pos != len(body):
                raise ValueError(f"{len(body) - pos} bytes after the last row")
        except (ValueError, TypeError, KeyError, struct.error) as exc:
            raise CorruptCheckpointError(
                place=place, detail=f"unreadable pack of snapshots ({exc})"
            ) from exc
        return _Packed(pack, rows, list(map(_json, header["rows"])), bodies)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _newest_first(
    records: list[SnapshotRecord], limit: int | None
) -> list[SnapshotRecord]:
    unique = {(r.namespace, r.checkpoint_id): r for r in records}.values()
    ordered = sorted(unique, key=lambda r: (r.checkpoint_id, r.namespace), reverse=True)
    return ordered if limit is None else ordered[:limit]


def snapshot_place(thread_id: str, checkpoint_id: str, what: str = "manifest") -> str:
    """How messages (and encryption's associated data) name a snapshot's payloads."""
    return f"thread {thread_id!r} checkpoint {checkpoint_id!r} {what}"


def pack_place(thread_id: str, checkpoint_id: str) -> str:
    """Where a pack is sealed: never where one of its rows' manifests was."""
    return snapshot_place(thread_id, checkpoint_id, "pack")
