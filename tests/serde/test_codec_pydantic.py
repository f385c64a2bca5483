"""Pydantic v2 models round-trip exactly: built with model_construct, not re-validated."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Generic, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    computed_field,
    field_validator,
)

from conftest import registry_for
from resumable.serde import Codec, TypeRegistry

T = TypeVar("T")


class Item(BaseModel):
    name: str
    price: Decimal
    tags: tuple[str, ...] = ()


class Page(BaseModel, Generic[T]):
    items: list[T]
    cursor: str | None = None


class Animal(BaseModel):
    name: str


class Dog(Animal):
    good: bool = True


class Owner(BaseModel):
    pet: Animal
    since: datetime


class Doubler(BaseModel):
    n: int

    @field_validator("n")
    @classmethod
    def double(cls, value: int) -> int:
        return value * 2


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    first: str
    last: str

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented pattern
    @property
    def full(self) -> str:
        return f"{self.first} {self.last}"


class Aliased(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    type_: str = Field(alias="type")


class Scores(RootModel[dict[str, float]]):
    pass


def round_trip(value: object) -> Any:
    codec = Codec(registry_for(value))
    return codec.decode(codec.encode(value))


def test_a_model_round_trips_with_nested_values_keeping_their_types() -> None:
    value = Item(name="pen", price=Decimal("1.50"), tags=("office", "blue"))
    got = round_trip(value)
    assert type(got) is Item
    assert got == value
    assert type(got.tags) is tuple
    assert got.price.as_tuple() == Decimal("1.50").as_tuple()


def test_a_parametrized_generic_model_round_trips() -> None:
    value = Page[Item](items=[Item(name="a", price=Decimal(1))], cursor="next")
    got = round_trip(value)
    assert type(got) is Page[Item]
    assert type(got.items[0]) is Item
    assert got == value


def test_a_generic_model_tag_names_its_parameters() -> None:
    tag = TypeRegistry().tag_for(Page[Item])
    assert tag == f"{__name__}:Page[Item]"
    assert TypeRegistry().tag_for(Page[int]) != tag


def test_a_subclass_instance_in_a_field_keeps_its_subclass() -> None:
    # model_dump + model_validate would turn the Dog into an Animal.
    value = Owner(
        pet=Dog(name="Rex", good=False), since=datetime(2026, 1, 1, tzinfo=UTC)
    )
    got = round_trip(value)
    assert type(got.pet) is Dog
    assert got == value
    assert got.since.tzinfo is not None


def test_validators_do_not_run_again_on_decode() -> None:
    value = Doubler(n=2)
    assert value.n == 4
    assert round_trip(value).n == 4


def test_extra_fields_and_the_fields_set_survive() -> None:
    value = Loose.model_validate({"id": "x", "note": (1, 2), "~": "tilde key"})
    got = round_trip(value)
    assert got == value
    assert got.model_extra == {"note": (1, 2), "~": "tilde key"}
    assert got.model_fields_set == value.model_fields_set


def test_unset_fields_stay_unset_for_exclude_unset_dumps() -> None:
    value = Page[int](items=[1])
    got = round_trip(value)
    assert got.model_dump(exclude_unset=True) == {"items": [1]}
    assert got.model_fields_set == {"items"}


def test_frozen_models_with_computed_fields_round_trip() -> None:
    value = Strict(first="Ada", last="Lovelace")
    got = round_trip(value)
    assert got == value
    assert got.full == "Ada Lovelace"


def test_aliased_fields_round_trip() -> None:
    value = Aliased.model_validate({"type": "chat"})
    got = round_trip(value)
    assert got == value
    assert got.type_ == "chat"


def test_root_models_round_trip() -> None:
    value = Scores({"a": 1.5})
    got = round_trip(value)
    assert type(got) is Scores
    assert got == value


def test_models_inside_containers_round_trip() -> None:
    value = {"pages": [Page[Item](items=[]), (Dog(name="a"),)], 3: Animal(name="b")}
    got = round_trip(value)
    assert got == value
    assert type(got["pages"][1][0]) is Dog
    assert type(got["pages"][0]) is Page[Item]
