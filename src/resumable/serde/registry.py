"""TypeRegistry: the allowlist of types the codec may build when decoding.

A stored value names its type by a tag, `"module:qualname"`. Decoding builds a
type only if its tag is registered here, so data can never make the codec import
a module or call something it names. Types get here by `register()` (which
`resumable.register()` calls) and by `register_annotation()` on step and workflow
signatures. Encoding registers nothing: a value of a type that is not registered
is refused when it is written, since it could not be decoded back.

Registries nest: an Engine's own registry has the program's (`resumable.register`
and annotations) as its parent, so an engine sees every type the program
declared while the types given to one engine never widen another's allowlist.
Registrations a registry was asked to defer (annotations that may name classes
defined later in their module) run the first time a lookup misses.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

__all__ = ["TypeInfo", "TypeRegistry"]

Kind = Literal["enum", "dataclass", "namedtuple", "pydantic"]


@dataclass(frozen=True, slots=True)
class TypeInfo:
    """How the codec takes one registrable type apart and rebuilds it."""

    tag: str
    kind: Kind
    fields: tuple[str, ...]  # attributes read on encode, in declaration order
    late: frozenset[str]  # dataclass fields with init=False: set after construction
    has_init: bool  # dataclass: False for @dataclass(init=False)


class TypeRegistry:
    """Allowlist of types the codec may construct on decode.

    Never imports anything named by data: a tag that is not registered raises
    `SerializationError`. Registrable types are dataclasses, `Enum` subclasses,
    `NamedTuple`s and pydantic v2 models (including parametrized generics such as
    `Page[Item]`). Registering a type again under the same tag replaces the old
    one, so a class redefined by a module reload or a notebook cell keeps working.

    Args:
        parent: A registry whose types this one allows too (looked up after its
            own); registering here never changes the parent.
    """

    def __init__(self, *, parent: TypeRegistry | None = None) -> None:
        self._by_tag: dict[str, type] = {}
        # Classification cache for every type looked at; None means "not registrable".
        self._entries: dict[type, TypeInfo | None] = {}
        self._parent = parent
        self._deferred: list[Callable[[], bool]] = []

    def __repr__(self) -> str:
        parent = "" if self._parent is None else f", parent={self._parent!r}"
        return f"TypeRegistry({len(self._by_tag)} types{parent})"

    def defer(self, registration: Callable[[], bool]) -> None:
        """Run `registration` before the next lookup that misses.

        It returns whether it is done; one that is not (an annotation naming a
        class not defined yet) is tried again at the next miss.
        """
        self._deferred.append(registration)

    def register(self, *types: type) -> None:
        """Allow the codec to rebuild these types, and the types their fields use.

        Raises:
            TypeError: A type is not a dataclass, Enum, NamedTuple or pydantic model.
        """
        for tp in types:
            candidate: object = tp  # checked at run time: callers are not all typed
            entry = self.info(tp) if isinstance(candidate, type) else None
            if entry is None:
                raise TypeError(
                    f"{tp!r} cannot be registered: only dataclasses, Enum subclasses, "
                    f"NamedTuples and pydantic models are rebuilt by the codec; "
                    f"convert other values to JSON-like data"
                )
            self._add(tp, entry)
            self._walk_fields(tp, entry, {})

    def register_annotation(self, annotation: object) -> None:
        """Register every registrable type named by a type annotation.

        Walks `list[Foo]`, `dict[str, Foo | None]`, `tuple[A, B]`, `Optional`,
        `Annotated`, unions and pydantic generics, recursing into the field types
        of the dataclasses, NamedTuples and pydantic models it finds. Never raises:
        strings, TypeVars, `Any` and anything else it does not understand are
        skipped.
        """
        self._walk(annotation, {})

    def lookup(self, tag: str) -> type | None:
        """The registered type for a tag (here or in the parent), or None."""
        found = self._by_tag.get(tag)
        if found is not None:
            return found
        if self._parent is not None:
            found = self._parent.lookup(tag)
            if found is not None:
                return found
        if self._deferred and self._run_deferred():
            return self.lookup(tag)
        return None

    def _run_deferred(self) -> bool:
        """Run the deferred registrations; whether any of them finished."""
        pending, self._deferred = self._deferred, []
        left = [registration for registration in pending if not registration()]
        self._deferred.extend(left)
        return len(left) < len(pending)

    def tag_for(self, tp: type) -> str:
        """The stable name stored for a type: `"module:qualname"`.

        A parametrized pydantic generic's qualname carries its parameters as
        pydantic names them (`"app.models:Page[Item]"`).
        """
        return f"{tp.__module__}:{tp.__qualname__}"

    def info(self, tp: type) -> TypeInfo | None:
        """How the codec takes `tp` apart, or None if it cannot be registered."""
        try:
            return self._entries[tp]
        except KeyError:
            entry = self._entries[tp] = self._classify(tp)
            return entry

    def _add(self, tp: type, entry: TypeInfo) -> None:
        self._by_tag[entry.tag] = tp

    def _classify(self, tp: type) -> TypeInfo | None:
        tag = self.tag_for(tp)
        if issubclass(tp, enum.Enum):
            return TypeInfo(tag, "enum", (), frozenset(), has_init=True)
        if dataclasses.is_dataclass(tp):
            fields = dataclasses.fields(tp)
            params = getattr(tp, "__dataclass_params__", None)
            return TypeInfo(
                tag,
                "dataclass",
                tuple(f.name for f in fields),
                frozenset(f.name for f in fields if not f.init),
                has_init=bool(getattr(params, "init", True)),
            )
        if issubclass(tp, tuple) and isinstance(getattr(tp, "_fields", None), tuple):
            names = tuple(str(name) for name in getattr(tp, "_fields", ()))
            return TypeInfo(tag, "namedtuple", names, frozenset(), has_init=True)
        if _is_pydantic_model_class(tp):
            names = tuple(getattr(tp, "__pydantic_fields__", {}))
            return TypeInfo(tag, "pydantic", names, frozenset(), has_init=True)
        return None

    def _walk(self, annotation: object, seen: dict[int, object]) -> None:
        # Guards against cycles (a dataclass whose field names itself). Keyed by id()
        # but holding the object, so a freed alias's id cannot be reused mid-walk.
        if id(annotation) in seen:
            return
        seen[id(annotation)] = annotation
        try:
            if isinstance(annotation, str | TypeVar | typing.ForwardRef):
                return
            origin = typing.get_origin(annotation)
            if origin is typing.Annotated:
                self._walk(typing.get_args(annotation)[0], seen)
                return
            if origin is Literal:
                return  # its arguments are values, not types
            if isinstance(annotation, type) and origin is None:
                entry = self.info(annotation)
                if entry is not None:
                    self._add(annotation, entry)
                    self._walk_fields(annotation, entry, seen)
                return
            if isinstance(origin, type):
                self._walk(origin, seen)  # e.g. a generic dataclass Box[Item]
            for arg in typing.get_args(annotation):
                self._walk(arg, seen)
        except Exception:  # noqa: BLE001 - odd annotations are skipped, by contract
            return

    def _walk_fields(self, tp: type, entry: TypeInfo, seen: dict[int, object]) -> None:
        seen[id(tp)] = tp
        for hint in _field_hints(tp, entry):
            self._walk(hint, seen)


def _is_pydantic_model_class(tp: type) -> bool:
    # pydantic is optional: if it was never imported, no value can be a model.
    main = sys.modules.get("pydantic.main")
    base = getattr(main, "BaseModel", None)
    return isinstance(base, type) and issubclass(tp, base) and tp is not base


def _field_hints(tp: type, entry: TypeInfo) -> list[object]:
    """The annotations of a registrable type's fields, resolved where possible."""
    if entry.kind == "enum":
        return []
    if entry.kind == "pydantic":
        fields = getattr(tp, "__pydantic_fields__", {})
        return [getattr(info, "annotation", None) for info in fields.values()]
    try:
        hints = typing.get_type_hints(tp, include_extras=True)
    except Exception:  # noqa: BLE001 - one unresolvable name must not hide the rest
        return _field_hints_one_by_one(tp, entry)
    return list(hints.values())


def _field_hints_one_by_one(tp: type, entry: TypeInfo) -> list[object]:
    # Names local to a function cannot be resolved and are skipped.
    module = sys.modules.get(tp.__module__)
    globalns = dict(getattr(module, "__dict__", {}))
    localns = {**vars(tp), tp.__name__: tp}
    hints: list[object] = []
    for name, raw in _raw_annotations(tp, entry):
        if not isinstance(raw, str):
            hints.append(raw)
            continue
        holder = types.SimpleNamespace(__annotations__={name: raw})
        try:
            hints.extend(
                typing.get_type_hints(
                    holder, globalns=globalns, localns=localns, include_extras=True
                ).values()
            )
        except Exception:  # noqa: BLE001, S112 - unresolvable annotation: skip it
            continue
    return hints


def _raw_annotations(tp: type, entry: TypeInfo) -> list[tuple[str, object]]:
    if entry.kind == "dataclass" and dataclasses.is_dataclass(tp):
        return [(f.name, f.type) for f in dataclasses.fields(tp)]
    return list(getattr(tp, "__annotations__", {}).items())
