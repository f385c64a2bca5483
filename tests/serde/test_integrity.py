"""Envelope and KeyRing: the stored frame's checksum, encryption and compression."""

from __future__ import annotations

import base64
import contextlib
import os
import sys
import tracemalloc
from collections.abc import Callable

import pytest

from resumable.errors import CorruptCheckpointError
from resumable.serde import Envelope, KeyRing
from resumable.testing import decompression_bomb, plain_frame

PLACE = "run 'r1' step #3"
BODY = b'{"answer":"forty-two"}'
BIG_BODY = b'{"text":"' + b"all work and no play " * 500 + b'"}'
KEY_A = bytes(range(32))
KEY_B = bytes(range(32, 64))


def ring(current: str = "a") -> KeyRing:
    return KeyRing({"a": KEY_A, "b": KEY_B}, current=current)


def b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def frames() -> dict[str, tuple[Envelope, bytes]]:
    """One sealed frame of every kind, with the envelope that opens it."""
    plain = Envelope(compress_over=None)
    packed = Envelope(compress_over=64)
    secret = Envelope(keys=ring(), compress_over=None)
    both = Envelope(keys=ring(), compress_over=64)
    return {
        "plain": (plain, plain.seal(BODY, place=PLACE)),
        "compressed": (packed, packed.seal(BIG_BODY, place=PLACE)),
        "encrypted": (secret, secret.seal(BODY, place=PLACE)),
        "encrypted+compressed": (both, both.seal(BIG_BODY, place=PLACE)),
    }


@pytest.mark.parametrize("kind", list(frames()))
def test_every_kind_of_frame_round_trips(kind: str) -> None:
    envelope, frame = frames()[kind]
    expected = BIG_BODY if "compressed" in kind else BODY
    assert envelope.open(frame, place=PLACE) == expected


@pytest.mark.parametrize("kind", list(frames()))
def test_a_bit_flip_anywhere_in_a_frame_is_caught(kind: str) -> None:
    envelope, frame = frames()[kind]
    for index in range(len(frame)):
        for bit in range(8):
            damaged = bytearray(frame)
            damaged[index] ^= 1 << bit
            with pytest.raises(CorruptCheckpointError) as caught:
                envelope.open(bytes(damaged), place=PLACE)
            assert caught.value.place == PLACE


@pytest.mark.parametrize("kind", list(frames()))
def test_a_truncated_frame_is_caught(kind: str) -> None:
    envelope, frame = frames()[kind]
    for length in range(len(frame)):
        with pytest.raises(CorruptCheckpointError):
            envelope.open(frame[:length], place=PLACE)


def test_a_frame_may_be_given_as_a_memoryview_or_bytearray() -> None:
    envelope, frame = frames()["plain"]
    assert envelope.open(memoryview(frame), place=PLACE) == BODY  # drivers do this
    assert envelope.open(bytearray(frame), place=PLACE) == BODY  # drivers do this


def test_a_short_frame_says_it_is_truncated() -> None:
    with pytest.raises(CorruptCheckpointError, match="truncated"):
        Envelope().open(b"\x01", place=PLACE)


def test_an_unknown_version_is_refused() -> None:
    frame = bytearray(Envelope().seal(BODY, place=PLACE))
    frame[0] = 99
    with pytest.raises(CorruptCheckpointError, match="unknown frame version 99"):
        Envelope().open(bytes(frame), place=PLACE)


def test_an_encrypted_frame_opened_at_another_place_is_refused() -> None:
    envelope = Envelope(keys=ring())
    frame = envelope.seal(BODY, place="run 'r1' step #3")
    with pytest.raises(CorruptCheckpointError, match="decryption failed") as caught:
        envelope.open(frame, place="run 'r1' step #4")
    assert caught.value.place == "run 'r1' step #4"


def test_a_plaintext_frame_is_refused_when_encryption_is_on() -> None:
    frame = Envelope().seal(BODY, place=PLACE)
    with pytest.raises(
        CorruptCheckpointError, match="not encrypted but encryption is on"
    ):
        Envelope(keys=ring()).open(frame, place=PLACE)


def test_an_encrypted_frame_without_keys_is_refused() -> None:
    frame = Envelope(keys=ring()).seal(BODY, place=PLACE)
    with pytest.raises(CorruptCheckpointError, match="no key is configured"):
        Envelope().open(frame, place=PLACE)


def test_the_body_is_not_readable_in_an_encrypted_frame() -> None:
    frame = Envelope(keys=ring(), compress_over=None).seal(BODY, place=PLACE)
    assert b"forty-two" not in frame


def test_frames_sealed_before_a_key_rotation_stay_readable() -> None:
    old = Envelope(keys=KeyRing({"a": KEY_A}, current="a"))
    frame_a = old.seal(BODY, place=PLACE)
    rotated = Envelope(keys=ring(current="b"))
    frame_b = rotated.seal(BODY, place=PLACE)
    assert rotated.open(frame_a, place=PLACE) == BODY
    assert rotated.open(frame_b, place=PLACE) == BODY
    assert b"b" in frame_b[:4]
    with pytest.raises(CorruptCheckpointError, match="key id 'b'"):
        old.open(frame_b, place=PLACE)


def test_the_same_key_id_with_another_key_fails_decryption() -> None:
    frame = Envelope(keys=KeyRing({"a": KEY_A}, current="a")).seal(BODY, place=PLACE)
    other = Envelope(keys=KeyRing({"a": KEY_B}, current="a"))
    with pytest.raises(CorruptCheckpointError, match="decryption failed"):
        other.open(frame, place=PLACE)


def test_bodies_over_the_threshold_are_compressed() -> None:
    envelope = Envelope(compress_over=len(BIG_BODY) - 1)
    frame = envelope.seal(BIG_BODY, place=PLACE)
    assert frame[1] & 0x01
    assert len(frame) < len(BIG_BODY) // 4
    assert envelope.open(frame, place=PLACE) == BIG_BODY


def test_bodies_at_or_under_the_threshold_are_not_compressed() -> None:
    envelope = Envelope(compress_over=len(BIG_BODY))
    frame = envelope.seal(BIG_BODY, place=PLACE)
    assert not frame[1] & 0x01
    assert frame.endswith(BIG_BODY)


def test_compression_is_off_when_the_threshold_is_none() -> None:
    frame = Envelope(compress_over=None).seal(BIG_BODY, place=PLACE)
    assert not frame[1] & 0x01


def test_incompressible_bodies_are_stored_as_they_are() -> None:
    body = os.urandom(10_000)
    envelope = Envelope(compress_over=100)
    frame = envelope.seal(body, place=PLACE)
    assert not frame[1] & 0x01
    assert envelope.open(frame, place=PLACE) == body


def test_without_zstandard_seal_skips_compression(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "zstandard", None)
    envelope = Envelope(compress_over=64)
    frame = envelope.seal(BIG_BODY, place=PLACE)
    assert not frame[1] & 0x01
    assert envelope.open(frame, place=PLACE) == BIG_BODY


def test_without_zstandard_a_compressed_frame_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frame = Envelope(compress_over=64).seal(BIG_BODY, place=PLACE)
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(
        CorruptCheckpointError, match=r"pip install 'resumable\[zstd\]'"
    ):
        Envelope().open(frame, place=PLACE)


def test_without_cryptography_encryption_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(
        sys.modules, "cryptography.hazmat.primitives.ciphers.aead", None
    )
    with pytest.raises(ImportError, match=r"pip install 'resumable\[encryption\]'"):
        Envelope(keys=KeyRing({"a": KEY_A}, current="a"))


# ---------------------------------------------------------------- KeyRing


def test_from_env_reads_a_single_key_as_k1() -> None:
    keys = KeyRing.from_env(b64(KEY_A))
    assert keys.ids == ("k1",)
    assert keys.current == "k1"


def test_from_env_reads_several_keys_with_the_first_current() -> None:
    keys = KeyRing.from_env(f"new:{b64(KEY_B)}, old:{b64(KEY_A)}")
    assert keys.ids == ("new", "old")
    assert keys.current == "new"
    frame = Envelope(keys=KeyRing({"old": KEY_A}, current="old")).seal(
        BODY, place=PLACE
    )
    assert Envelope(keys=keys).open(frame, place=PLACE) == BODY


def test_from_env_accepts_url_safe_base64_without_padding() -> None:
    key = bytes([251] * 32)
    text = base64.urlsafe_b64encode(key).decode().rstrip("=")
    assert "-" in text or "_" in text
    keys = KeyRing.from_env(f"k:{text}")
    frame = Envelope(keys=KeyRing({"k": key}, current="k")).seal(BODY, place=PLACE)
    assert Envelope(keys=keys).open(frame, place=PLACE) == BODY


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("not base64 at all!", "not valid base64"),
        (b64(KEY_A[:16]), "16 bytes"),
        (f"a:{b64(KEY_A)},{b64(KEY_B)}", "entry 2 is not 'id:base64key'"),
        (f":{b64(KEY_A)}", "entry 1"),
        ("a:", "entry 1"),
        (f"a:{b64(KEY_A)},a:{b64(KEY_B)}", "twice"),
        (f"a:{b64(KEY_A)[:-4]}", "bytes"),
    ],
)
def test_from_env_explains_malformed_values(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        KeyRing.from_env(value)
    text = str(caught.value)
    for secret in (b64(KEY_A), b64(KEY_B), b64(KEY_A[:16]), b64(KEY_A)[:-4]):
        assert secret not in text
    assert caught.value.__cause__ is None


def test_key_material_is_not_in_the_repr() -> None:
    keys = ring()
    text = repr(keys) + repr(Envelope(keys=keys))
    assert "KeyRing(ids=['a', 'b'], current='a')" in text
    for key in (KEY_A, KEY_B):
        assert repr(key) not in text
        assert b64(key) not in text
        assert key.hex() not in text


@pytest.mark.parametrize(
    ("keys", "current", "error"),
    [
        ({}, "a", ValueError),
        ({"a": b"short"}, "a", ValueError),
        ({"a": KEY_A}, "b", ValueError),
        ({"": KEY_A}, "", ValueError),
        ({"x" * 300: KEY_A}, "x" * 300, ValueError),
        ({"a": "not bytes"}, "a", TypeError),
    ],
)
def test_a_key_ring_checks_its_keys(
    keys: dict[str, bytes], current: str, error: type[Exception]
) -> None:
    with pytest.raises(error):
        KeyRing(keys, current=current)


# ---------------------------------------------------------------- hostile frames


def _traced_peak(action: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        with contextlib.suppress(CorruptCheckpointError):
            action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("declares_size", [True, False], ids=["declared", "unstated"])
def test_a_decompression_bomb_is_refused_without_allocating_it(
    declares_size: bool,
) -> None:
    pytest.importorskip("zstandard")
    frame = plain_frame(
        decompression_bomb(declares_size=declares_size), compressed=True
    )
    assert len(frame) < 64 * 1024  # 1 GiB of zeros inside
    envelope = Envelope(max_body_bytes=1 << 20)
    with pytest.raises(CorruptCheckpointError) as caught:
        envelope.open(frame, place=PLACE)
    assert caught.value.place == PLACE
    assert (
        "limit" in caught.value.detail or "decompression failed" in caught.value.detail
    )
    assert _traced_peak(lambda: envelope.open(frame, place=PLACE)) < 4 << 20


def test_a_frame_within_the_limit_still_opens() -> None:
    pytest.importorskip("zstandard")
    envelope = Envelope(compress_over=16, max_body_bytes=len(BIG_BODY))
    assert envelope.open(envelope.seal(BIG_BODY, place=PLACE), place=PLACE) == BIG_BODY
    smaller = Envelope(compress_over=16, max_body_bytes=len(BIG_BODY) - 1)
    with pytest.raises(CorruptCheckpointError, match="payload limit"):
        smaller.open(envelope.seal(BIG_BODY, place=PLACE), place=PLACE)


def test_an_uncompressed_body_over_the_limit_is_refused() -> None:
    frame = Envelope(compress_over=None).seal(BIG_BODY, place=PLACE)
    with pytest.raises(CorruptCheckpointError, match="payload limit"):
        Envelope(max_body_bytes=100).open(frame, place=PLACE)


def test_compressed_garbage_with_a_valid_checksum_is_corrupt() -> None:
    pytest.importorskip("zstandard")
    with pytest.raises(CorruptCheckpointError, match="zstd"):
        Envelope().open(plain_frame(b"not zstd at all", compressed=True), place=PLACE)


@pytest.mark.parametrize("value", ["text in a blob column", 12, None, [1]], ids=repr)
def test_a_stored_value_that_is_not_bytes_is_corrupt(value: object) -> None:
    with pytest.raises(CorruptCheckpointError, match="not bytes") as caught:
        Envelope().open(value, place=PLACE)  # type: ignore[arg-type]  # what a damaged row hands over
    assert caught.value.place == PLACE
