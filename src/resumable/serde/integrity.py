"""The stored frame: a versioned header, a checksum, optional zstd and AES-GCM.

```
plain:      [version][flags][crc32 (4, big-endian)][body]
encrypted:  [version][flags][key id length][key id][nonce (12)][ciphertext + tag (16)]
```

`flags` has bit 0 set when the body is zstd-compressed and bit 1 when it is
encrypted. Bit 2 marks a plain frame written a chunk at a time to an object
store (`resumable.serde.chunked`): its CRC-32 follows the body instead,
`[version][flags][body][crc32]`, as it is known only once the body is written. Without encryption the CRC-32 covers the header and the stored body,
so a flipped bit anywhere is caught. With encryption the GCM tag is the check: it
authenticates the header and the `place` the frame was written for (such as
"run 'x' step #3") as associated data, so a frame copied to another place fails.
The body is compressed before it is encrypted. Nonces are random, which is sound
for up to about 2**32 frames per key: rotate keys well before that.

`cryptography` and `zstandard` are optional extras, imported on first use.
"""

from __future__ import annotations

import importlib
import io
import os
import struct
import sys
import threading
import zlib
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, Final, TypeAlias

from resumable.errors import CorruptCheckpointError
from resumable.serde.keys import KeyRing, invalid_tag
from resumable.serde.streams import STREAM_OVER, build, compressed

__all__ = ["Envelope", "KeyRing"]

Buffer: TypeAlias = bytes | memoryview
"""A frame or a body: `open` slices bytes, `open_view` slices a view (no copies)."""

FORMAT_VERSION = 1
_COMPRESSED = 0x01
_ENCRYPTED = 0x02
_TRAILER = 0x04
_KNOWN_FLAGS = _COMPRESSED | _ENCRYPTED | _TRAILER
_CRC = struct.Struct(">I")
_PLAIN_HEADER_SIZE = 2 + _CRC.size
_PLAIN_FRAME: Final = bytes((FORMAT_VERSION, 0))
_PLAIN_FRAME_CRC: Final = zlib.crc32(_PLAIN_FRAME)
_OFFLOADED: Final = b"\x00RBLOB1"  # resumable.stores.offload.REFERENCE_MAGIC
_NONCE_SIZE = 12
_GCM_TAG_SIZE = 16
# level 1: on LLM-like text (benchmarks/compression.py) within 1% of level 3's
# ratio (2.96x against 2.98x), and on a LangGraph thread's packs of manifests
# smaller still; 10% faster on a chat message, 40% on a 90 KB pack
_ZSTD_LEVEL = 1


def _import_optional(name: str) -> ModuleType | None:
    # every compressed frame asks: an imported module skips importlib's frames
    module = sys.modules.get(name)
    if module is not None:
        return module
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


class Envelope:
    """Seals encoded bodies into stored frames, and opens them again.

    Args:
        keys: Encrypt new frames with `keys.current` and refuse plaintext frames.
            None stores plaintext guarded by a CRC-32.
        compress_over: Compress bodies longer than this many bytes with zstd when
            the `zstandard` package is installed (silently skipped when it is not).
            None never compresses.
        max_body_bytes: `open` refuses a frame whose body is, or would decompress
            to, more than this many bytes (a damaged or hostile frame: `seal` is
            never given more), checked before decompressing and while it runs, so
            a decompression bomb never allocates past it. None: no limit.

    Raises:
        ImportError: `keys` is given but `cryptography` is not installed.
    """

    def __init__(
        self,
        *,
        keys: KeyRing | None = None,
        compress_over: int | None = 4096,
        max_body_bytes: int | None = None,
    ) -> None:
        if keys is not None:
            keys.current_cipher()  # fail now, not at the first write
        self._keys = keys
        self._compress_over = compress_over
        self._max_body_bytes = max_body_bytes

    def __repr__(self) -> str:
        return (
            f"Envelope(keys={self._keys!r}, compress_over={self._compress_over!r}, "
            f"max_body_bytes={self._max_body_bytes!r})"
        )

    @property
    def keys(self) -> KeyRing | None:
        """The key ring new frames are encrypted with (None: plaintext)."""
        return self._keys

    @property
    def compress_over(self) -> int | None:
        """Bodies longer than this are compressed (None: never)."""
        return self._compress_over

    @property
    def max_body_bytes(self) -> int | None:
        """The largest body a frame may open to (None: no limit)."""
        return self._max_body_bytes

    def with_compress_over(self, compress_over: int | None) -> Envelope:
        """The same keys and limit with another compression threshold."""
        return Envelope(
            keys=self._keys,
            compress_over=compress_over,
            max_body_bytes=self._max_body_bytes,
        )

    def seal(self, body: bytes, *, place: str) -> bytes:
        """Frame a body for storage.

        Args:
            body: The encoded value.
            place: Where the frame will be stored, e.g. "run 'x' step #3"; with
                encryption it is authenticated, so the frame opens only there.
        """
        if len(body) > STREAM_OVER:
            return self.seal_stream(len(body), lambda: iter((body,)), place=place)
        flags = 0
        if self._compress_over is not None and len(body) > self._compress_over:
            zstd = _import_optional("zstandard")
            if zstd is not None:
                packed: bytes = _zstd_context(zstd, "compressor").compress(body)
                if len(packed) < len(body):
                    body, flags = packed, _COMPRESSED
        keys = self._keys
        if keys is None:
            header = bytes((FORMAT_VERSION, flags))
            checksum = zlib.crc32(body, zlib.crc32(header))
            return b"".join((header, _CRC.pack(checksum), body))
        key_id = keys.current.encode("utf-8")
        header = bytes((FORMAT_VERSION, flags | _ENCRYPTED, len(key_id))) + key_id
        nonce = os.urandom(_NONCE_SIZE)
        sealed = keys.current_cipher().encrypt(
            nonce, body, _associated_data(header, place)
        )
        return b"".join((header, nonce, sealed))

    def seal_stream(
        self, size: int, pieces: Callable[[], Iterator[bytes]], *, place: str
    ) -> bytes:
        """`seal(b"".join(pieces()))`, never holding the joined body.

        For large bodies (`seal` sends those over `STREAM_OVER` here too, so both
        write the same bytes): zstd takes the pieces as they come and the frame
        grows in one buffer, its header and CRC-32 written in last. Without
        encryption, a compressed write holds the pieces in flight and the frame;
        when compression does not shrink the body, `pieces` is called again and
        the frame holds the body as is. With encryption, the compressed (or
        plain) body, then its ciphertext, are held as well.

        Args:
            size: The length of the joined pieces.
            pieces: A new iterator over the body's pieces each call.
            place: As `seal`.
        """
        keys = self._keys
        reserve = _PLAIN_HEADER_SIZE if keys is None else 0
        built: tuple[io.BytesIO, int, int] | None = None
        flags = 0
        if self._compress_over is not None and size > self._compress_over:
            zstd = _import_optional("zstandard")
            if zstd is not None:
                built = build(
                    compressed(_zstd_context(zstd, "compressor"), size, pieces()),
                    reserve,
                    zlib.crc32(bytes((FORMAT_VERSION, _COMPRESSED))),
                )
                if built[2] < size:
                    flags = _COMPRESSED
                else:
                    built = None  # freed before the plain frame is built
        if built is None:
            built = build(pieces(), reserve, _PLAIN_FRAME_CRC)
        out, checksum, _ = built
        del built
        if keys is None:
            with out.getbuffer() as frame:
                frame[:reserve] = bytes((FORMAT_VERSION, flags)) + _CRC.pack(checksum)
            return out.getvalue()  # the buffer itself, not a copy
        body = out.getvalue()
        del out
        key_id = keys.current.encode("utf-8")
        header = bytes((FORMAT_VERSION, flags | _ENCRYPTED, len(key_id))) + key_id
        nonce = os.urandom(_NONCE_SIZE)
        sealed = keys.current_cipher().encrypt(
            nonce, body, _associated_data(header, place)
        )
        del body
        return b"".join((header, nonce, sealed))

    def open_view(
        self, data: bytes | bytearray | memoryview, *, place: str
    ) -> bytes | memoryview:
        """`open`, returning a plain frame's body as a view into `data`, not a copy.

        For a large payload read to be decoded at once (`Serde.loads`): nothing of
        the frame is sliced off, so a plain body is a view (it keeps `data` alive:
        hold it no longer than the decoding), and a compressed or encrypted one is
        the one output its decompression or decryption writes.

        Raises:
            CorruptCheckpointError: As `open`.
        """
        return self._open(_as_view(data, place), place)

    def open(self, data: bytes | bytearray | memoryview, *, place: str) -> bytes:
        """Check a stored frame and return the body it holds.

        Raises:
            CorruptCheckpointError: The data is not bytes, the checksum or
                decryption fails, the frame is truncated, its version or flags are
                unknown, its key id is not in the ring, it is plaintext while
                encryption is on, its body is (or decompresses to) more than
                `max_body_bytes`, or it is compressed and `zstandard` is missing.
        """
        if type(data) is not bytes:
            data = _as_bytes(data, place)
        if (
            data[:2] == _PLAIN_FRAME
            and self._keys is None
            and len(data) >= _PLAIN_HEADER_SIZE
        ):  # the common frame (plaintext, uncompressed), checked in one go
            body = data[_PLAIN_HEADER_SIZE:]
            limit = self._max_body_bytes
            if zlib.crc32(body, _PLAIN_FRAME_CRC) == _CRC.unpack_from(data, 2)[0] and (
                limit is None or len(body) <= limit
            ):
                return body  # else _open says what is wrong
        opened = self._open(data, place)
        return opened if type(opened) is bytes else bytes(opened)

    def _open(self, data: Buffer, place: str) -> Buffer:
        """`open` past its fast path: slices of `data` are bytes or views, as it is."""
        if len(data) < 2:
            raise CorruptCheckpointError(place=place, detail="truncated frame")
        version, flags = data[0], data[1]
        if data[:7] == _OFFLOADED:
            raise CorruptCheckpointError(
                place=place,
                detail="the row holds a reference to an object store, not the "
                "payload: open the store with ?blobs=s3://bucket/prefix (or "
                "Engine(blobs=...)) naming the object store it was offloaded to",
            )
        if version != FORMAT_VERSION:
            raise CorruptCheckpointError(
                place=place,
                detail=f"unknown frame version {version} (this resumable reads "
                f"version {FORMAT_VERSION}; a newer one may have written it)",
            )
        if flags & ~_KNOWN_FLAGS or (flags & _TRAILER and flags & _ENCRYPTED):
            raise CorruptCheckpointError(
                place=place, detail=f"unknown flags {flags:#04x}"
            )
        body = (
            self._decrypt(data, place)
            if flags & _ENCRYPTED
            else self._check(data, place)
        )
        if flags & _COMPRESSED:
            return _decompress(body, place, self._max_body_bytes)
        self._within_limit(body, place)
        return body

    def _within_limit(self, body: Buffer, place: str) -> None:
        limit = self._max_body_bytes
        if limit is not None and len(body) > limit:
            raise CorruptCheckpointError(
                place=place,
                detail=f"its body is {len(body):,} bytes, over the {limit:,}-byte "
                f"payload limit no write can pass (Engine(max_payload_bytes=...))",
            )

    def key_id_of(self, data: bytes) -> str | None:
        """The id of the key a frame was sealed with; None for a plaintext frame."""
        if len(data) < 3 or not data[1] & _ENCRYPTED:
            return None
        length = data[2]
        return bytes(data[3 : 3 + length]).decode("utf-8", "replace")

    def needs_reseal(self, data: bytes) -> bool:
        """Whether `rekey` should rewrite this frame under the current key."""
        if self._keys is None:
            return False
        return self.key_id_of(data) != self._keys.current

    def reseal(self, data: bytes, *, place: str) -> bytes:
        """The frame's body sealed again with the current key (for `rekey`).

        Unlike `open`, this accepts a plaintext frame (still checksum-verified), so
        a store written without encryption can be encrypted in place.
        """
        if self._keys is None:
            raise ValueError("reseal needs encryption keys")
        if len(data) >= 2 and not data[1] & _ENCRYPTED:
            plain = Envelope(compress_over=self._compress_over)
            body = plain.open(data, place=place)
        else:
            body = self.open(data, place=place)
        return self.seal(body, place=place)

    def _check(self, data: Buffer, place: str) -> Buffer:
        if self._keys is not None:
            raise CorruptCheckpointError(
                place=place, detail="the frame is not encrypted but encryption is on"
            )
        if len(data) < _PLAIN_HEADER_SIZE:
            raise CorruptCheckpointError(place=place, detail="truncated frame")
        if data[1] & _TRAILER:
            (stored,) = _CRC.unpack_from(data, len(data) - _CRC.size)
            body = data[2 : len(data) - _CRC.size]
        else:
            (stored,) = _CRC.unpack_from(data, 2)
            body = data[_PLAIN_HEADER_SIZE:]
        if zlib.crc32(body, zlib.crc32(data[:2])) != stored:
            raise CorruptCheckpointError(place=place, detail="checksum mismatch")
        return body

    def _decrypt(self, data: Buffer, place: str) -> bytes:
        keys = self._keys
        if keys is None:
            raise CorruptCheckpointError(
                place=place,
                detail="the frame is encrypted but no key is configured "
                "(set RESUMABLE_ENCRYPTION_KEY)",
            )
        if len(data) < 3:
            raise CorruptCheckpointError(place=place, detail="truncated frame")
        header_size = 3 + data[2]
        if len(data) < header_size + _NONCE_SIZE + _GCM_TAG_SIZE:
            raise CorruptCheckpointError(place=place, detail="truncated frame")
        header = bytes(data[:header_size])
        try:
            key_id = header[3:].decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptCheckpointError(
                place=place, detail="the key id is not valid UTF-8"
            ) from None
        cipher = keys.cipher(key_id)
        if cipher is None:
            raise CorruptCheckpointError(
                place=place,
                detail=f"encrypted with key id {key_id!r}, which is not in the key "
                f"ring {list(keys.ids)}; add that key to RESUMABLE_ENCRYPTION_KEY",
            )
        rejected = invalid_tag()
        nonce = bytes(data[header_size : header_size + _NONCE_SIZE])
        try:
            return cipher.decrypt(
                nonce,
                data[header_size + _NONCE_SIZE :],
                _associated_data(header, place),
            )
        except rejected:
            raise CorruptCheckpointError(
                place=place,
                detail="decryption failed: the data was altered, was written for "
                "another place, or the key differs from the one that wrote it",
            ) from None


def _associated_data(header: bytes, place: str) -> bytes:
    # The header is length-prefixed, so header + place cannot be split two ways.
    return header + place.encode("utf-8", "surrogatepass")


# a cache of stateless codec contexts, not program state: one per thread because
# zstd contexts are not safe to share across threads
_ZSTD_CONTEXTS = threading.local()


def _zstd_context(zstd: ModuleType, kind: str) -> Any:
    """This thread's reusable zstd compressor or decompressor.

    Building one costs more than compressing a small payload.
    """
    context = getattr(_ZSTD_CONTEXTS, kind, None)
    if context is None:
        if kind == "compressor":
            context = zstd.ZstdCompressor(level=_ZSTD_LEVEL)
        else:
            context = zstd.ZstdDecompressor()
        setattr(_ZSTD_CONTEXTS, kind, context)
    return context


def _as_view(data: object, place: str) -> memoryview:
    """A view of a stored payload, copying nothing; text or another type is damage."""
    if isinstance(data, bytes | bytearray | memoryview):
        return memoryview(data)
    return memoryview(_as_bytes(data, place))  # raises


def _as_bytes(data: object, place: str) -> bytes:
    # drivers hand back memoryview or bytearray; text in a binary column is damage
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise CorruptCheckpointError(
        place=place,
        detail=f"a stored payload is {type(data).__name__}, not bytes (the row was "
        f"altered or written by something else)",
    )


def _decompress(body: Buffer, place: str, limit: int | None) -> bytes:
    """zstd-decompress `body`, never allocating more than `limit` bytes for it.

    The size a frame declares is checked before anything is allocated; a frame
    that declares none (ours always do) is decompressed into at most `limit`.
    """
    zstd = _import_optional("zstandard")
    if zstd is None:
        raise CorruptCheckpointError(
            place=place,
            detail="the frame is zstd-compressed and the zstandard package is "
            "missing: pip install 'resumable[zstd]'",
        )
    try:
        declared: int = zstd.frame_content_size(body)  # -1: the frame does not say
    except zstd.ZstdError as exc:
        raise CorruptCheckpointError(
            place=place, detail=f"not a zstd frame ({exc})"
        ) from exc
    if limit is not None and declared > limit:
        raise CorruptCheckpointError(
            place=place,
            detail=f"it declares {declared:,} bytes decompressed, over the "
            f"{limit:,}-byte payload limit no write can pass (a decompression bomb, "
            f"or damage)",
        )
    bound = 0 if declared >= 0 else (limit if limit is not None else 0)
    try:
        out: bytes = _zstd_context(zstd, "decompressor").decompress(
            body, max_output_size=bound
        )
    except (zstd.ZstdError, MemoryError) as exc:
        raise CorruptCheckpointError(
            place=place, detail=f"zstd decompression failed ({exc})"
        ) from exc
    if limit is not None and len(out) > limit:  # pragma: no cover - zstd keeps to it
        raise CorruptCheckpointError(place=place, detail="decompressed past the limit")
    return out
