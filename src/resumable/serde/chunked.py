"""Frames sealed and opened a chunk at a time, for payloads that go to an object store.

`seal_chunks` turns a large body, given as pieces (`streams.Encoded`), into the
chunks of a sealed frame, so an upload can send them as they are made and the
frame is never whole in memory. Its frames are those `Envelope.open` reads:

```
plain:      [version][flags | 0x04][body][crc32 (4, big-endian)]
encrypted:  [version][flags][key id length][key id][nonce (12)][ciphertext][tag (16)]
```

A plain frame keeps its CRC-32 after the body (flag bit 2), as it is known only
once the body is written; an encrypted one is `Envelope.seal`'s layout, with
AES-GCM run as a stream and the same associated data (header and place), so
the frame opens only at the place it was written for. The body is compressed
whenever zstd is installed and it is longer than `compress_over`: the flags
are written first, so there is no second pass when compression does not pay
(random bytes grow by about 0.01%).

`FrameReader` does the reverse as chunks are downloaded: it decrypts and
decompresses each into one buffer of the body's size, allocated once (the size
a zstd frame declares, checked against the payload limit first), and checks
the CRC-32 or the GCM tag at the end. Its `Opened` body is what `Serde.loads`
decodes without opening anything again.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from resumable.errors import CorruptCheckpointError
from resumable.serde.integrity import Envelope, KeyRing
from resumable.serde.streams import SLICE, compressed

__all__ = ["FrameReader", "Opened", "SealedStream", "seal_chunks", "stored_size"]

_VERSION: Final = 1
_COMPRESSED: Final = 0x01
_ENCRYPTED: Final = 0x02
_TRAILER: Final = 0x04
_KNOWN: Final = _COMPRESSED | _ENCRYPTED | _TRAILER
_CRC: Final = struct.Struct(">I")
_NONCE: Final = 12
_TAG: Final = 16
_ZSTD_HEADER_MAX: Final = 18
_WRITE_SIZE: Final = 1 << 20
"""Decompressed bytes zstd hands over at a time: the most held beside the buffer."""


class Opened(bytearray):
    """A frame's body, opened and checked by a `FrameReader` (never bytes from a row).

    Its own type, so `Serde.loads` can tell it from a frame: a store's driver
    never returns one.
    """

    frame_size: int = 0
    """How long the stored frame it was opened from is (what was stored)."""
    _text: str | None = None

    def take_text(self) -> str:
        """The body as text (UTF-8, "surrogatepass"), its buffer freed in exchange.

        A large JSON body is parsed from its text: freeing the buffer first means
        a read holds the text and the value, not the buffer as well. The text is
        kept for the next call, and `body` encodes it back.

        Raises:
            UnicodeDecodeError: The body is not UTF-8.
        """
        if self._text is None:
            with memoryview(self) as view:
                text = str(view, "utf-8", "surrogatepass")
            self._text = text
            # its memory goes now, unless another reader holds a view of it
            with contextlib.suppress(BufferError):
                self.clear()
        return self._text

    def body(self) -> bytes:
        """The opened body's bytes, whether or not `take_text` took its buffer."""
        if self._text is None:
            return bytes(self)
        return self._text.encode("utf-8", "surrogatepass")


def stored_size(payload: bytes | bytearray | None) -> int:
    """How many bytes a payload took in storage: its frame's, for an `Opened` body."""
    if type(payload) is Opened:
        return payload.frame_size
    if isinstance(payload, bytes | bytearray):
        return len(payload)
    return 0  # None, or a damaged column (reading it is CorruptCheckpointError)


@dataclass(frozen=True, slots=True)
class SealedStream:
    """A sealed frame made on demand (`seal_chunks`)."""

    flags: int
    """The frame's flags byte (what a reference to it records as its codec)."""
    chunks: Callable[[], Iterator[bytes]]
    """A new iterator over the frame's bytes each call (a retried upload)."""


def _zstd() -> Any:
    try:
        return importlib.import_module("zstandard")
    except ImportError:
        return None


def seal_chunks(
    envelope: Envelope,
    size: int,
    pieces: Callable[[], Iterator[bytes]],
    *,
    place: str,
) -> SealedStream:
    """The frame of the body `pieces` make (`size` bytes long), a chunk at a time."""
    keys = envelope.keys
    over = envelope.compress_over
    zstd = _zstd() if over is not None and size > over else None
    flags = (_COMPRESSED if zstd is not None else 0) | (
        _TRAILER if keys is None else _ENCRYPTED
    )

    def body() -> Iterator[bytes]:
        if zstd is None:
            return pieces()
        # a fresh context: the chunks may be made on several threads in turn
        return compressed(zstd.ZstdCompressor(level=1), size, pieces())

    def chunks() -> Iterator[bytes]:
        if keys is None:
            header = bytes((_VERSION, flags))
            crc = zlib.crc32(header)
            yield header
            for chunk in body():
                crc = zlib.crc32(chunk, crc)
                yield chunk
            yield _CRC.pack(crc)
            return
        yield from _encrypted(keys, flags, body(), place)

    return SealedStream(flags, chunks)


def _encrypted(
    keys: KeyRing, flags: int, body: Iterator[bytes], place: str
) -> Iterator[bytes]:
    key_id = keys.current.encode("utf-8")
    header = bytes((_VERSION, flags, len(key_id))) + key_id
    nonce = os.urandom(_NONCE)
    encryptor = keys.gcm(keys.current, nonce, decrypt=False)
    encryptor.authenticate_additional_data(_aad(header, place))
    yield header + nonce
    for chunk in body:
        out: bytes = encryptor.update(chunk)
        if out:
            yield out
    yield encryptor.finalize() + encryptor.tag


def _aad(header: bytes, place: str) -> bytes:
    # integrity._associated_data: the same bytes, so either side opens the other's
    return header + place.encode("utf-8", "surrogatepass")


class _Sink:
    """Where zstd writes: the preallocated body, never past its end."""

    def __init__(self, reader: FrameReader) -> None:
        self._reader = reader

    def write(self, data: bytes) -> int:
        self._reader.put(data)
        return len(data)


class FrameReader:
    """Opens a frame fed a chunk at a time into one buffer (see the module docstring).

    Args:
        envelope: Its keys and payload limit are the ones `open` would use.
        frame_size: The whole frame's length (the object's size).
        place: Where the frame was stored (the associated data it was sealed with).
    """

    def __init__(self, envelope: Envelope, *, frame_size: int, place: str) -> None:
        self._envelope = envelope
        self._frame_size = frame_size
        self._place = place
        self._head = bytearray()  # the frame's first bytes, until the header is read
        self._tail_size = 0  # bytes held back: the CRC-32 trailer or the GCM tag
        self._tail = b""
        self._started = False
        self._flags = 0
        self._crc = 0
        self._stored_crc: int | None = None
        self._decryptor: Any = None
        self._decompressor: Any = None
        self._zstd_head = bytearray()
        self._body: Opened | None = None
        self._view: memoryview | None = None
        self._filled = 0

    def _corrupt(self, detail: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(place=self._place, detail=detail)

    def feed(self, chunk: bytes | memoryview) -> None:
        """Take the next bytes of the frame."""
        if not self._started:
            self._head += chunk
            if not self._start():
                return
            chunk, self._head = bytes(self._head), bytearray()
            chunk = chunk[self._header_size :]
        if len(chunk) < self._tail_size:  # a short chunk: join it to the tail
            data = self._tail + bytes(chunk)
            keep = max(0, len(data) - self._tail_size)
            self._tail = data[keep:]
            if keep:
                self._stored(memoryview(data)[:keep])
            return
        # the held-back tail is body after all; the chunk's own end is held back
        # instead (the chunk is never copied to join them)
        view = memoryview(chunk)
        if self._tail:
            self._stored(memoryview(self._tail))
        keep = len(view) - self._tail_size
        self._tail = bytes(view[keep:])
        if keep:
            self._stored(view[:keep])

    def _start(self) -> bool:
        """Parse the header once enough of it is here; False until it is."""
        head = self._head
        if len(head) < 3:
            return False
        flags = head[1]
        if head[0] != _VERSION:
            raise self._corrupt(f"unknown frame version {head[0]}")
        if flags & ~_KNOWN or (flags & _TRAILER and flags & _ENCRYPTED):
            raise self._corrupt(f"unknown flags {flags:#04x}")
        if flags & _ENCRYPTED:
            self._header_size = 3 + head[2] + _NONCE
            if len(head) < self._header_size:
                return False
            self._start_decrypting(bytes(head[: 3 + head[2]]), head)
            self._tail_size = _TAG
        elif flags & _TRAILER:
            self._header_size, self._tail_size = 2, _CRC.size
        else:  # the one-shot layout: the CRC-32 is in the header
            self._header_size = 2 + _CRC.size
            if len(head) < self._header_size:
                return False
            (self._stored_crc,) = _CRC.unpack_from(head, 2)
        if self._envelope.keys is not None and not flags & _ENCRYPTED:
            raise self._corrupt("the frame is not encrypted but encryption is on")
        self._flags = flags
        self._crc = zlib.crc32(head[:2])
        self._started = True
        if not flags & _COMPRESSED:
            size = self._frame_size - self._header_size - self._tail_size
            self._allocate(size)
        return True

    def _start_decrypting(self, header: bytes, head: bytearray) -> None:
        keys = self._envelope.keys
        if keys is None:
            raise self._corrupt(
                "the frame is encrypted but no key is configured "
                "(set RESUMABLE_ENCRYPTION_KEY)"
            )
        try:
            key_id = header[3:].decode("utf-8")
        except UnicodeDecodeError:
            raise self._corrupt("the key id is not valid UTF-8") from None
        nonce = bytes(head[len(header) : len(header) + _NONCE])
        # the tag comes last: the decryptor checks it when finalized with it
        self._decryptor = keys.gcm(key_id, nonce, decrypt=True)
        if self._decryptor is None:
            raise self._corrupt(
                f"encrypted with key id {key_id!r}, which is not in the key ring "
                f"{list(keys.ids)}; add that key to RESUMABLE_ENCRYPTION_KEY"
            )
        self._decryptor.authenticate_additional_data(_aad(header, self._place))

    def _allocate(self, size: int) -> None:
        limit = self._envelope.max_body_bytes
        if size < 0:
            raise self._corrupt("truncated frame")
        if limit is not None and size > limit:
            raise self._corrupt(
                f"its body is {size:,} bytes, over the {limit:,}-byte payload limit "
                f"no write can pass (Engine(max_payload_bytes=...))"
            )
        self._body = Opened(size)
        self._body.frame_size = self._frame_size
        self._view = memoryview(self._body)

    def _stored(self, data: memoryview) -> None:
        """The stored body's next bytes (ciphertext, or the body as written)."""
        if self._flags & _ENCRYPTED:
            data = memoryview(self._decryptor.update(data))
        else:
            self._crc = zlib.crc32(data, self._crc)
        if not self._flags & _COMPRESSED:
            self.put(data)
            return
        decompressor = self._decompressor
        if decompressor is None:
            self._zstd_head += data  # until the zstd frame's header is all here
            if len(self._zstd_head) < _ZSTD_HEADER_MAX:
                return
            data, self._zstd_head = memoryview(bytes(self._zstd_head)), bytearray()
            decompressor = self._start_decompressing(data)
        self._decompress(decompressor, data)

    def _decompress(self, decompressor: Any, data: memoryview) -> None:
        """Feed `data` to the zstd writer; damage zstd finds is CorruptCheckpointError."""
        try:
            for at in range(0, len(data), SLICE):
                decompressor.write(data[at : at + SLICE])
        except _zstd().ZstdError as exc:  # the CRC, checked at the end, comes later
            raise self._corrupt(f"its compressed body is damaged ({exc})") from exc

    def _start_decompressing(self, first: memoryview) -> Any:
        """The zstd writer into the body, once the size it declares is allowed."""
        zstd = _zstd()
        if zstd is None:
            raise self._corrupt(
                "the frame is zstd-compressed and the zstandard package is "
                "missing: pip install 'resumable[zstd]'"
            )
        try:
            declared: int = zstd.frame_content_size(bytes(first[:_ZSTD_HEADER_MAX]))
        except zstd.ZstdError as exc:
            raise self._corrupt(f"not a zstd frame ({exc})") from exc
        if declared < 0:
            raise self._corrupt("the zstd frame declares no size")
        self._allocate(declared)
        self._decompressor = zstd.ZstdDecompressor().stream_writer(
            _Sink(self), write_size=_WRITE_SIZE, closefd=False
        )
        return self._decompressor

    def put(self, data: bytes | memoryview) -> None:
        """Write opened body bytes at the end of what is filled."""
        view = self._view
        end = self._filled + len(data)
        if view is None or end > len(view):
            raise self._corrupt("the body is longer than its frame says")
        view[self._filled : end] = data
        self._filled = end

    def finish(self) -> Opened:
        """The body, once its CRC-32 or GCM tag and its length check out.

        Raises:
            CorruptCheckpointError: They do not, or the frame is cut short.
        """
        if not self._started or len(self._tail) != self._tail_size:
            raise self._corrupt("truncated frame")
        if self._flags & _ENCRYPTED:
            try:
                rest = self._decryptor.finalize_with_tag(self._tail)
            except Exception:  # noqa: BLE001 - cryptography's InvalidTag
                raise self._corrupt(
                    "decryption failed: the data was altered, was written for "
                    "another place, or the key differs from the one that wrote it"
                ) from None
            if rest:
                self._stored(memoryview(rest))
        else:
            stored = (
                _CRC.unpack(self._tail)[0]
                if self._stored_crc is None
                else self._stored_crc
            )
            if stored != self._crc:
                raise self._corrupt("checksum mismatch")
        if self._zstd_head:  # a compressed body shorter than a zstd header
            head, self._zstd_head = memoryview(bytes(self._zstd_head)), bytearray()
            self._decompress(self._start_decompressing(head), head)
        body = self._body
        if body is None or self._filled != len(body):
            raise self._corrupt("the body is shorter than its frame says")
        self._view = None
        return body
