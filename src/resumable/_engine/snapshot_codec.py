"""The snapshot codec: values to shapes, chunks and manifests.

A leaf of more than INLINE_MAX encoded bytes is a chunk, stored once under the
hash of its encoding, so the same message saved in 200 snapshots (or in two forks
of a thread) is stored once. A manifest is either *full* (the whole shape, long
lists written as aligned segments of SEGMENT item references, each segment itself
a chunk that later snapshots share) or a *delta* against its parent's shape.

The plain path encodes every leaf at every save. With `memo=True` (what an Engine
uses) a `LeafMemo` skips the leaves an earlier save met unchanged; both paths
give the same shapes and chunks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable
from typing import Any

from resumable._engine.leaf_memo import LeafMemo
from resumable._engine.shapes import Shape, chunk_place, diff
from resumable.serde import Serde

SEGMENT = 32
INLINE_MAX = 48
CHUNK_COMPRESS_OVER = 256
BODIES_MAX_BYTES = 16 << 20  # chunk bodies a SnapshotCodec keeps for loads
_str_only = frozenset({str}).issuperset


class SnapshotCodec:
    """Turns values into shapes, chunks and manifests.

    Args:
        serde: Encodes leaves and seals chunks.
        memo: Skip encoding the leaves an earlier save met unchanged (`LeafMemo`);
            False encodes every leaf at every save. Both store the same bytes.
    """

    def __init__(self, serde: Serde, *, memo: bool = True) -> None:
        self.serde = serde
        # conversation messages are small: compress them from CHUNK_COMPRESS_OVER
        # bytes (a no-op unless the zstd extra is installed)
        self.envelope = serde.envelope.with_compress_over(CHUNK_COMPRESS_OVER)
        self.memo = LeafMemo(serde.registry) if memo else None
        self.bodies = Bodies()

    # --- value -> shape ---------------------------------------------------------
    def shape(
        self, value: Any, chunks: dict[str, bytes], known: Collection[str] = ()
    ) -> Shape:
        """The shape of `value`; chunks not in `known` are sealed into `chunks`.

        Dicts split by key and lists by element; an element is one leaf however
        it is built (a chat message stays one chunk, referenced by one hash).
        """
        if type(value) is dict and _str_only(map(type, value)):
            return {"d": {k: self.shape(v, chunks, known) for k, v in value.items()}}
        if type(value) is list:
            items = [] if self.memo is None else self.memo.find_run(value, known)
            items.extend(self.leaf(v, chunks, known) for v in value[len(items) :])
            return {"l": items}
        return self.leaf(value, chunks, known)

    def leaf(
        self, value: Any, chunks: dict[str, bytes], known: Collection[str] = ()
    ) -> Shape:
        """`value` as one leaf: inline when tiny, else a content-addressed chunk."""
        memo = self.memo
        if memo is None:
            return self._encoded(value, chunks, known)
        found = memo.find(value, chunks, known)
        if found is not None:
            return found
        # imaged before it is encoded: should another thread change it meanwhile,
        # the image is the older one, and the next save encodes it again
        proof = memo.proof(value)
        shape = self._encoded(value, chunks, known)
        if "c" in shape:
            return memo.remember(value, proof, shape["c"])
        memo.keep_inline(value, shape)
        return shape

    def _encoded(
        self, value: Any, chunks: dict[str, bytes], known: Collection[str]
    ) -> Shape:
        """The plain path: `value` encoded, and sealed as a chunk if new and large."""
        body = self.serde.codec.encode(value, root="state")
        if len(body) <= INLINE_MAX:
            # kept encoded: a shape holds no live object that could change behind
            # it, and comparing encodings tells 1, 1.0 and True apart
            return {"j": body.decode("utf-8", "surrogatepass")}
        digest = hashlib.blake2b(body, digest_size=12).hexdigest()
        if digest not in chunks and digest not in known:
            # sealing (zstd, AES) costs most
            chunks[digest] = self.envelope.seal(body, place=chunk_place(digest))
        self.bodies.keep(digest, body)
        return {"c": digest}

    def loaded(self, value: Any, digest: str) -> None:
        """Note a leaf just decoded from chunk `digest`, as `leaf` notes one it stored.

        Saved again unchanged, it reuses the chunk. Should encoding it now give
        other bytes, the old chunk still decodes to an equal value.
        """
        if self.memo is not None:
            self.memo.remember(value, self.memo.proof(value), digest)

    # --- manifests --------------------------------------------------------------
    def full_manifest(self, shape: Shape, chunks: dict[str, bytes]) -> dict[str, Any]:
        """A manifest holding the whole shape, long lists folded into segment chunks."""
        return {"full": self._fold(shape, chunks), "depth": 0}

    def _fold(self, shape: Shape, chunks: dict[str, bytes]) -> Shape:
        if "d" in shape:
            return {"d": {k: self._fold(v, chunks) for k, v in shape["d"].items()}}
        if "l" not in shape:
            return shape
        items = [self._fold(item, chunks) for item in shape["l"]]
        whole = len(items) // SEGMENT * SEGMENT
        segments = []
        for start in range(0, whole, SEGMENT):
            body = self.serde.codec.encode_json(items[start : start + SEGMENT])
            digest = hashlib.blake2b(body, digest_size=12).hexdigest()
            if digest not in chunks:
                chunks[digest] = self.serde.envelope.seal(
                    body, place=chunk_place(digest)
                )
            self.bodies.keep(digest, body)
            segments.append(digest)
        return {"l": items[whole:], "s": segments} if segments else {"l": items}

    def delta_manifest(
        self, depth: int, old: Shape, new: Shape
    ) -> dict[str, Any] | None:
        """A manifest of the changes from `old` to `new`; None if a full one is smaller."""
        ops: list[list[Any]] = []
        diff((), old, new, ops)
        if len(ops) > 8:
            return None
        return {"depth": depth + 1, "ops": ops}


class Bodies:
    """Chunk bodies (leaves, list segments) by digest, checked and opened.

    Opened: decrypted and decompressed, as encoded. A chunk's digest is that of
    its body, so a body kept here never goes stale: a load finds here what this
    engine saved or loaded before, without a read, a checksum or a decompression.
    Bounded in bytes; the oldest go first.
    """

    def __init__(self, *, max_bytes: int = BODIES_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._by_digest: dict[str, bytes] = {}
        self._bytes = 0

    @property
    def held_bytes(self) -> int:
        """The bytes of the bodies kept."""
        return self._bytes

    def get_all(self, digests: Iterable[str]) -> dict[str, bytes]:
        """The bodies kept of these digests (a copy: later evictions leave it be)."""
        kept = self._by_digest
        return {d: body for d in digests if (body := kept.get(d)) is not None}

    def keep(self, digest: str, body: bytes) -> None:
        """Keep a chunk's opened body; over half the bound, it is not kept."""
        kept = self._by_digest
        if digest in kept or len(body) > self.max_bytes // 2:
            return
        if self._bytes + len(body) > self.max_bytes:
            for old in list(kept):
                if self._bytes <= self.max_bytes // 2:
                    break
                self._bytes -= len(kept.pop(old))
        kept[digest] = body
        self._bytes += len(body)
