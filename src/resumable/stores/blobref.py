"""The reference a row keeps for an offloaded payload (see `stores.offload`).

```
[magic: 00 "RBLOB1" (7)][codec (1)][size (8, big-endian)][sha256 (32)][crc32 (4)]
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
    "REFERENCE_MAGIC",
    "REFERENCE_SIZE",
    "BlobRef",
    "is_reference",
    "written_size",
]

REFERENCE_MAGIC: Final = b"\x00RBLOB1"
"""How a stored reference begins; no sealed frame does (their version byte is 1)."""
_BODY: Final = struct.Struct(">7sBQ32s")
_CRC: Final = struct.Struct(">I")
REFERENCE_SIZE: Final = _BODY.size + _CRC.size


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
