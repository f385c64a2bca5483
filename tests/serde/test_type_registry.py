"""TypeRegistry: the allowlist of types the codec may build."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import (
    Annotated,
    Any,
    Generic,
    Literal,
    NamedTuple,
    Optional,
    TypeVar,
    Union,
)

import pytest
from pydantic import BaseModel

from resumable.serde import Codec, TypeRegistry

T = TypeVar("T")


class Status(enum.Enum):
    OK = "ok"


@dataclass
class Leaf:
    status: Status


@dataclass
class Branch:
    leaves: list[Leaf]
    children: list[Branch] = field(default_factory=list)  # self-reference


class Pair(NamedTuple):
    left: Leaf
    right: int


class Doc(BaseModel):
    text: str


class Envelope(BaseModel, Generic[T]):
    body: T


@dataclass
class Box(Generic[T]):
    content: T


class Unrelated:
    pass


def registered(registry: TypeRegistry, *types: type) -> bool:
    return all(registry.lookup(registry.tag_for(tp)) is tp for tp in types)


def test_tags_are_module_and_qualname() -> None:
    registry = TypeRegistry()
    assert registry.tag_for(Leaf) == f"{__name__}:Leaf"
    assert registry.tag_for(Status) == f"{__name__}:Status"


def test_register_adds_the_types_and_the_types_of_their_fields() -> None:
    registry = TypeRegistry()
    registry.register(Branch)
    assert registered(registry, Branch, Leaf, Status)


def test_lookup_of_an_unknown_tag_is_none() -> None:
    assert TypeRegistry().lookup("os:system") is None


@pytest.mark.parametrize("tp", [int, dict, Unrelated, BaseModel])
def test_register_refuses_types_the_codec_cannot_rebuild(tp: type) -> None:
    with pytest.raises(TypeError, match="cannot be registered"):
        TypeRegistry().register(tp)


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (list[Leaf], (Leaf, Status)),
        (dict[str, Leaf | None], (Leaf,)),
        (Optional[Pair], (Pair, Leaf)),  # noqa: UP045 - the old spelling is under test
        (Union[Doc, int], (Doc,)),  # noqa: UP007 - the old spelling is under test
        (tuple[Doc, Status], (Doc, Status)),
        (Annotated[list[Doc], "meta"], (Doc,)),
        (Envelope[Doc], (Envelope[Doc], Doc)),
        (Box[Doc], (Box, Doc)),
        (Branch, (Branch, Leaf, Status)),
    ],
    ids=repr,
)
def test_register_annotation_finds_nested_types(
    annotation: object, expected: tuple[type, ...]
) -> None:
    registry = TypeRegistry()
    registry.register_annotation(annotation)
    assert registered(registry, *expected)


@pytest.mark.parametrize(
    "annotation",
    ["Leaf", T, Any, Literal["a", 1], None, 42, list["Leaf"], Unrelated, dict],
    ids=repr,
)
def test_register_annotation_skips_odd_annotations_without_raising(
    annotation: object,
) -> None:
    registry = TypeRegistry()
    registry.register_annotation(annotation)
    assert repr(registry) == "TypeRegistry(0 types)"


def test_fields_that_resolve_are_registered_when_others_do_not() -> None:
    @dataclass
    class Sibling:
        x: int

    @dataclass
    class Local:
        leaf: Leaf  # a string here: resolvable from the module
        sibling: Sibling  # a string naming a function local: skipped

    registry = TypeRegistry()
    registry.register(Local)
    assert registered(registry, Local, Leaf, Status)
    assert not registered(registry, Sibling)


def test_registering_a_redefined_class_replaces_the_old_one() -> None:
    registry = TypeRegistry()

    def define() -> type:
        @dataclass
        class Local:
            x: int

        return Local

    first, second = define(), define()
    registry.register(first)
    registry.register(second)
    assert registry.tag_for(first) == registry.tag_for(second)
    assert registry.lookup(registry.tag_for(first)) is second


def test_a_registered_type_decodes_in_a_fresh_codec_on_the_same_registry() -> None:
    registry = TypeRegistry()
    registry.register(Branch)
    data = Codec(registry).encode(Branch([Leaf(Status.OK)]))
    assert Codec(registry).decode(data) == Branch([Leaf(Status.OK)])
