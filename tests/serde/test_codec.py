"""The tagged-JSON codec: every supported type comes back as the same type."""

from __future__ import annotations

import enum
import json
import math
import socket
import sys
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any, NamedTuple
from uuid import UUID
from zoneinfo import ZoneInfo

import pytest

from conftest import registry_for
from resumable.errors import ResumableError, SerializationError
from resumable.serde import Codec, DecodeError, Serde, TypeRegistry


def assert_same(got: object, want: object) -> None:
    """Equal values of exactly the same types, all the way down (NaN equals NaN)."""
    assert type(got) is type(want), f"{type(got)!r} is not {type(want)!r}"
    if isinstance(want, float) and math.isnan(want):
        assert isinstance(got, float)
        assert math.isnan(got)
    elif isinstance(want, list | tuple):
        assert isinstance(got, list | tuple)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert_same(g, w)
    elif isinstance(want, dict):
        assert isinstance(got, dict)
        assert list(got) == list(want)
        for key in want:
            assert_same(next(k for k in got if k == key), key)
            assert_same(got[key], want[key])
    else:
        assert got == want


def round_trip(value: object, codec: Codec | None = None) -> Any:
    codec = codec or Codec(registry_for(value))
    return codec.decode(codec.encode(value))


# ---------------------------------------------------------------- built-in types


def stable_id(value: object) -> str:
    """A test id that is the same in every process (a set's order follows its hashes,
    which differ between processes: pytest-xdist's workers must agree on the ids)."""
    if isinstance(value, set | frozenset):
        return f"{type(value).__name__}({sorted(value, key=repr)!r})"
    return repr(value)


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -1,
        2**63,
        2**64 + 1,
        -(2**100),
        1.5,
        -0.0,
        math.inf,
        -math.inf,
        math.nan,
        "",
        "plain text",
        "non-ascii: Größe, 日本語, 😀",
        b"",
        b"\x00\xff binary",
        bytearray(b"mutable"),
        [],
        [1, "two", 3.0, None],
        (),
        (1, (2, (3,))),
        set(),
        {1, 2, 3},
        frozenset({"a", "b"}),
        {},
        {"a": 1, "b": [1, 2]},
    ],
    ids=stable_id,
)
def test_builtin_values_round_trip_to_the_same_types(value: object) -> None:
    assert_same(round_trip(value), value)


def test_a_huge_int_round_trips_past_the_int_string_limit() -> None:
    value = 7**20_000  # about 17,000 digits, over sys.get_int_max_str_digits()
    assert_same(round_trip({"n": value, "small": 3}), {"n": value, "small": 3})


def test_lone_surrogates_round_trip() -> None:
    for value in ["\ud800", "a\udfffb", "\udc80\ud83d", "ok \ud83d\ude00 \ud800 end"]:
        assert_same(round_trip(value), value)
        assert_same(
            round_trip({"text": value, "list": [value]}),
            {"text": value, "list": [value]},
        )


def test_tuples_stay_tuples_and_lists_stay_lists_when_nested() -> None:
    value = {"pairs": [(1, 2), (3, 4)], "nested": ([1, (2,)], {"t": ()})}
    assert_same(round_trip(value), value)


def test_dicts_with_non_str_keys_keep_their_key_types() -> None:
    value = {1: "one", (1, 2): "pair", None: "none", 2.5: "float", frozenset({1}): "fs"}
    got = round_trip(value)
    assert_same(got, value)
    assert [type(k) for k in got] == [int, tuple, type(None), float, frozenset]


def test_a_dict_with_int_keys_inside_a_list_keeps_int_keys() -> None:
    value = [{1: "a", 2: "b"}, {"x": {10: [1]}}]
    assert_same(round_trip(value), value)


def test_a_plain_dict_that_contains_the_tag_key_round_trips() -> None:
    values = [
        {"~": "tuple", "v": [1, 2]},
        {"~": "os:system", "v": "echo hi"},
        {"~": 1},
        {"outer": {"~": "bytes", "v": "AAAA"}},
    ]
    for value in values:
        assert_same(round_trip(value), value)


@pytest.mark.parametrize(
    "value",
    [
        {"depth": 3, "ops": [["append", ["values", "messages"], [{"c": "ab12"}]]]},
        [{"d": {"é": {"j": "1.5"}, "": {"l": []}}}, None, True, 2**70, -0.5],
        {"text": '{"~":"datetime","v":"2026"}', 'key "~":': ['"~":']},
        {"outer": {"~": "tuple", "v": [1, 2]}},  # the tag as a key: escaped
        [{"~": 1}],
    ],
    ids=["manifest", "json types", "the tag in text", "the tag as a key", "in a list"],
)
def test_encode_json_writes_what_encode_writes_for_json_types(value: Any) -> None:
    codec = Codec(TypeRegistry())
    assert codec.encode_json(value) == codec.encode(value)
    assert_same(codec.decode(codec.encode_json(value)), value)


def test_naive_and_aware_datetimes_keep_their_offsets() -> None:
    values = [
        datetime(2026, 11, 22, 9, 30, 15, 123456),
        datetime(2026, 11, 22, 9, 30, tzinfo=UTC),
        datetime(2026, 11, 22, 9, 30, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=-8))),
    ]
    for value in values:
        got = round_trip(value)
        assert_same(got, value)
        assert got.utcoffset() == value.utcoffset()


def test_a_zoneinfo_datetime_comes_back_with_a_fixed_offset() -> None:
    # Documented degradation: the instant and offset survive, the zone name does not.
    value = datetime(2026, 7, 1, 12, 0, tzinfo=ZoneInfo("Europe/Paris"))
    got = round_trip(value)
    assert got == value
    assert got.utcoffset() == timedelta(hours=2)
    assert isinstance(got.tzinfo, timezone)


@pytest.mark.parametrize(
    "value",
    [
        date(2026, 11, 22),
        time(23, 59, 59, 999999),
        time(8, 0, tzinfo=timezone(timedelta(hours=-3))),
        timedelta(days=-3, seconds=5, microseconds=7),
        timedelta(0),
        UUID("12345678-1234-5678-1234-567812345678"),
    ],
    ids=repr,
)
def test_dates_times_durations_and_uuids_round_trip(value: object) -> None:
    assert_same(round_trip(value), value)


@pytest.mark.parametrize("text", ["1.10", "1E+2", "-0", "0.000", "123456789.123456789"])
def test_decimals_keep_their_exponent(text: str) -> None:
    value = Decimal(text)
    got = round_trip(value)
    assert_same(got, value)
    assert got.as_tuple() == value.as_tuple()


def test_special_decimals_round_trip() -> None:
    for text in ["NaN", "sNaN", "Infinity", "-Infinity"]:
        got = round_trip(Decimal(text))
        assert type(got) is Decimal
        assert got.as_tuple() == Decimal(text).as_tuple()


def test_a_top_level_str_is_stored_as_its_text_after_one_marker_byte() -> None:
    codec = Codec(TypeRegistry())
    assert codec.encode("hi") == b"\x01hi"
    assert codec.encode('é\n"') == '\x01é\n"'.encode()
    for text in ("", "\x01", "\x01\x01x", '"quoted"', "a\ud800b", "\x00é"):
        assert codec.decode(codec.encode(text)) == text
    # text inside anything else is JSON, as before
    assert json.loads(codec.encode({"a": [1, "b"]})) == {"a": [1, "b"]}
    assert json.loads(codec.encode(["hi"])) == ["hi"]


def test_a_str_stored_as_json_by_earlier_releases_still_decodes() -> None:
    codec = Codec(TypeRegistry())
    assert codec.decode(b'"hi"') == "hi"
    assert codec.decode('"é\\ud800"'.encode()) == "é\ud800"


def test_marked_text_that_is_not_utf8_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="not a valid payload"):
        Codec(TypeRegistry()).decode(b"\x01\xff\xfe")


# ---------------------------------------------------------------- registered types


class Color(enum.Enum):
    RED = "red"
    GREEN = (0, 255, 0)


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mode(enum.StrEnum):
    FAST = "fast"


class Perm(enum.Flag):
    R = 4
    W = 2


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int = 0


@dataclass
class Message:
    role: str
    content: str
    usage: Usage | None = None
    tags: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True)
class Derived:
    text: str
    length: int = field(init=False)
    cache: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.length = len(self.text)


class Point(NamedTuple):
    x: int
    y: int = 0


@pytest.mark.parametrize(
    "value",
    [Color.RED, Color.GREEN, Level.HIGH, Mode.FAST, Perm.R | Perm.W, Perm(0)],
    ids=repr,
)
def test_enum_members_round_trip(value: enum.Enum) -> None:
    assert round_trip(value) is value


def test_frozen_slotted_and_nested_dataclasses_round_trip() -> None:
    value = Message(
        "assistant",
        "hello",
        Usage(10, 5),
        tags=["a"],
        meta={"when": date(2026, 1, 1), "ids": (1, 2)},
    )
    got = round_trip(value)
    assert_same(got, value)
    assert_same(got.usage, Usage(10, 5))
    assert_same(got.meta["ids"], (1, 2))


def test_default_factory_fields_are_independent_after_decoding() -> None:
    got = round_trip([Message("user", "a"), Message("user", "b")])
    got[0].tags.append("x")
    assert got[1].tags == []


def test_init_false_fields_round_trip() -> None:
    value = Derived(text="hello", cache={"k": 1})
    value.length = 99  # changed after construction: the stored value wins
    got = round_trip(value)
    assert_same(got, value)
    assert got.length == 99


def test_a_nested_dataclass_in_a_list_in_a_dict_round_trips() -> None:
    value = {"history": [Message("user", "hi", Usage(1)), Point(1, 2)], "n": Level.LOW}
    assert_same(round_trip(value), value)


def test_named_tuples_round_trip_as_named_tuples() -> None:
    value = [Point(1, 2), Point(3)]
    got = round_trip(value)
    assert_same(got, value)
    assert type(got[0]) is Point


def test_a_dataclass_whose_field_was_added_later_gets_its_default() -> None:
    codec = Codec(registry_for(Usage(7)))
    stored = codec.encode(Usage(7))
    data = json.loads(stored)
    del data["v"]["completion_tokens"]
    data["v"]["removed_field"] = 1  # a field the class no longer has is dropped
    assert_same(codec.decode(json.dumps(data).encode()), Usage(7, 0))


# ---------------------------------------------------------------- errors when encoding


class OpenAI:
    """Stands in for an SDK client: something with no business in a checkpoint."""


def test_an_unserializable_value_names_its_path_and_type() -> None:
    codec = Codec(TypeRegistry())
    with pytest.raises(SerializationError) as caught:
        codec.encode({"answer": "x", "client": OpenAI()})
    assert caught.value.path == 'result["client"]'
    assert caught.value.detail == "OpenAI is not serializable"
    assert 'result["client"]: OpenAI is not serializable' in str(caught.value)


def test_the_path_goes_through_lists_fields_and_tuples() -> None:
    codec = Codec(registry_for(Message("user", "x")))
    value = [1, 2, Message("user", "x", meta={"deep": (0, OpenAI())})]
    with pytest.raises(SerializationError) as caught:
        codec.encode(value)
    assert caught.value.path == 'result[2].meta["deep"][1]'


def test_the_root_name_of_the_path_can_be_chosen() -> None:
    with pytest.raises(SerializationError) as caught:
        Codec(TypeRegistry()).encode([OpenAI()], root="args")
    assert caught.value.path == "args[0]"


def _generator() -> Iterator[int]:
    yield 1


@pytest.mark.parametrize(
    ("make", "type_name"),
    [
        (_generator, "generator"),
        (lambda: _generator, "function"),
        (lambda: OrderedDict(a=1), "OrderedDict"),
        (object, "object"),
        (lambda: 1j, "complex"),
    ],
)
def test_values_that_are_not_data_raise_serialization_error(
    make: Any, type_name: str
) -> None:
    with pytest.raises(SerializationError) as caught:
        Codec(TypeRegistry()).encode({"v": make()})
    assert caught.value.path == 'result["v"]'
    assert caught.value.detail.startswith(type_name)


def test_a_socket_cannot_be_encoded() -> None:
    with socket.socket() as sock, pytest.raises(SerializationError) as caught:
        Codec(TypeRegistry()).encode({"conn": sock})
    assert "socket" in caught.value.detail


def test_an_unencodable_dict_key_is_reported() -> None:
    with pytest.raises(SerializationError) as caught:
        Codec(TypeRegistry()).encode({OpenAI(): 1})
    assert "OpenAI" in caught.value.detail


def test_a_reference_cycle_raises_serialization_error() -> None:
    value: list[object] = []
    value.append(value)
    with pytest.raises(SerializationError) as caught:
        Codec(TypeRegistry()).encode(value)
    assert "cycle" in caught.value.detail


# ---------------------------------------------------------------- decoding safety


def test_encoding_registers_nothing_and_refuses_what_could_not_be_decoded() -> None:
    registry = TypeRegistry()
    with pytest.raises(SerializationError) as caught:
        Codec(registry).encode({"m": [Message("user", "x", Usage(1))]})
    assert caught.value.path == 'result["m"][0]'
    assert f"{__name__}:Message" in caught.value.detail
    assert "resumable.register(Message)" in caught.value.detail
    assert registry.lookup(registry.tag_for(Message)) is None
    assert registry.lookup(registry.tag_for(Usage)) is None


def test_a_field_of_a_type_not_registered_is_refused_with_its_path() -> None:
    registry = TypeRegistry()
    registry.register(Message)  # `meta` is annotated Any: Point is not named
    with pytest.raises(SerializationError) as caught:
        Codec(registry).encode(Message("user", "x", meta={"at": Point(1, 2)}))
    assert caught.value.path == 'result.meta["at"]'
    assert registry.lookup(registry.tag_for(Point)) is None


def test_decoding_an_unregistered_type_names_it_and_how_to_register() -> None:
    data = Codec(registry_for(Message("user", "x"))).encode({"m": Message("user", "x")})
    with pytest.raises(SerializationError) as caught:
        Codec(TypeRegistry()).decode(data)
    tag = f"{__name__}:Message"
    assert tag in caught.value.detail
    assert "resumable.register" in str(caught.value)


def test_a_tag_never_imports_or_calls_what_it_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    calls: list[object] = []
    monkeypatch.setattr(os, "system", lambda *args: calls.append(args))
    monkeypatch.delitem(sys.modules, "antigravity", raising=False)
    codec = Codec(TypeRegistry())
    for tag in ["os:system", "antigravity:fly", "builtins:eval", "subprocess:Popen"]:
        data = json.dumps({"~": tag, "v": {"args": "echo pwned"}}).encode()
        with pytest.raises(SerializationError) as caught:
            codec.decode(data)
        assert tag in caught.value.detail
    assert calls == []
    assert "antigravity" not in sys.modules


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"{",
        b"\xff\xfe",
        b'{"~": 1, "v": 2}',
        b'{"~": "no-such-kind", "v": 2}',
        b'{"~": "tuple"}',
        b'{"~": "tuple", "v": "abc"}',
        b'{"~": "bytes", "v": "not base64!"}',
        b'{"~": "datetime", "v": "yesterday"}',
        b'{"~": "decimal", "v": "one"}',
        b'{"~": "timedelta", "v": [1, 2]}',
        b'{"~": "map", "v": [[[1], 2]]}',
        b'{"~": "map", "v": ["ab"]}',
        b'{"~": "set", "v": [[1]]}',
        b'"a" "b"',
        b"[" * 100_000,
    ],
    ids=repr,
)
def test_malformed_data_raises_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError):
        Codec(TypeRegistry()).decode(data)


def test_whitespace_around_a_payload_is_accepted_as_json_accepts_it() -> None:
    # encode never writes it; the decoder's fast path hands such text to json
    codec = Codec(TypeRegistry())
    assert codec.decode(b' \n{"a": [1, {"~": "tuple", "v": [2]}]}\t ') == {
        "a": [1, (2,)]
    }
    with pytest.raises(DecodeError):
        codec.decode(b' "a" "b"')


def test_decode_error_is_a_value_error_and_not_a_resumable_error() -> None:
    assert issubclass(DecodeError, ValueError)
    assert not issubclass(DecodeError, ResumableError)


def test_a_registered_type_that_cannot_be_rebuilt_raises_serialization_error() -> None:
    registry = TypeRegistry()
    registry.register(Color)
    data = json.dumps({"~": registry.tag_for(Color), "v": "purple"}).encode()
    with pytest.raises(SerializationError) as caught:
        Codec(registry).decode(data)
    assert "Color" in caught.value.detail


def test_flat_argument_tuples_fingerprint_by_type_and_value() -> None:
    serde = Serde()
    calls = [
        (1,),
        ("1",),
        (1.0,),
        (True,),
        (None,),
        (1, 2),
        (12,),
        ("a", "b"),
        ("ab",),
        ((1,),),
    ]
    assert len({serde.fingerprint(call) for call in calls}) == len(calls)
    assert serde.fingerprint(("x", 2.5, None)) == serde.fingerprint(("x", 2.5, None))
    assert serde.fingerprint(("\ud800",)) != serde.fingerprint(("\udfff",))
