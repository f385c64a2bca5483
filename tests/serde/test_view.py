"""The generic view: stored values as plain data, without the code that wrote them."""

from __future__ import annotations

import enum
import json
import sys
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any, NamedTuple
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from conftest import registry_for
from resumable.errors import CorruptCheckpointError
from resumable.serde import Envelope, KeyRing, Serde, TypeRegistry
from resumable.serde.view import ViewLimits, one_line, view_body

PLACE = "run 'r1', step #2 'ask'"
BUILT: list[str] = []


class Color(enum.Enum):
    RED = 1


@dataclass
class Invoice:
    number: int
    issued: datetime
    lines: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        BUILT.append("Invoice")


class Point(NamedTuple):
    x: int
    y: int


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str


def stored(value: object) -> bytes:
    """How the engine stores `value` (its types registered on the writing side)."""
    return Serde(registry_for(value)).dumps(value, place=PLACE)


def framed(body: bytes) -> bytes:
    """Any body in a frame whose checksum is right: what a store attacker can write."""
    return Envelope().seal(body, place=PLACE)


def view(data: bytes, serde: Serde | None = None) -> Any:
    return (serde or Serde(TypeRegistry())).view(data, place=PLACE)


def test_every_kind_the_codec_writes_reads_as_plain_data_with_its_type_name() -> None:
    value = {
        "tuple": (1, "a"),
        "set": {3},
        "frozenset": frozenset({"x"}),
        "map": {1: "one"},
        "bytes": bytes(range(40)),
        "bytearray": bytearray(b"ab"),
        "datetime": datetime(2026, 11, 25, 8, 30, tzinfo=UTC),
        "date": date(2026, 1, 2),
        "timedelta": timedelta(hours=1, microseconds=500_000),
        "uuid": UUID(int=7),
        "decimal": Decimal("1.10"),
        "enum": Color.RED,
        "dataclass": Invoice(7, datetime(2026, 1, 1), ["tea"]),
        "namedtuple": Point(1, 2),
        "model": Message(role="user", content="hi", mood="curious"),  # type: ignore[call-arg]  # an extra field
        "nan": float("nan"),
        "inf": float("-inf"),
        "$ref": "#/defs",
        "huge": 1 << 20_000,
    }
    shown = view(stored(value))
    mod = __name__
    assert shown == {
        "tuple": {"$type": "tuple", "$items": [1, "a"]},
        "set": {"$type": "set", "$items": [3]},
        "frozenset": {"$type": "frozenset", "$items": ["x"]},
        "map": {"$type": "map", "$items": [[1, "one"]]},
        "bytes": {"$type": "bytes", "$size": 40, "$head": bytes(range(16)).hex()},
        "bytearray": {"$type": "bytearray", "$size": 2, "$head": "6162"},
        "datetime": "2026-11-25T08:30:00+00:00",
        "date": "2026-01-02",
        "timedelta": {"$type": "timedelta", "$seconds": 3600.5},
        "uuid": str(UUID(int=7)),
        "decimal": "1.10",
        "enum": {"$type": f"{mod}:Color", "$value": 1},
        "dataclass": {
            "$type": f"{mod}:Invoice",
            "number": 7,
            "issued": "2026-01-01T00:00:00",
            "lines": ["tea"],
        },
        "namedtuple": {"$type": f"{mod}:Point", "x": 1, "y": 2},
        "model": {
            "$type": f"{mod}:Message",
            "role": "user",
            "content": "hi",
            "mood": "curious",
        },
        "nan": {"$type": "float", "$value": "NaN"},
        "inf": {"$type": "float", "$value": "-inf"},
        "$$ref": "#/defs",  # a stored "$" key gets one more: never taken for a tag
        "huge": {
            "$type": "int",
            "$hex": "1" + "0" * 63 + "...",
            "$bits": 20_004,
        },
    }
    # strict JSON: what an export writes and any JSON reader takes
    assert json.loads(json.dumps(shown, allow_nan=False)) == shown


def test_plain_text_and_json_values_are_themselves() -> None:
    assert view(stored("a summary\nwith \ud800 a lone surrogate")) == (
        "a summary\nwith \ud800 a lone surrogate"
    )
    plain = {"a": [1, 2.5, None, True], "b": {"c": "d"}}
    assert view(stored(plain)) == plain


def test_a_view_constructs_and_imports_nothing_even_for_registered_types() -> None:
    registry = TypeRegistry()
    registry.register(Invoice)
    data = stored(Invoice(1, datetime(2026, 1, 1)))
    BUILT.clear()
    assert view(data, Serde(registry))["$type"].endswith(":Invoice")
    assert BUILT == []  # __post_init__ never ran: no Invoice was built
    # a tag naming a module nobody imported is shown, and the module stays unloaded
    assert "antigravity" not in sys.modules
    shown = view(framed(b'{"~":"antigravity:fly","v":{"to":"the moon"}}'))
    assert shown == {"$type": "antigravity:fly", "to": "the moon"}
    assert "antigravity" not in sys.modules


def test_langchain_constructor_json_is_only_data() -> None:
    constructor = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain_core", "messages", "ai", "AIMessage"],
        "kwargs": {"content": "hello"},
    }
    assert view(stored(constructor)) == constructor
    tagged = b'{"~":"langchain_core.load.load:loads","v":{"text":"{\\"lc\\":1}"}}'
    assert view(framed(tagged)) == {
        "$type": "langchain_core.load.load:loads",
        "text": '{"lc":1}',
    }


def test_unknown_tags_render_as_data() -> None:
    assert view(framed(b'{"~":"frobnicate","v":[1,2]}')) == {
        "$type": "frobnicate",
        "$value": [1, 2],
    }
    assert view(framed(b'{"~":"os:system","v":"rm -rf /"}')) == {
        "$type": "os:system",
        "$value": "rm -rf /",
    }


@pytest.mark.parametrize(
    "body",
    [
        b'{"~":1,"v":2}',  # a tag that is not text
        b'{"~":"bytes","v":12}',
        b'{"~":"bytes","v":"abc"}',  # not base64
        b'{"~":"bytes","v":"!!!!"}',
        b'{"~":"tuple","v":{"a":1}}',
        b'{"~":"tuple","v":[],"extra":1}',
        b'{"~":"map","v":[[1,2,3]]}',
        b'{"~":"timedelta","v":[1,2]}',
        b'{"~":"timedelta","v":[1e308,0,0]}',
        b'{"~":"int","v":"xyz"}',
        b'{"~":"app:Thing","v":{},"evil":1}',
        b'{"~":"datetime","v":[2026]}',
        b"{not json",
        b"\xff\xfe",
        b"[" * 100_000 + b"]" * 100_000,  # past the interpreter's recursion limit
        b"1" * 5000,  # an int past Python's digit limit
        b"",
    ],
)
def test_malformed_bodies_are_typed_errors_naming_the_place(body: bytes) -> None:
    with pytest.raises(CorruptCheckpointError) as caught:
        view(framed(body))
    assert caught.value.place == PLACE


def test_a_bit_flip_or_truncation_is_a_typed_error() -> None:
    data = bytearray(stored({"answer": "x" * 100}))
    data[20] ^= 1
    with pytest.raises(CorruptCheckpointError, match="checksum"):
        view(bytes(data))
    with pytest.raises(CorruptCheckpointError):
        view(bytes(data[:3]))


def test_deep_values_are_cut_at_the_depth_limit_not_refused() -> None:
    deep: Any = "bottom"
    for _ in range(150):
        deep = [deep]
    shown = view(stored(deep))
    for _ in range(100):
        shown = shown[0]
    assert shown == {"$truncated": "nested deeper than 100 levels"}
    limits = ViewLimits(max_depth=3)
    assert view_body(b'{"a":{"b":{"c":{"d":1}}}}', place=PLACE, limits=limits) == {
        "a": {"b": {"c": {"$truncated": "nested deeper than 3 levels"}}}
    }


def test_a_value_over_the_payload_limit_is_refused_before_it_is_parsed() -> None:
    data = stored(["x" * 1000] * 2000)  # 2 MB
    with pytest.raises(CorruptCheckpointError, match="1,048,576-byte payload limit"):
        view(data, Serde(max_bytes=1 << 20))
    assert len(view(data, Serde(max_bytes=4 << 20))) == 2000


def test_a_zstd_bomb_is_a_typed_error() -> None:
    pytest.importorskip("zstandard")
    # 32 MB of one character compresses to a few KB, with a valid checksum
    body = b'"' + b"a" * (32 << 20) + b'"'
    bomb = Envelope(compress_over=0).seal(body, place=PLACE)
    assert len(bomb) < 64 << 10
    with pytest.raises(CorruptCheckpointError, match="1,048,576-byte payload limit"):
        view(bomb, Serde(max_bytes=1 << 20))


def test_encrypted_values_need_their_key_and_their_place() -> None:
    keys = KeyRing({"k1": bytes(32)}, current="k1")
    data = Serde(registry_for(Color.RED), keys=keys).dumps(Color.RED, place=PLACE)
    assert Serde(keys=keys).view(data, place=PLACE) == {
        "$type": f"{__name__}:Color",
        "$value": 1,
    }
    with pytest.raises(CorruptCheckpointError, match="no key"):
        Serde().view(data, place=PLACE)
    with pytest.raises(CorruptCheckpointError, match="decryption failed"):
        Serde(keys=keys).view(data, place="run 'r1', step #3 'ask'")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_body_in_a_valid_frame_is_data_or_a_typed_error(body: bytes) -> None:
    try:
        shown = view(framed(body))
    except CorruptCheckpointError:  # any other error fails the test
        return
    json.dumps(shown, allow_nan=False)  # whatever renders is strict JSON


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["~", "v", "x", "s", "a", "$t"]), inner, max_size=4
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_any_json_with_tag_keys_is_data_or_a_typed_error(tree: Any) -> None:
    body = json.dumps(tree).encode()
    try:
        shown = view(framed(body))
    except CorruptCheckpointError:
        return
    json.dumps(shown, allow_nan=False)


def test_one_line_reads_like_calls_and_stops_at_its_width() -> None:
    shown = view(stored({"m": Message(role="user", content="hi"), "t": (1, 2)}))
    assert one_line(shown, 200) == (
        '{"m": Message(role="user", content="hi"), "t": tuple(1, 2)}'
    )
    assert one_line(view(stored(Color.RED)), 40) == "Color(1)"
    clipped = one_line(shown, 20)
    assert len(clipped) == 20
    assert clipped.endswith("…")
    # the walk stops at the width: what lies beyond is never read (this object
    # would make json.dumps raise if it were)
    assert len(one_line(["word " * 1000, object()], 60)) == 60
    assert len(one_line([["a"] * 30, object()], 60)) == 60
