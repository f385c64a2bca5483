"""Snapshots: versioned saves of a state object, stored content-addressed.

A value is saved as a *shape* (`shapes`): dicts by key, lists element by element,
and leaves, each leaf of more than a few bytes a chunk stored once under the hash
of its encoding (`snapshot_codec`). A snapshot's manifest is either *full* or a
*delta* against its parent ("append these items to the list at this path", "set
this path"). Every FULL_EVERY-th snapshot in a chain is full, so loading resolves
at most that many deltas. An appending conversation therefore writes O(1) bytes
per save beyond the new message.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from resumable._engine.damage import reading
from resumable._engine.ids import check_id
from resumable._engine.packs import Packs, is_pack_namespace, snapshot_place
from resumable._engine.shapes import (
    Shape,
    apply_ops,
    build,
    build_view,
    chunk_place,
    expand,
    leaf_hashes,
    refs,
    segments,
)
from resumable._engine.snapshot_codec import SnapshotCodec
from resumable.errors import (
    CheckpointNotFound,
    ChunksMissing,
    CorruptCheckpointError,
)
from resumable.serde import Serde
from resumable.stores.protocol import SnapshotRecord, SnapshotStore
from resumable.stores.roles import SnapshotRole, pack_namespace, snapshot_role

FULL_EVERY = 64
_STORED_MAX = 100_000  # chunk hashes an engine remembers the store holds


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """One saved version of a thread's state."""

    thread_id: str
    checkpoint_id: str
    parent_id: str | None
    label: str | None
    metadata: Any
    created_at: datetime
    namespace: str = ""

    @property
    def role(self) -> SnapshotRole:
        """A saved state, or (LangGraph) pending writes: `resumable.stores.roles`."""
        return snapshot_role(self.namespace)


def new_checkpoint_id(after: str | None) -> str:
    """A sortable id later than `after` (a thread's ids only grow)."""
    candidate = f"{time.time_ns() // 1000:015x}{secrets.token_hex(3)}"
    if after is not None and candidate <= after:
        candidate = f"{int(after[:15], 16) + 1:015x}{secrets.token_hex(3)}"
    return candidate


def _check_names(thread_id: str, namespace: str, checkpoint_id: str | None) -> None:
    """Refuse ids a store cannot hold, and the namespaces packs use."""
    check_id("thread_id", thread_id)
    check_id("namespace", namespace)
    if checkpoint_id is not None:
        check_id("checkpoint_id", checkpoint_id)
    if is_pack_namespace(namespace):
        raise ValueError(
            f"namespace {namespace!r}: names starting with {pack_namespace('')!r} "
            f"are where resumable packs older snapshots; choose another"
        )


class Snapshots:
    """save / load / history of snapshots on one store, for one Engine.

    `memo` picks the codec's path (`SnapshotCodec`): True skips encoding the leaves
    an earlier save met unchanged, False encodes every leaf at every save.
    """

    def __init__(
        self,
        store: SnapshotStore,
        serde: Serde,
        *,
        memo: bool = True,
        packing: bool = True,
    ) -> None:
        self.store, self.codec = store, SnapshotCodec(serde, memo=memo)
        self.serde = serde
        self.packs = Packs(store, serde, packing=packing)
        # the last shape saved or loaded per (thread, namespace, checkpoint): saving
        # the next snapshot of a conversation diffs against it without a read
        self._shapes: dict[tuple[str, str], tuple[str, Shape, int]] = {}
        # chunks this engine knows the store holds (chunks are never rewritten)
        self._stored: set[str] = set()

    async def save(
        self,
        thread_id: str,
        value: Any,
        *,
        now_ms: int,
        namespace: str = "",
        parent_id: str | None,
        label: str | None = None,
        metadata: Any = None,
        checkpoint_id: str | None = None,
    ) -> SnapshotRecord:
        """Store `value` as a new snapshot whose parent is `parent_id`."""
        _check_names(thread_id, namespace, checkpoint_id)
        chunks: dict[str, bytes] = {}
        manifest: dict[str, Any] | None = None
        if parent_id is None:
            shape = self.codec.shape(value, chunks, self._stored)
        else:
            old, depth = await self._shape(thread_id, namespace, parent_id)
            # the parent's chunks are in _stored: remembered when it was saved here,
            # or when its shape was resolved from the store
            shape = self.codec.shape(value, chunks, self._stored)
            if depth + 1 < FULL_EVERY:
                manifest = self.codec.delta_manifest(depth, old, shape)
        if manifest is None:
            manifest = self.codec.full_manifest(shape, chunks)
        checkpoint_id = checkpoint_id or new_checkpoint_id(parent_id)
        record = SnapshotRecord(
            thread_id=thread_id,
            namespace=namespace,
            checkpoint_id=checkpoint_id,
            parent_id=parent_id,
            # shapes hold text and hashes, never the state's own values
            manifest=self.serde.dumps_json(
                manifest, place=snapshot_place(thread_id, checkpoint_id)
            ),
            chunk_refs=refs(manifest),
            label=label,
            metadata=None
            if metadata is None
            else self.serde.dumps(
                metadata, place=snapshot_place(thread_id, checkpoint_id, "metadata")
            ),
            created_at_ms=now_ms,
        )
        await self._write(record, value, chunks)
        self._shapes[(thread_id, namespace)] = (
            checkpoint_id,
            shape,
            int(manifest["depth"]),
        )
        await self.packs.saved(thread_id, namespace)
        return record

    async def _write(
        self, record: SnapshotRecord, value: Any, chunks: dict[str, bytes]
    ) -> None:
        """Save `record` with the chunks the store may not hold yet."""
        new = {h: data for h, data in chunks.items() if h not in self._stored}
        try:
            await self.store.save_snapshot(record, chunks=new)
        except ChunksMissing:
            # a collection deleted chunks this engine remembered as stored (another
            # thread's, or a deleted parent's): send every chunk this time. (Should
            # `value` change during the first await, the shapes disagree and this
            # second save is refused too: the caller sees ChunksMissing.)
            self._stored.clear()
            self.codec.shape(value, chunks)  # seals each leaf not sealed above
            await self.store.save_snapshot(record, chunks=chunks)
            new = chunks
        self._remember(new)

    def _remember(self, stored: Iterable[str]) -> None:
        """Note chunks the store holds (a bounded set: forgetting costs a rewrite)."""
        if len(self._stored) > _STORED_MAX:
            self._stored.clear()
        self._stored.update(stored)

    async def load(
        self, thread_id: str, *, namespace: str = "", checkpoint_id: str | None = None
    ) -> tuple[SnapshotRecord, Any] | None:
        """The snapshot (latest, or the given one) and its value; None if none exists.

        Raises:
            CorruptCheckpointError: What is stored for it is damaged.
        """
        place = f"thread {thread_id!r}" + (
            "" if checkpoint_id is None else f" checkpoint {checkpoint_id!r}"
        )
        with reading(place):
            return await self._load(thread_id, namespace, checkpoint_id)

    async def _load(
        self, thread_id: str, namespace: str, checkpoint_id: str | None
    ) -> tuple[SnapshotRecord, Any] | None:
        record = await self.packs.find(thread_id, namespace, checkpoint_id)
        if record is None:
            return None
        cached = self._shapes.get((thread_id, namespace))
        if cached is not None and cached[0] == record.checkpoint_id:
            shape = cached[1]  # saved or loaded last here: its chain is resolved
        else:
            shape, _ = await self._resolve(record)
        hashes = list(dict.fromkeys(leaf_hashes(shape)))
        bodies, missing = await self._bodies(hashes)
        if missing:
            raise CorruptCheckpointError(
                place=snapshot_place(thread_id, record.checkpoint_id),
                detail=f"{len(missing)} content chunk(s) are missing, e.g. {missing[0]}",
            )
        leaves = {h: self.serde.decode(bodies[h], place=chunk_place(h)) for h in hashes}
        if checkpoint_id is None:
            # the latest state is what the next save extends: its leaves are then
            # known objects, checked, not encoded again (a chat turn's first save),
            # and their chunks known to be stored (just read)
            self._remember(hashes)
            for digest, leaf in leaves.items():
                self.codec.loaded(leaf, digest)
        return record, build(shape, leaves, self.serde.codec)

    async def view(
        self, thread_id: str, *, namespace: str = "", checkpoint_id: str | None = None
    ) -> tuple[SnapshotRecord, Any] | None:
        """`load`, with the value as its generic view (`Serde.view`): nothing is rebuilt."""
        record = await self.packs.find(thread_id, namespace, checkpoint_id)
        if record is None:
            return None
        shape, _ = await self._resolve(record)
        hashes = list(dict.fromkeys(leaf_hashes(shape)))
        bodies, missing = await self._bodies(hashes)
        place = snapshot_place(thread_id, record.checkpoint_id)
        if missing:
            raise CorruptCheckpointError(
                place=place,
                detail=f"{len(missing)} content chunk(s) are missing, e.g. {missing[0]}",
            )
        view = self.serde.view_opened
        leaves = {h: view(bodies[h], place=chunk_place(h)) for h in hashes}
        return record, build_view(shape, leaves, lambda body: view(body, place=place))

    async def make_full(self, record: SnapshotRecord) -> bool:
        """Rewrite a delta snapshot as a full one of the same id; False if it is gone.

        Before a thread's older snapshots are archived, its newest of each
        namespace is made full, so loading it reads none of them. Its chunk refs
        name every leaf of its state (those inside list segments too), so the
        archive leaves each one live.
        """
        shape, depth = await self._resolve(record)
        if depth == 0:
            return True
        full, chunks = self._full(record, shape, leaves=True)
        done = await self.replace_loose(record, full, chunks)
        if done:
            self._shapes[(record.thread_id, record.namespace)] = (
                record.checkpoint_id,
                shape,
                0,
            )
        return done

    def forget(self, thread_id: str) -> None:
        """Drop what is cached about a thread (after it was deleted)."""
        for key in [key for key in self._shapes if key[0] == thread_id]:
            del self._shapes[key]
        self.packs.forget(thread_id)

    def is_full(self, record: SnapshotRecord) -> bool:
        """Whether the snapshot's manifest is full (it needs no earlier snapshot)."""
        return "full" in self._manifest(record)

    async def full_version(
        self, record: SnapshotRecord
    ) -> tuple[SnapshotRecord, dict[str, bytes]]:
        """The snapshot with a full manifest of the same state, and new chunks it needs.

        What `delete_states` writes in place of a kept snapshot whose delta chain
        runs through a snapshot about to be deleted.
        """
        shape, _ = await self._resolve(record)
        return self._full(record, shape, leaves=False)

    def _full(
        self, record: SnapshotRecord, shape: Shape, *, leaves: bool
    ) -> tuple[SnapshotRecord, dict[str, bytes]]:
        """`record` with a full manifest of `shape`, and the new chunks it needs.

        With `leaves`, its chunk refs also name every leaf inside list segments.
        """
        chunks: dict[str, bytes] = {}
        manifest = self.codec.full_manifest(shape, chunks)
        named = refs(manifest)
        if leaves:
            named = tuple(dict.fromkeys((*named, *leaf_hashes(shape))))
        sealed = self.serde.dumps_json(
            manifest, place=snapshot_place(record.thread_id, record.checkpoint_id)
        )
        return replace(record, manifest=sealed, chunk_refs=named), chunks

    async def replace_loose(
        self, old: SnapshotRecord, new: SnapshotRecord, chunks: dict[str, bytes]
    ) -> bool:
        """Write `new` over the loose snapshot `old` as read; False if it changed.

        On a store that packs, a compare-and-swap with the new chunks in its
        transaction (a collection between a put and the swap could take them);
        elsewhere no packer can move `old`, and an upsert will do.
        """
        swaps = self.packs.swaps
        if swaps is None:
            await self.store.save_snapshot(new, chunks=chunks)
            return True
        return await swaps.swap_snapshots(old.thread_id, [old], by=new, chunks=chunks)

    def metadata(self, record: SnapshotRecord) -> Any:
        """The snapshot's decoded metadata (None if it has none)."""
        if record.metadata is None:
            return None
        return self.serde.loads(
            record.metadata,
            place=snapshot_place(record.thread_id, record.checkpoint_id, "metadata"),
        )

    async def _shape(
        self, thread_id: str, namespace: str, checkpoint_id: str
    ) -> tuple[Shape, int]:
        cached = self._shapes.get((thread_id, namespace))
        if cached is not None and cached[0] == checkpoint_id:
            return cached[1], cached[2]
        record = await self.packs.find(thread_id, namespace, checkpoint_id)
        if record is None:
            raise CheckpointNotFound(
                thread_id=thread_id,
                detail=f"has no checkpoint {checkpoint_id!r}; "
                f"list them with Engine.state_history({thread_id!r})",
            )
        return await self._resolve(record)

    async def _resolve(self, record: SnapshotRecord) -> tuple[Shape, int]:
        """The full shape a snapshot describes, and its depth in its delta chain."""
        chain = [self._manifest(record)]
        if "full" not in chain[0]:
            # a linear thread's previous snapshots are the chain: one query fetches it
            earlier = await self.packs.history(
                record.thread_id,
                namespace=record.namespace,
                before=record.checkpoint_id,
                limit=FULL_EVERY,
            )
            by_id = {snap.checkpoint_id: snap for snap in earlier}
            parent_id = record.parent_id
            while "full" not in chain[-1]:
                if parent_id is None or len(chain) > FULL_EVERY:
                    raise CorruptCheckpointError(
                        place=snapshot_place(record.thread_id, record.checkpoint_id),
                        detail="its chain of delta manifests does not end in a full one",
                    )
                parent = by_id.get(parent_id) or await self.packs.find(
                    record.thread_id, record.namespace, parent_id
                )
                if parent is None:
                    raise CorruptCheckpointError(
                        place=snapshot_place(record.thread_id, record.checkpoint_id),
                        detail=f"the snapshot it is based on ({parent_id!r}) is gone",
                    )
                chain.append(self._manifest(parent))
                parent_id = parent.parent_id
        shape = await self._unfold(chain[-1]["full"])  # new containers: ours to change
        for manifest in reversed(chain[:-1]):
            shape = apply_ops(shape, manifest["ops"])
        depth = int(chain[0]["depth"])
        self._remember(leaf_hashes(shape))  # the snapshot names them: they exist
        self._shapes[(record.thread_id, record.namespace)] = (
            record.checkpoint_id,
            shape,
            depth,
        )
        return shape, depth

    def _manifest(self, record: SnapshotRecord) -> dict[str, Any]:
        manifest: dict[str, Any] = self.serde.loads(
            record.manifest,
            place=snapshot_place(record.thread_id, record.checkpoint_id),
        )
        return manifest

    async def _unfold(self, shape: Shape) -> Shape:
        """Expand segment references back into item lists."""
        segment_hashes = list(dict.fromkeys(segments(shape)))
        bodies, missing = await self._bodies(segment_hashes)
        if missing:
            raise CorruptCheckpointError(
                place=chunk_place(missing[0]), detail="a list segment chunk is missing"
            )
        by_digest: dict[str, list[Shape]] = {
            digest: self.serde.decode(body, place=chunk_place(digest))
            for digest, body in bodies.items()
        }
        return expand(shape, by_digest)

    async def _bodies(self, hashes: list[str]) -> tuple[dict[str, bytes], list[str]]:
        """The bodies of these chunks, and the hashes the store has no chunk of.

        A body this engine saved or loaded before costs no read (`_Bodies`); the
        others are read in one call, checked and opened, and kept.
        """
        kept = self.codec.bodies
        bodies = kept.get_all(hashes)
        wanted = [h for h in hashes if h not in bodies]
        found = await self.store.get_chunks(wanted) if wanted else {}
        for digest in wanted:
            if digest in found:
                bodies[digest] = self.serde.envelope.open(
                    found[digest], place=chunk_place(digest)
                )
                kept.keep(digest, bodies[digest])
        return bodies, [h for h in wanted if h not in found]
