"""Serde: what turns values into stored bytes and back.

`Codec` encodes values as tagged JSON and rebuilds them from a `TypeRegistry`
allowlist; `Envelope` frames the bytes with a checksum and optional zstd
compression and AES-GCM encryption; `Serde` is the two together, which is what
the engine and the callers of stores use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from resumable.errors import CorruptCheckpointError, SerializationError
from resumable.serde.bounds import max_values
from resumable.serde.chunked import FrameReader, Opened, SealedStream, seal_chunks
from resumable.serde.codec import Codec, DecodeError, TypeRegistry
from resumable.serde.integrity import Envelope, KeyRing
from resumable.serde.streams import STREAM_OVER, Encoded
from resumable.serde.view import ViewLimits, view_body

__all__ = ["Codec", "DecodeError", "Envelope", "KeyRing", "Serde", "TypeRegistry"]


class Serde:
    """A codec and an envelope: values in, checked (and sealed) bytes out.

    Args:
        registry: The allowlist of types to rebuild; a new empty one if None.
        keys: Encrypt with AES-256-GCM and refuse plaintext frames.
        compress_over: zstd-compress encoded bodies longer than this (None: never).
        max_bytes: Refuse to store a value encoded to more than this many bytes,
            and to decode stored data that is (or decompresses to) more: no read
            allocates past it, whatever the stored bytes say (None: no limit).
            It also bounds the values a body may hold, so that what a decode
            builds is bounded too (`resumable.serde.bounds`).

    Raises:
        ImportError: `keys` is given but `cryptography` is not installed.
    """

    def __init__(
        self,
        registry: TypeRegistry | None = None,
        *,
        keys: KeyRing | None = None,
        compress_over: int | None = 1024,
        max_bytes: int | None = None,
    ) -> None:
        self.registry: TypeRegistry = TypeRegistry() if registry is None else registry
        # what a body may hold, beside its bytes: see resumable.serde.bounds
        self.codec: Codec = Codec(
            self.registry,
            max_values=None if max_bytes is None else max_values(max_bytes),
        )
        self.envelope: Envelope = Envelope(
            keys=keys, compress_over=compress_over, max_body_bytes=max_bytes
        )
        self.max_bytes = max_bytes
        # a view reads what this serde may write, and no more
        self._view_limits = (
            ViewLimits() if max_bytes is None else ViewLimits(max_bytes=max_bytes)
        )
        # the codec's own method, not a wrapper: a resume asks once per replayed step
        self.fingerprint: Callable[[object], str] = self.codec.fingerprint
        """A stable 16-hex-digit digest of a value; never raises."""

    def __repr__(self) -> str:
        return f"Serde({self.registry!r}, {self.envelope!r})"

    def dumps(self, value: object, *, place: str, root: str = "result") -> bytes:
        """Encode and seal a value for storage at `place` (e.g. "run 'x' step #3").

        Raises:
            SerializationError: The value cannot be encoded; the caller adds the run
                and step it belongs to.
        """
        if type(value) is str and len(value) <= STREAM_OVER:
            # the hot path (most step results are short text)
            return self._seal(self.codec.encode(value), place=place, root=root)
        encoded = self.codec.encode_stream(value, root=root)
        if type(encoded) is bytes:
            return self._seal(encoded, place=place, root=root)
        # a large value, encoded a slice at a time as it is sealed
        assert isinstance(encoded, Encoded)  # noqa: S101 - for the type checker
        if self.max_bytes is not None and encoded.size > self.max_bytes:
            raise self._too_large(encoded.size, root)
        return self.envelope.seal_stream(encoded.size, encoded.pieces, place=place)

    def dumps_stream(
        self, value: object, *, place: str, root: str = "result"
    ) -> bytes | SealedStream:
        """`dumps`, or a large value's frame made on demand, a chunk at a time.

        Values encoded to more than `STREAM_OVER` bytes get a `SealedStream`
        (`chunked.seal_chunks`), for an upload that never holds the frame whole.

        Raises:
            SerializationError: As `dumps`.
        """
        if type(value) is str and len(value) <= STREAM_OVER:
            return self._seal(self.codec.encode(value), place=place, root=root)
        encoded = self.codec.encode_stream(value, root=root)
        if type(encoded) is bytes:
            return self._seal(encoded, place=place, root=root)
        assert isinstance(encoded, Encoded)  # noqa: S101 - for the type checker
        if self.max_bytes is not None and encoded.size > self.max_bytes:
            raise self._too_large(encoded.size, root)
        return seal_chunks(self.envelope, encoded.size, encoded.pieces, place=place)

    def reader(self, *, frame_size: int, place: str) -> FrameReader:
        """An opener of a frame of `frame_size` bytes fed a chunk at a time."""
        return FrameReader(self.envelope, frame_size=frame_size, place=place)

    def dumps_json(self, value: dict[str, Any] | list[Any], *, place: str) -> bytes:
        """`dumps` for a dict or list built only of JSON's own types (`Codec.encode_json`)."""
        return self._seal(self.codec.encode_json(value), place=place, root="result")

    def _seal(self, body: bytes, *, place: str, root: str) -> bytes:
        if self.max_bytes is not None and len(body) > self.max_bytes:
            raise self._too_large(len(body), root)
        return self.envelope.seal(body, place=place)

    def _too_large(self, size: int, root: str) -> SerializationError:
        return SerializationError(
            path=root,
            detail=f"is {size:,} bytes encoded, over the {self.max_bytes or 0:,}-byte "
            f"limit (Engine(max_payload_bytes=...)); keep large data outside the store "
            f"and return a reference to it (a path, a URL, an object key)",
        )

    def loads(self, data: bytes | bytearray, *, place: str) -> Any:
        """Open and decode bytes written by `dumps` for the same place.

        Raises:
            CorruptCheckpointError: The frame fails its checks or does not decode.
            SerializationError: The data names a type that is not registered.
        """
        body: bytes | memoryview | Opened
        if type(data) is bytes and len(data) <= STREAM_OVER:  # a row's usual payload
            body = self.envelope.open(data, place=place)
        elif type(data) is Opened:  # a body a FrameReader already checked and opened
            body = data
        elif not isinstance(data, bytes | bytearray | memoryview):
            raise _not_bytes(data, place)
        elif len(data) <= STREAM_OVER:
            body = self.envelope.open(data, place=place)
        else:  # a large payload: its body is decoded from a view of the frame
            body = self.envelope.open_view(data, place=place)
        return self.decode(body, place=place)

    def decode(self, body: bytes | memoryview | Opened, *, place: str) -> Any:
        """Decode a body `Envelope.open` returned for `place`, with typed errors only.

        Raises:
            CorruptCheckpointError: The body is not a payload the codec wrote.
            SerializationError: The data names a type that is not registered.
        """
        try:
            return self.codec.decode(body)
        except DecodeError as exc:
            raise CorruptCheckpointError(place=place, detail=str(exc)) from exc
        except MemoryError as exc:  # within the size limit, yet too much to build
            raise CorruptCheckpointError(
                place=place, detail="decoding it ran out of memory"
            ) from exc

    def view(self, data: bytes | bytearray, *, place: str) -> Any:
        """Open bytes written by `dumps` and return their generic view.

        Plain JSON-like data that names the type of every tagged value, built
        without importing or constructing anything (see `resumable.serde.view`),
        so it works for values of types this process never registered.

        Raises:
            CorruptCheckpointError: The frame fails its checks, the value is over
                the payload limit, or it is not a payload the codec wrote.
        """
        if type(data) is Opened:  # already opened by a FrameReader
            body = data.body()
        elif not isinstance(data, bytes | bytearray | memoryview):
            raise _not_bytes(data, place)
        else:
            body = self.envelope.open(data, place=place)
        return view_body(body, place=place, limits=self._view_limits)

    def view_opened(self, body: bytes, *, place: str) -> Any:
        """`view` of a body its envelope was already opened for (a snapshot chunk)."""
        return view_body(body, place=place, limits=self._view_limits)


def _not_bytes(data: object, place: str) -> CorruptCheckpointError:
    """A stored payload a driver returned as something else (an altered column)."""
    return CorruptCheckpointError(
        place=place,
        detail=f"it is stored as {type(data).__name__} {data!r:.40}, not as the "
        f"bytes of a payload",
    )
