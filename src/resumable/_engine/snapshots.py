"""Snapshots: versioned saves of a state object, stored content-addressed.

A value is split into a *shape*: dicts by key, lists element by element, and every
other value (a list element, a string, a dataclass) as a leaf. A leaf of more than a
few bytes is a chunk, stored once under the hash of its encoding, so the same
message saved in 200 snapshots (or in two forks of a thread) is stored once.

A snapshot's manifest is either *full* (the whole shape, with long lists written
as aligned segments of SEGMENT item references, each segment itself a chunk that
later snapshots share) or a *delta* against its parent ("append these items to
the list at this path", "set this path"). Every FULL_EVERY-th snapshot in a
chain is full, so loading resolves at most that many deltas. An appending
conversation therefore writes O(1) bytes per save beyond the new message.
"""

from __future__ import annotations

import hashlib
import marshal
import operator
import secrets
import struct
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, NamedTuple, cast

from resumable._engine.damage import reading
from resumable._engine.ids import check_id
from resumable._engine.packs import Packs, is_pack_namespace, snapshot_place
from resumable.errors import (
    CheckpointNotFound,
    ChunksMissing,
    CorruptCheckpointError,
)
from resumable.serde import Serde
from resumable.serde.codec import Codec
from resumable.serde.view import escape_key
from resumable.stores.protocol import SnapshotRecord, Store

SEGMENT = 32
FULL_EVERY = 64
INLINE_MAX = 48
CHUNK_COMPRESS_OVER = 256
_STORED_MAX = 100_000  # chunk hashes an engine remembers the store holds
# leaves whose encoding is remembered (see SnapshotCodec.leaf), and the bytes of
# their images (or text): the memo also keeps the leaves alive, so both are bounded
_MEMO_MAX = 4096
_MEMO_MAX_BYTES = 64 << 20
_BODIES_MAX_BYTES = 16 << 20  # chunk bodies a SnapshotCodec keeps for loads

# what `_proof` marshals for a value of one type (see SnapshotCodec._imager)
_Imager = Callable[[Any], Any]


class _Proof(NamedTuple):
    """What proves that a leaf encodes as it did when `SnapshotCodec._proof` ran."""

    image: bytes
    unbuffered: bool  # no bytes-like value inside: see SnapshotCodec._unchanged
    imager: _Imager  # how its image is taken again
    members_of: _Imager  # reads what the image leaves out (see SnapshotCodec._imager)
    members: object  # what members_of read then: a set's copy, or the leaf's id


class _Memo(NamedTuple):
    """A leaf stored as a chunk, and what proves a later save would encode it alike.

    Its last fields are its `_Proof`'s, in the same order (`_Memo(..., *proof)`).
    """

    # held: no other object can take its id while the entry exists, so the entry
    # found by a value's id is that value's own (`leaf`, `_remembered`)
    leaf: object
    kind: type  # __class__ can be reassigned
    digest: str
    shape: Shape  # {"c": digest}, one object: equal shapes compare by identity
    image: bytes
    unbuffered: bool
    imager: _Imager
    members_of: _Imager
    members: object


# containers a walk of `_plainness` looks into before it gives up: a value with a
# reference cycle would never end it (it is then not imaged, and its encoding
# reports the cycle); a leaf with more is only encoded again at every save
_WALK_MAX: Final = 100_000
# a container longer than this is first checked at C speed: atoms only?
_LONG: Final = 16


def _plainness(atoms: frozenset[type]) -> Callable[[object], bool]:
    """A test that a value is built only of `atoms` and exact builtin containers.

    One loop over a stack, not a call per container: a chat message's fields are
    checked in ~1.8 us, against ~4.3 us for the recursive walk it replaced.
    """
    containers = frozenset({dict, list, tuple, set, frozenset})

    def plain(value: object) -> bool:
        pending = [value]
        pop, push = pending.pop, pending.extend
        budget = _WALK_MAX
        while pending:
            item: Any = pop()
            kind = type(item)
            if kind in atoms:
                continue
            budget -= 1
            if budget < 0 or kind not in containers:
                return False
            if kind is dict:
                if len(item) <= _LONG or not (
                    set(map(type, item)) <= atoms
                    and set(map(type, item.values())) <= atoms
                ):
                    push(item)
                    push(item.values())
            elif len(item) <= _LONG or not set(map(type, item)) <= atoms:
                push(item)
        return True

    return plain


# marshal format 2: no references to repeated objects, which from format 3 on are
# written only for objects with other references (an image would change with the
# refcounts of its strings); 20% faster too
_IMAGE_FORMAT: Final = 2
# marshal writes any buffer (a bytearray, a memoryview, an array, a bytes subclass)
# as bytes, so only exact builtin types make its images faithful
_plain = _plainness(frozenset({str, int, float, bool, type(None), bytes, type(...)}))
# ... and without bytes, an image holds no bytes code at all (SnapshotCodec._unchanged)
_unbuffered = _plainness(frozenset({str, int, float, bool, type(None), type(...)}))


_UNKNOWN: Final[Any] = object()  # a type not met yet (an imager may be None)
# values whose encoding their type and equality decide (not float: 0.0 == -0.0)
_ATOMS: Final = frozenset({str, int, bool, type(None)})
_ATOMS_MAX: Final = 1024
_str_only = frozenset({str}).issuperset
_RUN_MIN: Final = 8  # shorter runs of leaves are checked one `leaf` call each
# a _Memo's fields by position (a tuple's item, cheaper than its attribute)
(_, _KIND, _DIGEST, _SHAPE, _IMAGE, _UNBUFFERED, _IMAGER, _MEMBERS_OF, _MEMBERS) = (
    cast("Callable[[Any], Any]", operator.itemgetter(index))
    for index in range(len(_Memo._fields))
)
# (imager, leaf) -> imager(leaf), in C (the checkers cannot type operator.call so)
_image_with = cast("Callable[[_Imager, Any], Any]", operator.call)
_LIST_HEADER: Final = struct.Struct("<ci")  # marshal's list: "[", then its length


def _list_image(length: int, images: Iterable[bytes]) -> bytes:
    """What marshal writes for a list of `length` items with these images."""
    return b"".join((_LIST_HEADER.pack(b"[", length), *images))


def _itself(value: Any) -> Any:
    return value


def _nothing(_: Any) -> None:
    """Text's and bytes' imager: immutable, the object is its own image."""


_NOTHING: Final = marshal.dumps(None, _IMAGE_FORMAT)


def _no_fields(_: Any) -> tuple[()]:
    return ()


# a pydantic model's fields set: compared as a set, not imaged (see SnapshotCodec._imager)
_fields_set = cast("_Imager", operator.attrgetter("__pydantic_fields_set__"))


# {"j": encoded value} | {"c": hash} | {"d": {key: Shape}} | {"l": [Shape]}; manifests
# written before inline values were kept encoded hold {"v": value} instead of "j"
Shape = dict[str, Any]
Path = tuple[str, ...]


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


def new_checkpoint_id(after: str | None) -> str:
    """A sortable id later than `after` (a thread's ids only grow)."""
    candidate = f"{time.time_ns() // 1000:015x}{secrets.token_hex(3)}"
    if after is not None and candidate <= after:
        candidate = f"{int(after[:15], 16) + 1:015x}{secrets.token_hex(3)}"
    return candidate


class SnapshotCodec:
    """Turns values into shapes, chunks and manifests, and back."""

    def __init__(self, serde: Serde) -> None:
        self.serde = serde
        # conversation messages are small: compress them from CHUNK_COMPRESS_OVER
        # bytes (a no-op unless the zstd extra is installed)
        self.envelope = serde.envelope.with_compress_over(CHUNK_COMPRESS_OVER)
        # id(leaf) -> the leaf as it was when stored: see `leaf`
        self._memo: dict[int, _Memo] = {}
        self._memo_bytes = 0
        self._imagers: dict[type, tuple[_Imager, _Imager, _Imager] | None] = {}
        # (type, value) -> the inline shape of a small int, text, True, None...
        # (channel versions, flags): saved again at every save, encoded once
        self._atoms: dict[tuple[type, Any], Shape] = {}
        self.bodies = _Bodies()

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
            items = self._remembered(value, known)
            leaf = self.leaf
            items.extend(leaf(v, chunks, known) for v in value[len(items) :])
            return {"l": items}
        return self.leaf(value, chunks, known)

    def _remembered(self, values: list[Any], known: Collection[str]) -> list[Shape]:
        """The shapes of the first leaves of `values` that the memo proves unchanged.

        The longest such run from the start, or none, proved at once at C speed.

        A conversation appends to a list whose other elements the last save met.
        Checked one `leaf` call each, they cost ~1.2 us apiece, a third of it in
        the calls; here the same proof is made for the run as a whole, in a few C
        loops, without the calls: each is of the same type (the entry found by its
        id is its own), without bytes-like values inside, its chunk is stored, its
        members (a model's fields set) are as they were, and the marshalled images
        of them all equal their remembered images end to end (marshal's encodings
        are self-delimiting: equal concatenations are equal images one by one).
        Should any of it fail, `leaf` checks each of them again.
        """
        memo = self._memo
        if len(values) < _RUN_MIN or not memo or type(known) is not set:
            return []
        seen = list(map(memo.get, map(id, values)))
        if None in seen:
            del seen[seen.index(None) :]
        run = values[: len(seen)]
        try:
            if (
                len(seen) < _RUN_MIN
                or not all(map(operator.is_, map(_KIND, seen), map(type, run)))
                or not all(map(_UNBUFFERED, seen))
                or not known.issuperset(map(_DIGEST, seen))
            ):
                return []
            # types first: then == compares sets (or ids), never a stranger's __eq__
            members = list(map(_image_with, map(_MEMBERS_OF, seen), run))
            then = list(map(_MEMBERS, seen))
            if (
                not all(map(operator.is_, map(type, members), map(type, then)))
                or members != then
            ):
                return []
            image = marshal.dumps(
                list(map(_image_with, map(_IMAGER, seen), run)), _IMAGE_FORMAT
            )
        except Exception:  # noqa: BLE001 - the leaves are then checked one by one
            return []
        if image != _list_image(len(seen), map(_IMAGE, seen)):
            return []
        return list(map(_SHAPE, seen))

    def leaf(
        self, value: Any, chunks: dict[str, bytes], known: Collection[str] = ()
    ) -> Shape:
        """`value` as one leaf: inline when tiny, else a content-addressed chunk.

        Saving a conversation meets the same message objects at every save, and
        encoding them is most of a save's cost. So a leaf stored as a chunk is
        remembered with an *image* of its contents (`_proof`); the next save finds
        the same object with an identical image, which proves the same encoding,
        and reuses the hash. A leaf changed in place has another image and is
        encoded again.
        """
        kind = type(value)
        if kind in _ATOMS:
            atom = self._atoms.get((kind, value))
            if atom is not None:
                return atom
        seen = self._memo.get(id(value))
        if (
            seen is not None
            and seen.kind is type(value)
            and (seen.digest in known or seen.digest in chunks)
            and self._unchanged(value, seen)
        ):
            return seen.shape
        # imaged before it is encoded: should another thread change it meanwhile,
        # the image is the older one, and the next save encodes it again
        proof = self._proof(value)
        body = self.serde.codec.encode(value, root="state")
        if len(body) <= INLINE_MAX:
            # kept encoded: a shape holds no live object that could change behind
            # it, and comparing encodings tells 1, 1.0 and True apart
            inline = {"j": body.decode("utf-8", "surrogatepass")}
            if kind in _ATOMS:
                if len(self._atoms) >= _ATOMS_MAX:
                    self._atoms.clear()
                self._atoms[(kind, value)] = inline
            return inline
        digest = hashlib.blake2b(body, digest_size=12).hexdigest()
        if digest not in chunks and digest not in known:
            # sealing (zstd, AES) costs most
            chunks[digest] = self.envelope.seal(body, place=chunk_place(digest))
        self.bodies.keep(digest, body)
        return self._memorize(value, proof, digest)

    def loaded(self, value: Any, digest: str) -> None:
        """Remember a leaf just decoded from chunk `digest`, as `leaf` does one it stored.

        Saved again unchanged, it reuses the chunk. Should encoding it now give
        other bytes, the old chunk still decodes to an equal value.
        """
        self._memorize(value, self._proof(value), digest)

    def _memorize(self, value: Any, proof: _Proof | None, digest: str) -> Shape:
        """Remember `value` as stored in chunk `digest`, if `_proof` could image it.

        Returns its shape, the one a later save reuses.
        """
        shape = {"c": digest}
        if proof is None:
            return shape
        replaced = self._memo.pop(id(value), None)  # re-entered as the newest
        if replaced is not None:
            self._memo_bytes -= _held(replaced.leaf, replaced.image)
        elif len(self._memo) >= _MEMO_MAX or self._memo_bytes > _MEMO_MAX_BYTES:
            self._forget_older_half()
        self._memo_bytes += _held(value, proof.image)
        self._memo[id(value)] = _Memo(value, type(value), digest, shape, *proof)
        return shape

    def _forget_older_half(self) -> None:
        """Forget the leaves remembered first, down to half the bounds.

        Leaves that saves stopped meeting (replaced in the state, or loaded again as
        new objects at the next turn) are the older ones. A leaf still in use that
        goes is encoded once more at its next save, not every leaf at once.
        """
        memo = self._memo
        for key in list(memo):
            if len(memo) <= _MEMO_MAX // 2 and self._memo_bytes <= _MEMO_MAX_BYTES // 2:
                return
            forgotten = memo.pop(key)
            self._memo_bytes -= _held(forgotten.leaf, forgotten.image)

    def _unchanged(self, value: Any, seen: _Memo) -> bool:
        """Whether `value` would encode as it did when `seen` was memorized.

        Its image must be the same. A leaf that held no bytes-like value then needs
        no new check that it is made of exact builtin types: every marshal type
        code but bytes' is written only for its exact type, and a bytes-like value
        of any type would add a bytes code its old image lacks. That makes the
        check at each save ~3x cheaper, for the same proof.
        """
        try:
            members = seen.members_of(value)
            if type(members) is not type(seen.members) or members != seen.members:
                return False
            if not seen.unbuffered:
                proof = self._proof(value)
                return proof is not None and proof.image == seen.image
            return marshal.dumps(seen.imager(value), _IMAGE_FORMAT) == seen.image
        except Exception:  # noqa: BLE001 - whatever marshal refuses now has changed
            return False

    def _proof(self, value: Any) -> _Proof | None:
        """An exact image of what encoding `value` reads; None if none is exact.

        With the image: whether it has no bytes, how to image it again, and its
        members (`_imager`) as they are now.

        The flag says that no bytes-like value is inside (see `_unchanged`). Text
        and bytes are immutable: the object is its own image (`_NOTHING`; the memo
        entry found by its id is its own). Dicts and lists are imaged whole; a
        registered dataclass or pydantic model by exactly the attributes the codec
        reads (`_imager`). Only values made of exact builtin types are imaged
        (`_plain`): `marshal` then keeps dict order and tells 1, 1.0 and True
        apart, so equal images mean equal encodings. Anything else (a datetime, a
        nested model) gets None and is encoded at every save.
        """
        kind = type(value)
        if kind is str or kind is bytes:
            return _Proof(_NOTHING, True, _nothing, id, id(value))
        imagers = self._imagers.get(kind, _UNKNOWN)
        if imagers is _UNKNOWN:
            imagers = self._imagers[kind] = self._imager(kind)
        if imagers is None:
            return None
        imager, careful, members_of = imagers
        try:
            imaged = imager(value)
        except AttributeError:  # a field unset on this instance
            imager, imaged = careful, careful(value)
        members = _members_now(members_of, value)
        if members is _UNKNOWN:
            return None
        if _unbuffered(imaged):  # the common case: one walk
            unbuffered = True
        elif _plain(imaged):
            unbuffered = False
        else:
            return None
        image = marshal.dumps(imaged, _IMAGE_FORMAT)
        return _Proof(image, unbuffered, imager, members_of, members)

    def _imager(self, kind: type) -> tuple[_Imager, _Imager, _Imager] | None:
        """How `_proof` reads what it marshals for a `kind`; None if it cannot.

        Three readers: one at C speed, one for an instance with an unset field, and
        one of its *members*, a value compared rather than imaged.

        A dict or list is itself; a registered dataclass or pydantic model is the
        fields the codec reads (wherever they live: slots, class defaults), with
        pydantic's extra fields. An instance missing a field (an unset slot) makes
        the first raise AttributeError; the second reads `...` for it.

        A pydantic model's members are its fields set, whose sorted names the codec
        stores. marshal writes a set sorted too, which cost ~1 us of a chat
        message's ~2.1 us image here; reading the set and comparing it with a copy
        taken with the image costs ~0.4 us. Equal sets of exact `str` have equal
        sorted names. (A member that compares equal to a name without being a
        `str` is not told apart; pydantic only ever adds field names.) Other
        values' members are their `id`, which the memo entry found by it already
        proves.
        """
        if kind is dict or kind is list:
            return _itself, _itself, id
        entry = self.serde.registry.info(kind)
        if entry is None or entry.kind not in ("dataclass", "pydantic"):
            return None
        names = entry.fields
        members_of: _Imager = id
        if entry.kind == "pydantic":
            names = (*names, "__pydantic_extra__")
            members_of = _fields_set
        if not names:
            return _no_fields, _no_fields, members_of

        def careful(value: Any) -> tuple[Any, ...]:
            return tuple(getattr(value, name, ...) for name in names)

        return operator.attrgetter(*names), careful, members_of

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
        _diff((), old, new, ops)
        if len(ops) > 8:
            return None
        return {"depth": depth + 1, "ops": ops}


class _Bodies:
    """Chunk bodies (leaves, list segments) by digest, checked and opened.

    Opened: decrypted and decompressed, as encoded. A chunk's digest is that of
    its body, so a body kept here never goes stale: a load finds here what this
    engine saved or loaded before, without a read, a checksum or a decompression.
    Bounded in bytes; the oldest go first.
    """

    def __init__(self) -> None:
        self._by_digest: dict[str, bytes] = {}
        self._bytes = 0

    def get_all(self, digests: Iterable[str]) -> dict[str, bytes]:
        """The bodies kept of these digests (a copy: later evictions leave it be)."""
        kept = self._by_digest
        return {d: body for d in digests if (body := kept.get(d)) is not None}

    def keep(self, digest: str, body: bytes) -> None:
        kept = self._by_digest
        if digest in kept or len(body) > _BODIES_MAX_BYTES // 2:
            return
        if self._bytes + len(body) > _BODIES_MAX_BYTES:
            for old in list(kept):
                if self._bytes <= _BODIES_MAX_BYTES // 2:
                    break
                self._bytes -= len(kept.pop(old))
        kept[digest] = body
        self._bytes += len(body)


def _members_now(members_of: _Imager, value: Any) -> Any:
    """What `members_of` reads of `value`, a fields set copied; _UNKNOWN if unfit.

    A fields set is fit when it is a set of exact `str`, as pydantic makes it.
    """
    try:
        members = members_of(value)
    except AttributeError:
        return _UNKNOWN
    if members_of is not _fields_set:
        return members
    if type(members) is not set or not _str_only(map(type, members)):
        return _UNKNOWN
    return set(members)


def _held(value: Any, image: bytes) -> int:
    """About how many bytes a memo entry keeps alive (text is its own image)."""
    return len(value) if type(value) in (str, bytes) else len(image)


def chunk_place(digest: str) -> str:
    """How messages (and encryption's associated data) name a chunk."""
    return f"chunk {digest}"


def _diff(path: Path, old: Shape, new: Shape, ops: list[list[Any]]) -> None:
    if old == new:
        return
    if "d" in old and "d" in new:
        for key in old["d"].keys() - new["d"].keys():
            ops.append(["del", [*path, key]])
        for key, value in new["d"].items():
            if key in old["d"]:
                _diff((*path, key), old["d"][key], value, ops)
            else:
                ops.append(["set", [*path, key], value])
        return
    if "l" in old and "l" in new:
        before, after = old["l"], new["l"]
        if len(after) >= len(before) and after[: len(before)] == before:
            ops.append(["append", list(path), after[len(before) :]])
            return
    ops.append(["set", list(path), new])


def _apply(shape: Shape, ops: Sequence[Sequence[Any]]) -> Shape:
    """`shape` changed by one delta manifest's ops, in place: the caller's own copy."""
    result = shape
    for op in ops:
        kind, path = op[0], tuple(op[1])
        if kind == "append":
            _at(result, path)["l"].extend(op[2])
        elif kind == "set":
            result = _set(result, path, op[2])
        elif kind == "del":
            del _at(result, path[:-1])["d"][path[-1]]
        else:
            raise ValueError(f"unknown snapshot op {kind!r}")
    return result


def _at(shape: Shape, path: Path) -> Shape:
    for key in path:
        shape = shape["d"][key]
    return shape


def _set(shape: Shape, path: Path, value: Shape) -> Shape:
    if not path:
        return value
    _at(shape, path[:-1])["d"][path[-1]] = value
    return shape


def _leaf_hashes(shape: Shape) -> Iterator[str]:
    if "c" in shape:
        yield shape["c"]
    elif "d" in shape:
        for value in shape["d"].values():
            yield from _leaf_hashes(value)
    elif "l" in shape:
        for item in shape["l"]:
            yield from _leaf_hashes(item)


def _refs(manifest: dict[str, Any]) -> tuple[str, ...]:
    """The chunks a manifest names directly (what GC must keep while it exists)."""
    found: list[str] = []

    def walk(shape: Shape) -> None:
        if "c" in shape:
            found.append(shape["c"])
        elif "d" in shape:
            for value in shape["d"].values():
                walk(value)
        elif "l" in shape:
            found.extend(shape.get("s", ()))
            for item in shape["l"]:
                walk(item)

    if "full" in manifest:
        walk(manifest["full"])
    for op in manifest.get("ops", ()):
        if op[0] == "append":
            for item in op[2]:
                walk(item)
        elif op[0] == "set":
            walk(op[2])
    return tuple(dict.fromkeys(found))


class Snapshots:
    """save / load / history of snapshots on one store, for one Engine."""

    def __init__(self, store: Store, serde: Serde) -> None:
        self.store, self.codec = store, SnapshotCodec(serde)
        self.serde = serde
        self.packs = Packs(store, serde)
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
        check_id("thread_id", thread_id)
        check_id("namespace", namespace)
        if checkpoint_id is not None:
            check_id("checkpoint_id", checkpoint_id)
        if is_pack_namespace(namespace):
            raise ValueError(
                f"namespace {namespace!r}: names starting with ':pack:' are where "
                f"resumable packs older snapshots; choose another"
            )
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
            chunk_refs=_refs(manifest),
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
        hashes = list(dict.fromkeys(_leaf_hashes(shape)))
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
        return record, _build(shape, leaves, self.serde.codec)

    async def view(
        self, thread_id: str, *, namespace: str = "", checkpoint_id: str | None = None
    ) -> tuple[SnapshotRecord, Any] | None:
        """`load`, with the value as its generic view (`Serde.view`): nothing is rebuilt."""
        record = await self.packs.find(thread_id, namespace, checkpoint_id)
        if record is None:
            return None
        shape, _ = await self._resolve(record)
        hashes = list(dict.fromkeys(_leaf_hashes(shape)))
        bodies, missing = await self._bodies(hashes)
        place = snapshot_place(thread_id, record.checkpoint_id)
        if missing:
            raise CorruptCheckpointError(
                place=place,
                detail=f"{len(missing)} content chunk(s) are missing, e.g. {missing[0]}",
            )
        view = self.serde.view_opened
        leaves = {h: view(bodies[h], place=chunk_place(h)) for h in hashes}
        return record, _build_view(shape, leaves, lambda body: view(body, place=place))

    def forget(self, thread_id: str) -> None:
        """Drop what is cached about a thread (after it was deleted)."""
        for key in [key for key in self._shapes if key[0] == thread_id]:
            del self._shapes[key]
        self.packs.forget(thread_id)

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
            shape = _apply(shape, manifest["ops"])
        depth = int(chain[0]["depth"])
        self._remember(_leaf_hashes(shape))  # the snapshot names them: they exist
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
        segment_hashes = list(dict.fromkeys(_segments(shape)))
        bodies, missing = await self._bodies(segment_hashes)
        if missing:
            raise CorruptCheckpointError(
                place=chunk_place(missing[0]), detail="a list segment chunk is missing"
            )
        segments: dict[str, list[Shape]] = {
            digest: self.serde.decode(body, place=chunk_place(digest))
            for digest, body in bodies.items()
        }
        return _expand(shape, segments)

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


def _segments(shape: Shape) -> Iterator[str]:
    if "d" in shape:
        for value in shape["d"].values():
            yield from _segments(value)
    elif "l" in shape:
        yield from shape.get("s", ())
        for item in shape["l"]:
            yield from _segments(item)


def _expand(shape: Shape, segments: dict[str, list[Shape]]) -> Shape:
    if "d" in shape:
        return {"d": {k: _expand(v, segments) for k, v in shape["d"].items()}}
    if "l" in shape:
        items = [item for digest in shape.get("s", ()) for item in segments[digest]]
        return {"l": [_expand(item, segments) for item in [*items, *shape["l"]]]}
    return shape


def _build(shape: Shape, leaves: dict[str, Any], codec: Codec) -> Any:
    if "j" in shape:
        return codec.decode(shape["j"].encode("utf-8", "surrogatepass"))
    if "v" in shape:
        return shape["v"]
    if "c" in shape:
        return leaves[shape["c"]]
    if "d" in shape:
        return {k: _build(v, leaves, codec) for k, v in shape["d"].items()}
    return [_build(item, leaves, codec) for item in shape["l"]]


def _build_view(
    shape: Shape, leaves: dict[str, Any], view: Callable[[bytes], Any]
) -> Any:
    """`_build` for generic views: leaves already viewed, inline ones viewed here."""
    if "j" in shape:
        return view(shape["j"].encode("utf-8", "surrogatepass"))
    if "v" in shape:
        return shape["v"]
    if "c" in shape:
        return leaves[shape["c"]]
    if "d" in shape:
        return {
            escape_key(k): _build_view(v, leaves, view) for k, v in shape["d"].items()
        }
    return [_build_view(item, leaves, view) for item in shape["l"]]
