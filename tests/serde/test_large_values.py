"""The large-payload path (pieces, streamed zstd, views) gives the plain path's bytes."""

from __future__ import annotations

import os
from typing import Any

import pytest
import zstandard

from resumable.errors import CorruptCheckpointError, SerializationError
from resumable.serde import Envelope, KeyRing, Serde, streams
from resumable.serde.codec import Codec, TypeRegistry
from resumable.serde.streams import STREAM_OVER

KEYS = KeyRing({"k1": b"\x01" * 32}, current="k1")
PLACE = "run 'r' step #1 'big'"
TEXT = os.urandom(STREAM_OVER).hex()  # 2 MB of text zstd shrinks to about half
BLOB = os.urandom(STREAM_OVER * 2)  # incompressible

SLICE = streams.SLICE  # what encode_stream encodes at a time
VALUES: list[Any] = [
    TEXT,
    "a" * (SLICE - 1) + "\ud83d\ude00 é😀" * 3 + "b" * SLICE,  # pairs cut by a slice
    os.urandom(SLICE * 2 + 1),
    TEXT + "\udc80 lone surrogate",
    BLOB,
    b"",
    b"short",
    {"doc": TEXT, "raw": BLOB[:1000]},
    bytearray(BLOB[:5000]),
    [1, 2.5, None],
]


@pytest.fixture
def fixed_nonce(monkeypatch: pytest.MonkeyPatch) -> None:
    """Encryption draws a random nonce: fix it so two seals can be compared."""
    monkeypatch.setattr(os, "urandom", lambda n: b"\x07" * n)


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_encode_stream_pieces_join_to_what_encode_writes(value: object) -> None:
    codec = Codec(TypeRegistry())
    encoded = codec.encode_stream(value)
    if isinstance(encoded, bytes):  # short: encoded whole
        assert encoded == codec.encode(value)
        return
    assert b"".join(encoded.pieces()) == codec.encode(value)
    assert encoded.size == len(codec.encode(value))
    assert b"".join(encoded.pieces()) == codec.encode(value)  # again: a new iterator


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_decoding_a_view_gives_what_decoding_bytes_gives(value: object) -> None:
    codec = Codec(TypeRegistry())
    body = codec.encode(value)
    assert codec.decode(memoryview(body)) == codec.decode(body) == value


@pytest.mark.parametrize(
    "body",
    [
        b'{"~":"bytes","v":"AAAA"}',
        b'{"~":"bytes","v":"AAAA="}',  # excess padding: strict base64 refuses it
        b'{"~":"bytes","v":"AA\\u0041A"}',  # an escape the parser resolves
        b'{"~":"bytes","v":""}',
    ],
)
def test_the_top_level_bytes_shortcut_agrees_with_the_json_parser(body: bytes) -> None:
    codec = Codec(TypeRegistry())
    # a space before the body: the same JSON, past the shortcut to the plain parser
    assert codec.decode(body) == codec.decode(b" " + body)


@pytest.mark.parametrize("keys", [None, KEYS], ids=["plain", "encrypted"])
@pytest.mark.parametrize(
    "parts",
    [[b"\x01", TEXT.encode()], [BLOB], [b'{"a":', TEXT.encode(), b"}"]],
    ids=["text", "incompressible", "three"],
)
@pytest.mark.usefixtures("fixed_nonce")
def test_seal_stream_writes_the_bytes_seal_writes(
    keys: KeyRing | None, parts: list[bytes]
) -> None:
    envelope = Envelope(keys=keys)
    body = b"".join(parts)
    expected = envelope.seal(body, place=PLACE)
    assert envelope.seal_stream(len(body), lambda: iter(parts), place=PLACE) == expected
    assert envelope.open(expected, place=PLACE) == body
    if keys is None and expected[1] & 0x01:  # compressed: the frame declares its size
        assert zstandard.frame_content_size(expected[6:]) == len(body)


@pytest.mark.parametrize("keys", [None, KEYS], ids=["plain", "encrypted"])
@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
@pytest.mark.usefixtures("fixed_nonce")
def test_dumps_and_loads_of_large_values_match_the_plain_path(
    keys: KeyRing | None, value: object
) -> None:
    serde = Serde(keys=keys)
    plain = serde.envelope.seal(serde.codec.encode(value), place=PLACE)
    stored = serde.dumps(value, place=PLACE)
    assert stored == plain
    assert serde.loads(stored, place=PLACE) == value
    assert serde.loads(bytearray(stored), place=PLACE) == value


@pytest.mark.parametrize("keys", [None, KEYS], ids=["plain", "encrypted"])
@pytest.mark.parametrize("compress_over", [None, 1024], ids=["raw", "zstd"])
def test_open_view_returns_what_open_returns_and_refuses_what_it_refuses(
    keys: KeyRing | None, compress_over: int | None
) -> None:
    envelope = Envelope(keys=keys, compress_over=compress_over)
    frame = envelope.seal(TEXT.encode(), place=PLACE)
    assert bytes(envelope.open_view(frame, place=PLACE)) == envelope.open(
        frame, place=PLACE
    )
    assert bytes(envelope.open_view(bytearray(frame), place=PLACE)) == TEXT.encode()
    for at in (1, 6, 40, len(frame) // 2, len(frame) - 1):
        damaged = bytearray(frame)
        damaged[at] ^= 0x10
        with pytest.raises(CorruptCheckpointError):
            envelope.open(bytes(damaged), place=PLACE)
        with pytest.raises(CorruptCheckpointError):
            envelope.open_view(damaged, place=PLACE)
    if keys is not None:  # the associated data still binds the frame to its place
        with pytest.raises(CorruptCheckpointError, match="decryption failed"):
            envelope.open_view(frame, place="run 'other' step #1 'big'")


def test_the_payload_limit_holds_on_the_large_path() -> None:
    limit = STREAM_OVER * 2
    serde = Serde(max_bytes=limit)
    with pytest.raises(SerializationError, match="limit"):
        serde.dumps(BLOB, place=PLACE)  # base64 makes it 2.7 MB
    unbounded = Serde(max_bytes=None)
    stored = unbounded.dumps(TEXT * 2, place=PLACE)  # 4 MB of text, sealed to ~2 MB
    with pytest.raises(CorruptCheckpointError, match="payload limit"):
        serde.loads(stored, place=PLACE)
    plain = Serde(max_bytes=None, compress_over=None).dumps(TEXT * 2, place=PLACE)
    with pytest.raises(CorruptCheckpointError, match="payload limit"):
        serde.loads(plain, place=PLACE)
