"""What a row keeps in place of a payload that lives in an object store.

An offloaded payload (see `stores.offload`), written today:

```
[magic: 00 "RBLOB1" (7)][codec (1)][size (8, big-endian)][sha256 (32)][crc32 (4)]
```

A member of a payload-level archive object, written by resumable before #37 and
only read since (`coldreader.ColdReader.member`); the object, under
`archive/<sha256>`, is the members one after another, zlib-compressed:

```
[magic: 00 "RARCH1" (7)][archive sha256 (32)][archive size (8)]
[unpacked size (8)][offset (8)][length (8)][member sha256 (32)][crc32 (4)]
```
"""

from __future__ import annotations

import dataclasses
import hashlib
import struct
import zlib
from typing import Final

from resumable.errors import CorruptCheckpointError

__all__ = [
    "MEMBER_MAGIC",
    "REFERENCE_MAGIC",
    "REFERENCE_SIZE",
    "BlobRef",
    "MemberRef",
    "is_member",
    "is_reference",
    "key_of",
    "points_away",
    "written_size",
]

REFERENCE_MAGIC: Final = b"\x00RBLOB1"
"""How a stored reference begins; no sealed frame does (their version byte is 1)."""
_BODY: Final = struct.Struct(">7sBQ32s")
_CRC: Final = struct.Struct(">I")
REFERENCE_SIZE: Final = _BODY.size + _CRC.size
MEMBER_MAGIC: Final = b"\x00RARCH1"
_MEMBER: Final = struct.Struct(">7s32sQQQQ32s")
MEMBER_SIZE: Final = _MEMBER.size + _CRC.size


@dataclasses.dataclass(frozen=True, slots=True)
class BlobRef:
    """What a row keeps of an offloaded payload."""

    codec: int
    """The sealed frame's flags byte: bit 0 zstd, bit 1 AES-GCM."""
    size: int
    sha256: bytes

    @property
    def key(self) -> str:
        """The object's key: its content address."""
        digest = self.sha256.hex()
        return f"sha256/{digest[:2]}/{digest}"

    @classmethod
    def of(cls, frame: bytes) -> BlobRef:
        """The reference to a sealed frame."""
        codec = frame[1] if len(frame) > 1 else 0
        return cls(codec, len(frame), hashlib.sha256(frame).digest())

    def encode(self) -> bytes:
        """The bytes a row holds in place of the frame."""
        body = _BODY.pack(REFERENCE_MAGIC, self.codec, self.size, self.sha256)
        return body + _CRC.pack(zlib.crc32(body))

    @classmethod
    def decode(cls, data: bytes, *, place: str) -> BlobRef:
        """Parse a stored reference.

        Raises:
            CorruptCheckpointError: it is truncated, padded or fails its CRC.
        """
        if len(data) != REFERENCE_SIZE:
            raise CorruptCheckpointError(
                place=place,
                detail=f"its object-store reference is {len(data)} bytes, not "
                f"{REFERENCE_SIZE} (the row was altered)",
            )
        (stored,) = _CRC.unpack_from(data, _BODY.size)
        if zlib.crc32(data[: _BODY.size]) != stored:
            raise CorruptCheckpointError(
                place=place,
                detail="its object-store reference fails its checksum (the row "
                "was altered)",
            )
        _, codec, size, sha256 = _BODY.unpack_from(data)
        return cls(codec, size, sha256)


def is_reference(data: object) -> bool:
    """Whether a stored payload is an object-store reference (not a frame)."""
    if isinstance(data, memoryview):
        data = bytes(data[: len(REFERENCE_MAGIC)])
    return isinstance(data, bytes | bytearray) and data[:7] == REFERENCE_MAGIC


def written_size(data: bytes | bytearray | None) -> int:
    """The sealed bytes a payload written to a row stands for.

    A frame's own length; for a reference to an offloaded object (a large
    result streamed to the object store before its row), that object's length,
    not the reference's 52 bytes.
    """
    if data is None:
        return 0
    if len(data) == REFERENCE_SIZE and is_reference(data):
        try:
            return BlobRef.decode(bytes(data), place="").size
        except CorruptCheckpointError:
            pass  # not one after all: what the row holds is what was written
    return len(data)


@dataclasses.dataclass(frozen=True, slots=True)
class MemberRef:
    """Where in which payload-level archive object a payload lives (read only)."""

    archive_sha256: bytes
    archive_size: int
    unpacked_size: int
    offset: int
    length: int
    sha256: bytes

    @property
    def key(self) -> str:
        """The archive object's key."""
        digest = self.archive_sha256.hex()
        return f"archive/{digest[:2]}/{digest}"

    @classmethod
    def decode(cls, data: bytes, *, place: str) -> MemberRef:
        """Parse a member reference; CorruptCheckpointError if it was altered."""
        if len(data) != MEMBER_SIZE:
            raise CorruptCheckpointError(
                place=place,
                detail=f"its archive reference is {len(data)} bytes, not "
                f"{MEMBER_SIZE} (the row was altered)",
            )
        (stored,) = _CRC.unpack_from(data, _MEMBER.size)
        if zlib.crc32(data[: _MEMBER.size]) != stored:
            raise CorruptCheckpointError(
                place=place,
                detail="its archive reference fails its checksum (the row was altered)",
            )
        _, digest, size, unpacked, offset, length, sha = _MEMBER.unpack_from(data)
        if offset + length > unpacked:
            raise CorruptCheckpointError(
                place=place, detail="its archive reference points past the archive"
            )
        return cls(digest, size, unpacked, offset, length, sha)


def is_member(data: object) -> bool:
    """Whether a stored payload is a reference into a payload-level archive object."""
    if isinstance(data, memoryview):
        data = bytes(data[: len(MEMBER_MAGIC)])
    return isinstance(data, bytes | bytearray) and data[:7] == MEMBER_MAGIC


def points_away(data: object) -> bool:
    """Whether a stored payload lives in the object store (offloaded or archived)."""
    return is_reference(data) or is_member(data)


def key_of(data: object) -> str | None:
    """The object a stored payload references; None for a frame or damage."""
    if not isinstance(data, bytes | bytearray | memoryview):
        return None
    try:
        if is_reference(data):
            return BlobRef.decode(bytes(data), place="").key
        if is_member(data):
            return MemberRef.decode(bytes(data), place="").key
    except CorruptCheckpointError:
        pass  # a damaged reference references nothing
    return None
