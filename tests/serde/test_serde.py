"""Serde: codec and envelope together, as the engine uses them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from resumable.errors import CorruptCheckpointError, SerializationError
from resumable.serde import (
    Codec,
    DecodeError,
    Envelope,
    KeyRing,
    Serde,
    TypeRegistry,
)

PLACE = "run 'r1' step #2"


@dataclass(frozen=True)
class Answer:
    text: str
    at: datetime


def test_the_package_exports_its_public_names() -> None:
    import resumable.serde

    assert sorted(resumable.serde.__all__) == sorted(
        ["Codec", "DecodeError", "Envelope", "KeyRing", "Serde", "TypeRegistry"]
    )


def test_dumps_and_loads_round_trip() -> None:
    registry = TypeRegistry()
    registry.register(Answer)
    serde = Serde(registry)
    value = {"answer": Answer("42", datetime(2026, 1, 1, tzinfo=UTC)), "n": (1, 2)}
    assert serde.loads(serde.dumps(value, place=PLACE), place=PLACE) == value


def test_encrypted_and_compressed_round_trip() -> None:
    serde = Serde(keys=KeyRing({"k": bytes(32)}, current="k"), compress_over=16)
    value = ["a long string " * 50, b"bytes"]
    frame = serde.dumps(value, place=PLACE)
    assert serde.loads(frame, place=PLACE) == value
    with pytest.raises(CorruptCheckpointError):
        serde.loads(frame, place="run 'r1' step #3")


def test_a_shared_registry_lets_another_serde_rebuild_types() -> None:
    registry = TypeRegistry()
    registry.register(Answer)
    frame = Serde(registry).dumps(Answer("x", datetime(2026, 1, 1)), place=PLACE)
    assert Serde(registry).loads(frame, place=PLACE) == Answer(
        "x", datetime(2026, 1, 1)
    )
    with pytest.raises(SerializationError, match=r"resumable\.register"):
        Serde().loads(frame, place=PLACE)


def test_a_valid_frame_around_a_malformed_body_is_corrupt() -> None:
    frame = Envelope().seal(b'{"~": "tuple", "v": 1}', place=PLACE)
    with pytest.raises(CorruptCheckpointError) as caught:
        Serde().loads(frame, place=PLACE)
    assert caught.value.place == PLACE
    assert isinstance(caught.value.__cause__, DecodeError)


def test_serialization_errors_propagate_from_dumps() -> None:
    with pytest.raises(SerializationError) as caught:
        Serde().dumps({"f": print}, place=PLACE)
    assert caught.value.path == 'result["f"]'


def test_serde_exposes_its_registry_and_codec() -> None:
    registry = TypeRegistry()
    serde = Serde(registry)
    assert serde.registry is registry
    assert isinstance(serde.codec, Codec)
    assert serde.codec.registry is registry
    assert serde.fingerprint({"a": 1}) == serde.codec.fingerprint({"a": 1})
