"""Frames sealed and opened a chunk at a time (`resumable.serde.chunked`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from resumable.errors import CorruptCheckpointError, SerializationError
from resumable.serde import Envelope, KeyRing, Serde
from resumable.serde.chunked import FrameReader, Opened, SealedStream, seal_chunks
from resumable.serde.streams import STREAM_OVER

KEYS = KeyRing({"k1": b"\x01" * 32}, current="k1")
PLACE = "run 'r', step #1 'big'"
TEXT = os.urandom(STREAM_OVER).hex()
BLOB = os.urandom(STREAM_OVER * 2)
LARGE: list[Any] = [TEXT, TEXT + "é😀\udc80", BLOB, {"doc": TEXT, "n": [1, 2]}]
ENVELOPES = {
    "plain": Envelope(),
    "encrypted": Envelope(keys=KEYS),
    "plain-raw": Envelope(compress_over=None),
    "encrypted-raw": Envelope(keys=KEYS, compress_over=None),
}


def _pieces(body: bytes, size: int) -> Iterator[bytes]:
    for at in range(0, len(body), size):
        yield body[at : at + size]


def _read(envelope: Envelope, frame: bytes, cut: int, place: str = PLACE) -> Opened:
    reader = FrameReader(envelope, frame_size=len(frame), place=place)
    for chunk in _pieces(frame, cut):
        reader.feed(chunk)
    return reader.finish()


@pytest.mark.parametrize("name", list(ENVELOPES))
@pytest.mark.parametrize("cut", [1, 17, 65536, 1 << 24])
def test_chunked_frames_open_whole_and_in_any_chunks_to_the_body(
    name: str, cut: int
) -> None:
    envelope = ENVELOPES[name]
    body = b"\x01" + (TEXT[:300_000] if cut < 100 else TEXT).encode()
    sealed = seal_chunks(
        envelope, len(body), lambda: _pieces(body, 100_000), place=PLACE
    )
    frame = b"".join(sealed.chunks())
    assert frame[1] == sealed.flags
    assert envelope.open(frame, place=PLACE) == body
    opened = _read(envelope, frame, cut)
    assert type(opened) is Opened
    assert bytes(opened) == body


@pytest.mark.parametrize("name", list(ENVELOPES))
def test_chunks_shorter_and_longer_than_the_held_back_tail_mix(name: str) -> None:
    # a short chunk joins the held-back tail; a long one is never copied to join
    # it: both kinds in turn, as memoryviews (the S3 reader's response buffers)
    envelope = ENVELOPES[name]
    body = b"\x01" + TEXT[:300_000].encode()
    frame = b"".join(
        seal_chunks(envelope, len(body), lambda: iter((body,)), place=PLACE).chunks()
    )
    reader = FrameReader(envelope, frame_size=len(frame), place=PLACE)
    at, cuts = 0, [3, 1, 40_000, 2, 5, 17, 16, 70_001]
    for turn in range(len(frame)):
        if at >= len(frame):
            break
        cut = cuts[turn % len(cuts)]
        reader.feed(memoryview(frame)[at : at + cut])
        at += cut
    assert bytes(reader.finish()) == body


@pytest.mark.parametrize("name", ["plain", "encrypted", "plain-raw"])
def test_the_reader_opens_what_the_one_shot_seal_writes(name: str) -> None:
    envelope = ENVELOPES[name]
    body = TEXT.encode()
    for frame in (
        envelope.seal(body, place=PLACE),
        envelope.seal_stream(len(body), lambda: iter((body,)), place=PLACE),
    ):
        assert bytes(_read(envelope, frame, 1 << 20)) == body


@pytest.mark.parametrize("name", list(ENVELOPES))
def test_the_reader_refuses_every_damaged_byte_it_is_shown(name: str) -> None:
    envelope = ENVELOPES[name]
    body = TEXT.encode()
    frame = b"".join(
        seal_chunks(envelope, len(body), lambda: iter((body,)), place=PLACE).chunks()
    )
    for at in (0, 1, 2, 5, 40, len(frame) // 2, len(frame) - 17, len(frame) - 1):
        damaged = bytearray(frame)
        damaged[at] ^= 0x10
        with pytest.raises(CorruptCheckpointError):
            _read(envelope, bytes(damaged), 1 << 20)
    with pytest.raises(CorruptCheckpointError):
        _read(envelope, frame[:-3], 1 << 20)


def test_an_encrypted_chunked_frame_opens_only_at_its_place_and_with_its_key() -> None:
    envelope = ENVELOPES["encrypted"]
    body = TEXT.encode()
    frame = b"".join(
        seal_chunks(envelope, len(body), lambda: iter((body,)), place=PLACE).chunks()
    )
    with pytest.raises(CorruptCheckpointError, match="decryption failed"):
        _read(envelope, frame, 1 << 20, place="run 'r', step #2 'big'")
    with pytest.raises(CorruptCheckpointError, match="decryption failed"):
        envelope.open(frame, place="run 'r', step #2 'big'")
    other = Envelope(keys=KeyRing({"k2": b"\x02" * 32}, current="k2"))
    with pytest.raises(CorruptCheckpointError, match="not in the key ring"):
        _read(other, frame, 1 << 20)
    plain = b"".join(
        seal_chunks(Envelope(), len(body), lambda: iter((body,)), place=PLACE).chunks()
    )
    with pytest.raises(CorruptCheckpointError, match="not encrypted"):
        _read(envelope, plain, 1 << 20)
    with pytest.raises(CorruptCheckpointError, match="no key"):
        _read(Envelope(), frame, 1 << 20)


def test_the_reader_keeps_to_the_payload_limit_before_allocating() -> None:
    body = (TEXT * 4).encode()  # compresses well under the limit, opens past it
    for name in ("plain", "plain-raw"):
        frame = b"".join(
            seal_chunks(
                ENVELOPES[name], len(body), lambda: iter((body,)), place=PLACE
            ).chunks()
        )
        limited = Envelope(compress_over=None, max_body_bytes=len(body) - 1)
        with pytest.raises(CorruptCheckpointError, match="payload limit"):
            _read(limited, frame, 1 << 20)


@pytest.mark.parametrize("keys", [None, KEYS], ids=["plain", "encrypted"])
@pytest.mark.parametrize("value", LARGE, ids=lambda v: type(v).__name__)
def test_dumps_stream_round_trips_through_the_reader_and_loads(
    keys: KeyRing | None, value: object
) -> None:
    serde = Serde(keys=keys)
    sealed = serde.dumps_stream(value, place=PLACE)
    assert isinstance(sealed, SealedStream)
    frame = b"".join(sealed.chunks())
    assert serde.loads(frame, place=PLACE) == value  # a whole chunked frame opens too
    reader = serde.reader(frame_size=len(frame), place=PLACE)
    for chunk in _pieces(frame, 1 << 20):
        reader.feed(chunk)
    opened = reader.finish()
    assert serde.loads(opened, place=PLACE) == value
    assert serde.loads(opened, place=PLACE) == value  # the body is not used up
    assert serde.view(opened, place=PLACE) == serde.view(frame, place=PLACE)


def test_small_values_keep_the_one_shot_frame() -> None:
    serde = Serde()
    for value in ("short", b"x" * 1000, {"a": 1}, "t" * STREAM_OVER):
        assert serde.dumps_stream(value, place=PLACE) == serde.dumps(value, place=PLACE)


def test_dumps_stream_keeps_to_the_payload_limit() -> None:
    with pytest.raises(SerializationError, match="limit"):
        Serde(max_bytes=STREAM_OVER * 2).dumps_stream(BLOB, place=PLACE)


def test_a_body_that_is_not_opened_is_never_taken_for_one() -> None:
    # a row's bytes are frames whatever their content: only a reader makes an Opened
    body = b"\x01" + b"not a frame"
    with pytest.raises(CorruptCheckpointError):
        Serde().loads(bytearray(body), place=PLACE)


@pytest.mark.parametrize("keys", [None, KEYS], ids=["plain", "encrypted"])
def test_a_compressed_body_shorter_than_a_zstd_header_opens(
    keys: KeyRing | None,
) -> None:
    envelope = Envelope(keys=keys, compress_over=0)
    body = b"\x01hi"
    sealed = seal_chunks(envelope, len(body), lambda: iter((body,)), place=PLACE)
    assert sealed.flags & 0x01
    frame = b"".join(sealed.chunks())
    assert bytes(_read(envelope, frame, 1)) == body
    assert envelope.open(frame, place=PLACE) == body


def test_loading_a_json_body_trades_its_buffer_for_its_text() -> None:
    serde = Serde()
    value = {"doc": TEXT + "é😀\udc80", "n": [1, 2]}
    frame = b"".join(serde.dumps_stream(value, place=PLACE).chunks())  # type: ignore[union-attr]  # a large value streams
    opened = _read(serde.envelope, frame, 1 << 20)
    body = bytes(opened)
    assert serde.loads(opened, place=PLACE) == value
    assert len(opened) == 0  # freed before the text was parsed
    assert opened.body() == body
    assert serde.loads(opened, place=PLACE) == value


def test_an_opened_body_that_is_not_utf8_is_corrupt() -> None:
    opened = Opened(b'{"a":"\xff"}')
    with pytest.raises(CorruptCheckpointError, match="not a valid payload"):
        Serde().loads(opened, place=PLACE)


def test_an_opened_body_someone_holds_a_view_of_keeps_its_buffer() -> None:
    serde = Serde()
    value = {"doc": TEXT, "n": 1}
    frame = b"".join(serde.dumps_stream(value, place=PLACE).chunks())  # type: ignore[union-attr]  # a large value streams
    opened = _read(serde.envelope, frame, 1 << 20)
    with memoryview(opened) as held:
        assert serde.loads(opened, place=PLACE) == value
        assert len(opened) == len(held)
    assert opened.body() == bytes(opened)


def test_a_damaged_compressed_body_is_corrupt_checkpoint_error() -> None:
    # zstd may find the damage before the CRC at the end does: either is ours
    envelope = ENVELOPES["plain"]
    body = bytes.fromhex("00ff") * 8 + TEXT.encode()
    frame = b"".join(
        seal_chunks(envelope, len(body), lambda: iter((body,)), place=PLACE).chunks()
    )
    for start in (20, 30, len(frame) // 3, len(frame) // 2):
        damaged = bytearray(frame)
        damaged[start : start + 64] = b"\xff" * 64
        with pytest.raises(CorruptCheckpointError):
            _read(envelope, bytes(damaged), 1 << 20)
