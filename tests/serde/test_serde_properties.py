"""Property tests: what round-trips, and what arbitrary bytes can raise."""

from __future__ import annotations

import contextlib
import math
from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from resumable.errors import CorruptCheckpointError, SerializationError
from resumable.serde import Envelope, KeyRing, Serde

PLACE = "run 'p' step #1"
MODEST = settings(max_examples=200, deadline=None)

# Text with lone surrogates and every other code point.
texts = st.text(st.characters(exclude_categories=()), max_size=40)
hashable = st.none() | st.booleans() | st.integers() | texts | st.binary(max_size=20)
floats = st.floats(allow_nan=True, allow_infinity=True)
aware = st.datetimes(
    timezones=st.builds(
        timezone, st.integers(-23 * 60, 23 * 60).map(lambda m: timedelta(minutes=m))
    )
)
leaves = (
    hashable
    | floats
    | st.datetimes()
    | aware
    | st.uuids()
    | st.decimals(allow_nan=False)
)
keys = hashable | st.tuples(hashable, hashable) | st.sampled_from(["~", "v", "~t"])


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return (
        st.lists(inner, max_size=5)
        | st.tuples(inner, inner)
        | st.dictionaries(texts | st.just("~"), inner, max_size=5)
        | st.dictionaries(keys, inner, max_size=5)
        | st.sets(hashable, max_size=5)
        | st.frozensets(st.tuples(hashable, hashable), max_size=5)
    )


values = st.recursive(leaves, _containers, max_leaves=30)


def same(got: object, want: object) -> bool:
    """Equal and of exactly the same types, all the way down; NaN equals NaN."""
    if type(got) is not type(want):
        return False
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    if isinstance(want, list | tuple):
        assert isinstance(got, list | tuple)
        return len(got) == len(want) and all(map(same, got, want))
    if isinstance(want, dict):
        assert isinstance(got, dict)
        return list(got) == list(want) and all(
            same(k1, k2) and same(got[k1], want[k2])
            for k1, k2 in zip(got, want, strict=True)
        )
    if isinstance(want, datetime):
        assert isinstance(got, datetime)
        return got == want and got.utcoffset() == want.utcoffset()
    return bool(got == want)


@MODEST
@given(values)
def test_arbitrary_values_round_trip_to_the_same_types(value: object) -> None:
    serde = Serde(compress_over=64)
    assert same(serde.loads(serde.dumps(value, place=PLACE), place=PLACE), value)


@MODEST
@given(values)
def test_arbitrary_values_round_trip_encrypted_and_compressed(value: object) -> None:
    serde = Serde(keys=KeyRing({"k": bytes(range(32))}, current="k"), compress_over=64)
    frame = serde.dumps(value, place=PLACE)
    assert same(serde.loads(frame, place=PLACE), value)
    with contextlib.suppress(CorruptCheckpointError):  # another place never opens it
        serde.loads(frame, place=PLACE + "-moved")
        raise AssertionError("an encrypted frame opened at another place")


@MODEST
@given(values)
def test_fingerprints_of_equal_values_match(value: object) -> None:
    serde = Serde()
    copy = serde.loads(serde.dumps(value, place=PLACE), place=PLACE)
    assert serde.fingerprint(value) == serde.fingerprint(copy)


@MODEST
@given(st.binary(max_size=200))
def test_arbitrary_bytes_only_raise_corrupt_checkpoint_error(data: bytes) -> None:
    for serde in (Serde(), Serde(keys=KeyRing({"k": bytes(32)}, current="k"))):
        with contextlib.suppress(CorruptCheckpointError):
            serde.loads(data, place=PLACE)


json_fragments = st.sampled_from(
    [
        '{"~":',
        '"tuple"',
        '"map"',
        '"bytes"',
        '"a:B"',
        '"v":',
        "[",
        "]",
        "{",
        "}",
        ",",
        "1",
        '"x"',
        "null",
        "NaN",
        '"\\ud800"',
        ":",
        '"~"',
    ]
)


@MODEST
@given(
    st.binary(max_size=200)
    | st.lists(json_fragments, max_size=30).map("".join).map(str.encode)
)
def test_arbitrary_bodies_in_valid_frames_raise_only_library_errors(
    body: bytes,
) -> None:
    frame = Envelope().seal(body, place=PLACE)
    with contextlib.suppress(CorruptCheckpointError, SerializationError):
        Serde().loads(frame, place=PLACE)
