"""What a decode may cost: values per body, and items of a set or map sharing a hash."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resumable.errors import CorruptCheckpointError, SerializationError
from resumable.serde import Codec, Envelope, Serde, TypeRegistry
from resumable.serde.bounds import (
    MAX_SHARED_HASHES,
    max_values,
    shared_hashes,
    text_values,
    tree_values,
)

PLACE = "run 'r1' step #2"
MODULUS = sys.hash_info.modulus
# ints that all hash to 7: each insertion into a set probes every earlier one
COLLIDING = [7 + k * MODULUS for k in range(5000)]


def framed(body: bytes) -> bytes:
    """Any body in a frame whose checksum is right: what a store attacker can write."""
    return Envelope().seal(body, place=PLACE)


def crafted(tag: str) -> bytes:
    items: list[Any] = COLLIDING
    if tag == "map":
        items = [[k, 0] for k in COLLIDING]
    return framed(json.dumps({"~": tag, "v": items}).encode())


@pytest.mark.parametrize("tag", ["set", "frozenset", "map"])
def test_a_stored_set_or_map_whose_items_share_one_hash_is_refused_as_corrupt(
    tag: str,
) -> None:
    with pytest.raises(CorruptCheckpointError, match="hash like another one") as info:
        Serde().loads(crafted(tag), place=PLACE)
    assert PLACE in str(info.value)


@pytest.mark.parametrize("kind", [set, frozenset, dict.fromkeys])
def test_a_value_whose_set_items_or_keys_share_one_hash_is_refused_when_written(
    kind: Any,
) -> None:
    with pytest.raises(SerializationError, match="store them as a list"):
        Serde().dumps({"ids": kind(COLLIDING[:100])}, place=PLACE)


def test_a_few_items_sharing_a_hash_still_round_trip() -> None:
    value = {"few": set(COLLIDING[: MAX_SHARED_HASHES + 1]), "pair": {-1, -2}}
    serde = Serde()
    assert serde.loads(serde.dumps(value, place=PLACE), place=PLACE) == value


def test_large_sets_and_maps_of_strings_ints_and_tuples_round_trip() -> None:
    value = {
        "words": {f"word-{i}" for i in range(20_000)},
        "ids": frozenset(range(-10_000, 10_000)),
        "big": {2**60 + i for i in range(1000)},
        "pairs": {(i, str(i)) for i in range(5000)},
        "floats": {i / 7 for i in range(5000)},
        "by_id": {i: str(i) for i in range(5000)},
    }
    serde = Serde(max_bytes=64 * 1024 * 1024)
    assert serde.loads(serde.dumps(value, place=PLACE), place=PLACE) == value


def test_shared_hashes_counts_items_hashing_like_an_earlier_one() -> None:
    assert shared_hashes(["a", "b", b"c"]) == 0
    assert shared_hashes(list(range(1000))) == 0
    assert shared_hashes(COLLIDING[:10]) == 9
    assert shared_hashes([1.0, 1, (1,), (1,)]) == 2


def empty_dicts(body_bytes: int) -> bytes:
    count = body_bytes // 3
    return b"[" + b"{}," * (count - 1) + b"{}]"


@pytest.mark.parametrize("read", ["loads", "view"])
def test_a_small_frame_of_many_empty_dicts_is_refused_before_it_is_built(
    read: str,
) -> None:
    serde = Serde(max_bytes=1024 * 1024)
    frame = framed(empty_dicts(900 * 1024))  # under the byte limit
    with pytest.raises(CorruptCheckpointError, match="values") as info:
        getattr(serde, read)(frame, place=PLACE)
    assert "Engine(max_payload_bytes=...)" in str(info.value)


@pytest.mark.parametrize(
    "value",
    [[{}] * 10_000, {"rows": [[i] for i in range(9000)]}, list(range(20_000))],
)
def test_a_value_holding_more_values_than_the_limit_is_refused_when_written(
    value: Any,
) -> None:
    serde = Serde(max_bytes=256 * 1024)
    assert tree_values(value) > max_values(256 * 1024)
    with pytest.raises(SerializationError, match="values"):
        serde.dumps(value, place=PLACE)
    with pytest.raises(SerializationError, match="values"):
        serde.dumps_stream(value, place=PLACE)


def test_commas_and_brackets_inside_strings_do_not_count_as_values() -> None:
    serde = Serde(max_bytes=1024 * 1024)
    value = {"csv": 'a,b,[c],{d}\\",e' * 40_000, "rows": list(range(1000))}
    assert serde.loads(serde.dumps(value, place=PLACE), place=PLACE) == value
    assert serde.view(serde.dumps(value, place=PLACE), place=PLACE) == value


def test_the_largest_accepted_value_of_empty_dicts_round_trips() -> None:
    serde = Serde(max_bytes=1024 * 1024)
    value: list[dict[str, int]] = [{}] * (
        max_values(1024 * 1024) // 2
    )  # each dict and its list slot
    assert serde.loads(serde.dumps(value, place=PLACE), place=PLACE) == value


json_text = st.text(alphabet=st.sampled_from('ab,[]{}"\\:\n\x00é'), max_size=8)
json_trees = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | json_text,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(json_text.filter(lambda k: k != "~"), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=100, deadline=None)
@given(json_trees)
def test_values_counted_on_the_tree_and_on_its_text_agree(tree: Any) -> None:
    text = Codec(TypeRegistry()).encode(tree)
    if isinstance(tree, list | dict):
        assert tree_values(tree) == text_values(text)
