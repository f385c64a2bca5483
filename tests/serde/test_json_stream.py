"""A dict's or list's JSON written a piece at a time is the bytes written whole."""

from __future__ import annotations

import datetime
import decimal
import json
import os
import uuid
from typing import Any

import pytest

from resumable.serde import json_stream as js
from resumable.serde.codec import Codec, TypeRegistry
from resumable.serde.streams import STREAM_OVER, Encoded


def _nested(depth: int) -> Any:
    node: Any = "long text past the depth"
    for _ in range(depth):
        node = [node]
    return node


LONG = "long text é😀 " * 4  # past the LONG the tests below set
CORPUS: list[Any] = [
    {"text": LONG, "n": 1},
    [LONG, LONG + "\n", {"deep": [{"deeper": LONG}]}],
    {"lone": LONG + "\udc80\ud83d", "pair": "\ud83d\ude00"},
    {"del": LONG + "\x7f", "nbsp": LONG + "\xa0\u2029"},  # json leaves them be
    {"quote": LONG + '"\\', "ctl": LONG + "\x00\x1f\x7f", "sep": LONG + "\u2028"},
    {"~": "not a tag", "text": LONG},  # stored as a map
    {"when": datetime.datetime(2026, 1, 2, 3, 4, 5), "blob": os.urandom(64) * 2},
    {"id": uuid.UUID(int=7), "d": decimal.Decimal("1.10"), "t": (LONG, 1)},
    {"huge": 10**5000, "text": LONG},  # past the digit limit: written as hex
    {"nan": float("nan"), "inf": float("-inf"), "f": 0.1, "b": [True, False, None]},
    {"empty": {}, "none": [], "nested": {"a": {}, "b": [[]]}, "x": LONG},
    {"many": list(range(js.FANOUT + 1)), "text": LONG},
    {f"k{i}": LONG for i in range(js.FANOUT + 1)},  # too many items: written whole
    {"k": _nested(js.DEPTH + 2)},  # past DEPTH
    (LONG, {"tuple": (1, 2)}),
    {"": LONG, "é😀\udc80": LONG, 'q"k': LONG},
    {1: LONG, "a": 2},  # a non-str key: a map
    {"set": {1, 2}, "frozen": frozenset({"a"}), "text": LONG},
]
MANY_ITEMS: list[Any] = [
    # containers of many items (past the MANY the tests below set), a slice at a time
    list(range(81)),
    [{"id": i, "t": f'é😀\n"{i}', "f": i / 3, "n": None} for i in range(500)],
    {f'k{i}\u2028"é': [i, str(i)] for i in range(300)},
    tuple(f"s{i}" for i in range(200)),
    {i: i for i in range(100)},  # non-str keys: a map, then its items
    {1: "a", "1": "b", **{f"x{i}": i for i in range(100)}},
    {"rows": [[i, "x" * (i % 50)] for i in range(400)], "meta": {"n": 400}},
    [list(range(90)) for _ in range(90)],  # many of many
    [LONG] * 100,  # long strings inside a container of many items
    [{"huge": 10**5000}, *range(100)],  # past the digit limit: as hex
    {"set": set(range(100)), "bytes": [os.urandom(30) for _ in range(90)]},
    [datetime.date(2026, 1, i % 28 + 1) for i in range(90)],
    {"some": list(range(70)), "text": LONG},  # more than FANOUT, not MANY: whole
]
CORPUS += MANY_ITEMS


# the codec's JSON options; `tree_of` checks they write the codec's text again
DUMPS = json.JSONEncoder(
    ensure_ascii=False, check_circular=False, separators=(",", ":")
).encode


def tree_of(codec: Codec, value: object) -> Any:
    """The JSON tree the codec writes for `value`, read back from its text."""
    text = codec.encode(value).decode("utf-8", "surrogatepass")
    tree = json.loads(text)
    assert DUMPS(tree) == text
    return tree


@pytest.fixture
def short_long(monkeypatch: pytest.MonkeyPatch) -> None:
    """Strings past a few characters count as long, and containers past 80 items as
    many, so small values stream; a slice of items aims at a few hundred characters."""
    monkeypatch.setattr(js, "LONG", 8)
    monkeypatch.setattr(js, "MANY", 80)
    monkeypatch.setattr(js, "SLICE_TEXT", 300)


@pytest.mark.usefixtures("short_long")
@pytest.mark.parametrize("value", CORPUS, ids=range(len(CORPUS)))
def test_json_stream_joins_to_the_text_written_whole(value: object) -> None:
    codec = Codec(TypeRegistry())
    whole = codec.encode(value)
    encoded = js.json_stream(tree_of(codec, value), DUMPS)
    if encoded is not None:
        assert b"".join(encoded.pieces()) == whole
        assert encoded.size == len(whole)
        assert b"".join(encoded.pieces()) == whole  # again: a new iterator
    assert codec.decode(whole) == codec.decode(b"".join(_pieces(codec, value)))


@pytest.mark.usefixtures("short_long")
@pytest.mark.parametrize("value", MANY_ITEMS, ids=range(len(MANY_ITEMS)))
def test_containers_of_many_items_are_written_in_slices(value: object) -> None:
    codec = Codec(TypeRegistry())
    encoded = js.json_stream(tree_of(codec, value), DUMPS)
    assert encoded is not None
    assert len(list(encoded.pieces())) > 2


def _pieces(codec: Codec, value: object) -> list[bytes]:
    encoded = codec.encode_stream(value)
    return [encoded] if isinstance(encoded, bytes) else list(encoded.pieces())


def test_values_with_long_text_stream_and_others_are_written_whole() -> None:
    codec = Codec(TypeRegistry())
    text = os.urandom(STREAM_OVER).hex()
    streamed = codec.encode_stream({"text": text, "n": [1, 2]})
    assert isinstance(streamed, Encoded)
    # the text is handed over as it is, never copied into a piece of its own
    assert b"".join(streamed.pieces()) == codec.encode({"text": text, "n": [1, 2]})
    assert js.json_stream(tree_of(codec, {"a": "short"}), DUMPS) is None
    few = {f"k{i}": "x" * 100 for i in range(js.MANY)}
    assert js.json_stream(tree_of(codec, few), DUMPS) is None


@pytest.mark.parametrize("kind", [dict, list])
def test_a_container_of_many_items_streams_a_slice_at_a_time(kind: type) -> None:
    codec = Codec(TypeRegistry())
    items = {f"k{i}": {"n": i, "t": "x" * 100} for i in range(2 * STREAM_OVER // 100)}
    value = items if kind is dict else list(items.values())
    encoded = codec.encode_stream(value)
    assert isinstance(encoded, Encoded)
    pieces = list(encoded.pieces())
    whole = codec.encode(value)
    assert b"".join(pieces) == whole
    assert encoded.size == len(whole)
    # never one piece of the whole text: slices of about SLICE_TEXT
    assert max(len(p) for p in pieces) < 2 * js.SLICE_TEXT
    assert len(pieces) > len(whole) // (2 * js.SLICE_TEXT)


def test_a_short_container_of_many_items_is_written_whole() -> None:
    codec = Codec(TypeRegistry())
    value = list(range(1000))
    assert codec.encode_stream(value) == codec.encode(value)


@pytest.mark.parametrize("escaped", [False, True])
def test_a_long_string_streams_whether_or_not_json_escapes_it(escaped: bool) -> None:
    codec = Codec(TypeRegistry())
    text = os.urandom(STREAM_OVER).hex() + ('"\n' if escaped else "é")
    value = {"text": text, "more": [text]}
    encoded = codec.encode_stream(value)
    assert isinstance(encoded, Encoded)
    assert b"".join(encoded.pieces()) == codec.encode(value)
    assert encoded.size == len(codec.encode(value))
