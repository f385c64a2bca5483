"""The leaf memo: a save skips encoding the leaves an earlier save met unchanged.

Saving a conversation meets the same message objects at every save, and encoding
them is most of a save's cost. So a leaf stored as a chunk is remembered by its
`id()` with an *image* of its contents (`proof`): `marshal` of exactly what the
codec would read. The next save that finds the same object with an identical
image has proof of the same encoding, and reuses the chunk's hash. A leaf changed
in place has another image and is encoded again; a value that cannot be imaged
exactly is encoded at every save.

This is a fast path beside the plain one (`SnapshotCodec(memo=False)` encodes
every leaf at every save): both store the same bytes, which
tests/engine/test_snapshot_memo.py checks on a corpus of states and in-place
changes, and benchmarks/snapshot_storage.py times one against the other.
"""

from __future__ import annotations

import marshal
import operator
import struct
from collections.abc import Callable, Collection, Iterable
from typing import Any, Final, NamedTuple, cast

from resumable._engine.shapes import Shape
from resumable.serde.codec import TypeRegistry

# leaves whose encoding is remembered, and the bytes of their images (or text):
# the memo also keeps the leaves alive, so both are bounded
MEMO_MAX = 4096
MEMO_MAX_BYTES = 64 << 20

# what `proof` marshals for a value of one type (see LeafMemo._imager)
_Imager = Callable[[Any], Any]


class _Proof(NamedTuple):
    """What proves that a leaf encodes as it did when `LeafMemo.proof` ran."""

    image: bytes
    unbuffered: bool  # no bytes-like value inside: see LeafMemo._unchanged
    imager: _Imager  # how its image is taken again
    members_of: _Imager  # reads what the image leaves out (see LeafMemo._imager)
    members: object  # what members_of read then: a set's copy, or the leaf's id


class _Memo(NamedTuple):
    """A leaf stored as a chunk, and what proves a later save would encode it alike.

    Its last fields are its `_Proof`'s, in the same order (`_Memo(..., *proof)`).
    """

    # held: no other object can take its id while the entry exists, so the entry
    # found by a value's id is that value's own (`find`, `find_run`)
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

    One loop over a stack, not a call per container, with a budget: a value with
    a reference cycle ends the walk instead of recursing without end.
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
# ... and without bytes, an image holds no bytes code at all (LeafMemo._unchanged)
_unbuffered = _plainness(frozenset({str, int, float, bool, type(None), type(...)}))


_UNKNOWN: Final[Any] = object()  # a type not met yet (an imager may be None)
# values whose encoding their type and equality decide (not float: 0.0 == -0.0)
_ATOMS: Final = frozenset({str, int, bool, type(None)})
_ATOMS_MAX: Final = 1024
_str_only = frozenset({str}).issuperset
_RUN_MIN: Final = 8  # shorter runs of leaves are checked one `find` call each
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


# a pydantic model's fields set: compared as a set, not imaged (see LeafMemo._imager)
_fields_set = cast("_Imager", operator.attrgetter("__pydantic_fields_set__"))


class LeafMemo:
    """Leaves stored as chunks, by `id()`, with what proves they are unchanged.

    Also the inline shapes of small atoms (ints, short text, flags) met before.
    """

    def __init__(
        self,
        registry: TypeRegistry,
        *,
        max_entries: int = MEMO_MAX,
        max_bytes: int = MEMO_MAX_BYTES,
    ) -> None:
        self.registry = registry
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._entries: dict[int, _Memo] = {}
        self._bytes = 0
        self._imagers: dict[type, tuple[_Imager, _Imager, _Imager] | None] = {}
        # (type, value) -> the inline shape of a small int, text, True, None...
        # (channel versions, flags): saved again at every save, encoded once
        self._atoms: dict[tuple[type, Any], Shape] = {}

    def __len__(self) -> int:
        """Leaves remembered."""
        return len(self._entries)

    @property
    def held_bytes(self) -> int:
        """About how many bytes the remembered leaves' images (or text) take."""
        return self._bytes

    def find(
        self, value: Any, chunks: Collection[str], known: Collection[str]
    ) -> Shape | None:
        """`value`'s shape if a save met it before and it encodes as it did then.

        Its chunk must be in `known` (the store holds it) or in `chunks` (this
        save writes it); None means: encode it.
        """
        kind = type(value)
        if kind in _ATOMS:
            atom = self._atoms.get((kind, value))
            if atom is not None:
                return atom
        seen = self._entries.get(id(value))
        if (
            seen is not None
            and seen.kind is kind
            and (seen.digest in known or seen.digest in chunks)
            and self._unchanged(value, seen)
        ):
            return seen.shape
        return None

    def find_run(self, values: list[Any], known: Collection[str]) -> list[Shape]:
        """The shapes of the first leaves of `values` that the memo proves unchanged.

        The longest such run from the start, or none, proved at once at C speed.

        A conversation appends to a list whose other elements the last save met.
        Here the proof `find` makes one leaf at a time is made for the run as a
        whole, in a few C loops, without a call per leaf: each is of the same
        type (the entry found by its id is its own), without bytes-like values
        inside, its chunk is stored, its members (a model's fields set) are as
        they were, and the marshalled images of them all equal their remembered
        images end to end (marshal's encodings are self-delimiting: equal
        concatenations are equal images one by one). Should any of it fail, the
        caller checks each of them again.
        """
        memo = self._entries
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

    def keep_inline(self, value: Any, shape: Shape) -> None:
        """Remember the inline shape of an atom (a small int, short text, a flag)."""
        kind = type(value)
        if kind in _ATOMS:
            if len(self._atoms) >= _ATOMS_MAX:
                self._atoms.clear()
            self._atoms[(kind, value)] = shape

    def remember(self, value: Any, proof: _Proof | None, digest: str) -> Shape:
        """Remember `value` as stored in chunk `digest`, if `proof` could image it.

        Returns its shape, the one a later save reuses.
        """
        shape = {"c": digest}
        if proof is None:
            return shape
        replaced = self._entries.pop(id(value), None)  # re-entered as the newest
        if replaced is not None:
            self._bytes -= _held(replaced.leaf, replaced.image)
        elif len(self._entries) >= self.max_entries or self._bytes > self.max_bytes:
            self._forget_older_half()
        self._bytes += _held(value, proof.image)
        self._entries[id(value)] = _Memo(value, type(value), digest, shape, *proof)
        return shape

    def _forget_older_half(self) -> None:
        """Forget the leaves remembered first, down to half the bounds.

        Leaves that saves stopped meeting (replaced in the state, or loaded again as
        new objects at the next turn) are the older ones. A leaf still in use that
        goes is encoded once more at its next save, not every leaf at once.
        """
        memo = self._entries
        for key in list(memo):
            if (
                len(memo) <= self.max_entries // 2
                and self._bytes <= self.max_bytes // 2
            ):
                return
            forgotten = memo.pop(key)
            self._bytes -= _held(forgotten.leaf, forgotten.image)

    def _unchanged(self, value: Any, seen: _Memo) -> bool:
        """Whether `value` would encode as it did when `seen` was remembered.

        Its image must be the same. A leaf that held no bytes-like value then needs
        no new check that it is made of exact builtin types: every marshal type
        code but bytes' is written only for its exact type, and a bytes-like value
        of any type would add a bytes code its old image lacks. So the check at
        each save skips the walk, for the same proof.
        """
        try:
            members = seen.members_of(value)
            if type(members) is not type(seen.members) or members != seen.members:
                return False
            if not seen.unbuffered:
                proof = self.proof(value)
                return proof is not None and proof.image == seen.image
            return marshal.dumps(seen.imager(value), _IMAGE_FORMAT) == seen.image
        except Exception:  # noqa: BLE001 - whatever marshal refuses now has changed
            return False

    def proof(self, value: Any) -> _Proof | None:
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
        """How `proof` reads what it marshals for a `kind`; None if it cannot.

        Three readers: one at C speed, one for an instance with an unset field, and
        one of its *members*, a value compared rather than imaged.

        A dict or list is itself; a registered dataclass or pydantic model is the
        fields the codec reads (wherever they live: slots, class defaults), with
        pydantic's extra fields. An instance missing a field (an unset slot) makes
        the first raise AttributeError; the second reads `...` for it.

        A pydantic model's members are its fields set, whose sorted names the codec
        stores: compared with a copy taken with the image, rather than marshalled
        (which sorts it at every save). Equal sets of exact `str` have equal
        sorted names. (A member that compares equal to a name without being a
        `str` is not told apart; pydantic only ever adds field names.) Other
        values' members are their `id`, which the memo entry found by it already
        proves.
        """
        if kind is dict or kind is list:
            return _itself, _itself, id
        entry = self.registry.info(kind)
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
