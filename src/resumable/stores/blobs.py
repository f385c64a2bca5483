"""Object stores for offloaded payloads: a local folder or an S3-compatible bucket.

A `BlobStore` keeps opaque objects by key. The offload layer
(`resumable.stores.offload`) is its only writer: keys are content addresses it
makes (`sha256/ab/abcd...`), and objects are sealed frames (compressed and, with
encryption on, encrypted) that this module never reads into.

`open_blobs(url)` picks one by scheme:

- `file:///path/to/dir`: a folder on this machine (stdlib only). Each object is
  written to a temporary file, fsynced and renamed into place.
- `s3://bucket/prefix`: any S3 API (AWS, MinIO, R2, moto), through `obstore`
  (`pip install 'resumable[s3]'`). Credentials, region and endpoint come from the
  usual `AWS_*` environment variables (`AWS_ENDPOINT_URL` for another service,
  `AWS_ALLOW_HTTP=true` for a plain-HTTP one), or from `S3Blobs(config=...)`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import tempfile
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable
from urllib.parse import unquote, urlsplit

from resumable.errors import StoreError
from resumable.stores.segments import (
    MANIFEST_MAX,
    Manifest,
    put_segmented,
    segment_chunks,
)

__all__ = [
    "BlobInfo",
    "BlobMissing",
    "BlobStore",
    "BlobUnavailable",
    "FileBlobs",
    "S3Blobs",
    "SegmentedBlobs",
    "StreamingBlobs",
    "open_blobs",
    "temp_key",
]

PART_BYTES: Final = 8 * 1024 * 1024
"""S3 objects larger than this are read in chunks of it into one buffer."""
_PART_CONCURRENCY: Final = 4
"""Segments of a streamed upload sent at once (`stores.segments`)."""
_READ_AHEAD: Final = 5
"""Segments of a streamed object held at once when it is read (a memory bound:
5 x 8 MiB): the one being checked and opened, and 4 requested behind it, so that
one request's latency hides behind another."""

TEMP_PREFIX: Final = "tmp/"
"""Where streamed uploads land before they are moved to their content address."""

_KEY = re.compile(r"[a-z0-9]+(/[a-z0-9]+)*")
"""Keys are lowercase hex segments: no '..', no absolute path, nothing to escape."""


class BlobMissing(Exception):
    """The object store answered, and it holds no object under the key."""


class BlobUnavailable(Exception):
    """The object store did not answer (down, refused, timed out, denied)."""


@dataclass(frozen=True, slots=True)
class BlobInfo:
    """One stored object, as a listing shows it."""

    key: str
    size: int
    modified_at_ms: int


@runtime_checkable
class BlobStore(Protocol):
    """Objects by key. Raises `BlobMissing` or `BlobUnavailable`, never driver errors."""

    url: str
    """Where the objects live (for messages)."""

    async def put(self, key: str, data: bytes) -> None:
        """Store `data` under `key`, durably, replacing what was there."""
        ...

    async def get(self, key: str) -> bytes | bytearray:
        """The object under `key` (a store that reads it in chunks fills a bytearray)."""
        ...

    async def delete(self, key: str) -> None:
        """Remove the object under `key`; no error if there is none."""
        ...

    async def info(self, key: str) -> BlobInfo:
        """The object's size and modification time."""
        ...

    async def listing(self) -> list[BlobInfo]:
        """Every object the store holds."""
        ...

    async def close(self) -> None:
        """Release clients; idempotent."""
        ...


@runtime_checkable
class StreamingBlobs(BlobStore, Protocol):
    """A `BlobStore` that takes and gives objects a chunk at a time.

    An object whose key is the hash of its bytes is uploaded under a temporary
    key (`temp_key()`) while it is hashed, then moved to its key: a crash in
    between leaves an object no row references, which `collect_garbage` deletes
    once it is older than its grace period.
    """

    async def put_stream(self, key: str, chunks: AsyncIterator[bytes]) -> None:
        """Store the chunks' bytes under `key`, durably, replacing what was there."""
        ...

    async def move(self, key: str, to: str) -> None:
        """Put the object under `key` at `to` (whole or not at all), then drop `key`."""
        ...

    async def get_stream(self, key: str) -> AsyncIterator[bytes | memoryview]:
        """The object under `key` a chunk at a time (BlobMissing before the first)."""
        ...


@runtime_checkable
class SegmentedBlobs(BlobStore, Protocol):
    """A `BlobStore` that may keep an object as segments and a manifest.

    See `stores.segments`. `collect_garbage` asks which segments a referenced
    object is made of; it deletes no segment in a store that cannot say.
    """

    async def segments(self, key: str) -> list[str]:
        """The keys of the segments the object under `key` is made of ([] if whole)."""
        ...


def temp_key() -> str:
    """A fresh temporary key for a streamed upload."""
    return TEMP_PREFIX + uuid.uuid4().hex


def is_object_key(key: object) -> bool:
    """Whether `key` is one the offload layer makes (no '', '..' or absolute path)."""
    return type(key) is str and _KEY.fullmatch(key) is not None


def check_key(key: str) -> str:
    """`key` if it is one the offload layer makes; ValueError otherwise."""
    if not is_object_key(key):
        raise ValueError(f"not an object key: {key[:80]!r}")
    return key


class FileBlobs:
    """Objects as files under a folder (created on first write)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.url = self.root.as_uri() if self.root.is_absolute() else str(self.root)

    def __repr__(self) -> str:
        return f"FileBlobs({str(self.root)!r})"

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    async def put(self, key: str, data: bytes) -> None:
        await asyncio.to_thread(self._put, self._path(key), data)

    @staticmethod
    def _put(path: Path, data: bytes) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".put-")
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(temp, path)  # whole or not at all, never a torn object
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise
        except OSError as exc:
            raise BlobUnavailable(f"cannot write {path}: {exc}") from exc

    async def put_stream(self, key: str, chunks: AsyncIterator[bytes]) -> None:
        path = self._path(key)
        try:
            await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
            out = await asyncio.to_thread(open, path, "wb")
        except OSError as exc:
            raise BlobUnavailable(f"cannot write {path}: {exc}") from exc
        try:
            with out:
                async for chunk in chunks:
                    await asyncio.to_thread(out.write, chunk)
                await asyncio.to_thread(out.flush)
                await asyncio.to_thread(os.fsync, out.fileno())
        except OSError as exc:
            raise BlobUnavailable(f"cannot write {path}: {exc}") from exc

    async def move(self, key: str, to: str) -> None:
        await asyncio.to_thread(self._move, self._path(key), self._path(to))

    @staticmethod
    def _move(source: Path, target: Path) -> None:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)  # atomic: the object is whole or absent
            folder = os.open(target.parent, os.O_RDONLY)
            try:
                os.fsync(folder)  # the rename itself survives a power cut
            finally:
                os.close(folder)
        except FileNotFoundError:
            raise BlobMissing(source.name) from None
        except OSError as exc:
            raise BlobUnavailable(f"cannot move {source} to {target}: {exc}") from exc

    async def get_stream(self, key: str) -> AsyncIterator[bytes]:
        path = self._path(key)
        try:
            source = await asyncio.to_thread(open, path, "rb")
        except FileNotFoundError:
            raise BlobMissing(key) from None
        except OSError as exc:
            raise BlobUnavailable(f"cannot read {path}: {exc}") from exc
        return _file_chunks(source, path)

    async def get(self, key: str) -> bytes | bytearray:
        path = self._path(key)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            raise BlobMissing(key) from None
        except OSError as exc:
            raise BlobUnavailable(f"cannot read {path}: {exc}") from exc

    async def delete(self, key: str) -> None:
        path = self._path(key)
        try:
            await asyncio.to_thread(path.unlink, missing_ok=True)
        except OSError as exc:
            raise BlobUnavailable(f"cannot delete {path}: {exc}") from exc

    async def info(self, key: str) -> BlobInfo:
        path = self._path(key)
        try:
            stat = await asyncio.to_thread(path.stat)
        except FileNotFoundError:
            raise BlobMissing(key) from None
        except OSError as exc:
            raise BlobUnavailable(f"cannot stat {path}: {exc}") from exc
        return BlobInfo(key, stat.st_size, stat.st_mtime_ns // 1_000_000)

    async def listing(self) -> list[BlobInfo]:
        return await asyncio.to_thread(self._listing)

    def _listing(self) -> list[BlobInfo]:
        found: list[BlobInfo] = []
        if not self.root.is_dir():
            return found
        for folder, _, files in os.walk(self.root):
            for name in files:
                path = Path(folder, name)
                key = path.relative_to(self.root).as_posix()
                if not _KEY.fullmatch(key):
                    continue  # a temporary file, or something that is not ours
                with contextlib.suppress(FileNotFoundError):
                    stat = path.stat()
                    found.append(
                        BlobInfo(key, stat.st_size, stat.st_mtime_ns // 1_000_000)
                    )
        return found

    async def close(self) -> None:
        return None


class S3Blobs:
    """Objects in an S3-compatible bucket, through obstore.

    Args:
        url: `s3://bucket` or `s3://bucket/prefix`.
        config: obstore `S3Config` values (`endpoint`, `region`,
            `access_key_id`, ...), over those read from the `AWS_*` environment.
        timeout_s: How long one request may take before it fails.
        retries: How many times obstore retries a failed request.

    Raises:
        StoreError: obstore is not installed, or the URL is not an S3 URL.
    """

    def __init__(
        self,
        url: str,
        *,
        config: Mapping[str, Any] | None = None,
        timeout_s: float = 60.0,
        retries: int = 2,
    ) -> None:
        try:
            from obstore.store import S3Store
        except ImportError as exc:
            raise StoreError(
                store=url,
                detail=f"needs obstore ({exc}); pip install 'resumable[s3]'",
            ) from exc
        import obstore

        self.url = url
        self._obstore = obstore
        options = dict(config or {})
        endpoint = str(
            options.get("endpoint") or os.environ.get("AWS_ENDPOINT_URL", "")
        )
        client: dict[str, Any] = {
            "connect_timeout": timedelta(seconds=min(timeout_s, 5.0)),
            "timeout": timedelta(seconds=timeout_s),
        }
        if endpoint.startswith("http://"):
            client["allow_http"] = True
        try:
            self._store = S3Store.from_url(
                url,
                config=options,  # type: ignore[arg-type]  # S3Config keys, checked by obstore
                client_options=client,  # type: ignore[arg-type]  # ClientConfig keys
                retry_config={
                    "max_retries": retries,
                    "retry_timeout": timedelta(seconds=timeout_s),
                },
            )
        except Exception as exc:  # obstore raises its own config errors
            raise StoreError(store=url, detail=f"cannot configure S3 ({exc})") from exc

    def __repr__(self) -> str:
        return f"S3Blobs({self.url!r})"

    def _errors(self, key: str, exc: Exception) -> Exception:
        # obstore raises FileNotFoundError for a missing object, its own errors or
        # OSError subclasses (connection refused, timed out) for the rest
        if isinstance(exc, FileNotFoundError | self._obstore.exceptions.NotFoundError):
            return BlobMissing(key)
        return BlobUnavailable(f"{self.url}: {type(exc).__name__}: {exc}")

    async def put(self, key: str, data: bytes | bytearray) -> None:
        # one plain PUT, never a multipart upload: a request cut short by a crash
        # leaves nothing, where a multipart upload would leave parts no listing
        # shows and no other process can abort (S3 takes up to 5 GB this way)
        try:
            await self._obstore.put_async(
                self._store, check_key(key), data, use_multipart=False
            )
        except (self._obstore.exceptions.BaseError, OSError) as exc:
            raise self._errors(key, exc) from exc

    async def get(self, key: str) -> bytes | bytearray:
        try:
            result = await self._obstore.get_async(self._store, check_key(key))
            size = result.meta["size"]
            if size <= PART_BYTES:
                data = bytes(await result.bytes_async())
                manifest = Manifest.parse(data) if size <= MANIFEST_MAX else None
                if manifest is None:
                    return data
                return await self._joined(manifest)
            # one buffer of the object's size, filled as chunks arrive: the whole
            # object is never held twice (once by obstore, once here)
            buffer = bytearray(size)
            view = memoryview(buffer)
            filled = 0
            async for chunk in result.stream(min_chunk_size=PART_BYTES):
                end = filled + len(chunk)
                if end > size:
                    break
                view[filled:end] = chunk
                filled = end
        except (self._obstore.exceptions.BaseError, OSError) as exc:
            raise self._errors(key, exc) from exc
        if filled != size:
            raise BlobUnavailable(
                f"{self.url}: object {key} sent {filled:,}+ bytes, not the {size:,} "
                f"its listing says (it changed while being read); try again"
            )
        return buffer

    async def _joined(self, manifest: Manifest) -> bytearray:
        """The object a manifest stands for, in one buffer (see `stores.segments`)."""
        buffer = bytearray(manifest.size)
        view = memoryview(buffer)
        filled = 0
        async for chunk in segment_chunks(self.segment, manifest, ahead=_READ_AHEAD):
            end = filled + len(chunk)
            if end > len(buffer):
                break  # a segment longer than its manifest says: the hash check fails
            view[filled:end] = chunk
            filled = end
            del chunk  # let it go before the next is asked for (the read-ahead bound)
        return buffer

    async def segment(self, key: str) -> memoryview:
        """One segment of a streamed object, in the response's own buffer (no copy)."""
        try:
            result = await self._obstore.get_async(self._store, check_key(key))
            return memoryview(await result.bytes_async())
        except (self._obstore.exceptions.BaseError, OSError) as exc:
            raise self._errors(key, exc) from exc

    async def segments(self, key: str) -> list[str]:
        try:
            result = await self._obstore.get_async(self._store, check_key(key))
            if result.meta["size"] > MANIFEST_MAX:
                return []
            manifest = Manifest.parse(bytes(await result.bytes_async()))
        except (self._obstore.exceptions.BaseError, OSError) as exc:
            raise self._errors(key, exc) from exc
        return [] if manifest is None else manifest.keys

    async def put_stream(self, key: str, chunks: AsyncIterator[bytes]) -> None:
        # plain PUTs of segments and a manifest (`stores.segments`), not a
        # multipart upload: a crash leaves only whole objects, which gc collects
        await put_segmented(self.put, key, chunks, in_flight=_PART_CONCURRENCY)

    async def move(self, key: str, to: str) -> None:
        # a server-side copy (whole or not at all), then the temporary is deleted;
        # S3's CopyObject takes objects of up to 5 GB
        try:
            await self._obstore.copy_async(self._store, check_key(key), check_key(to))
        except (self._obstore.exceptions.BaseError, OSError) as exc:
            raise self._errors(key, exc) from exc
        await self.delete(key)

    async def get_stream(self, key: str) -> AsyncIterator[bytes | memoryview]:
        try:
            result = await self._obstore.get_async(self._store, check_key(key))
            if result.meta["size"] <= MANIFEST_MAX:
                data = bytes(await result.bytes_async())
                manifest = Manifest.parse(data)
                if manifest is not None:
                    return segment_chunks(self.segment, manifest, ahead=_READ_AHEAD)
                return _one(data)
        except (self._obstore.exceptions.BaseError, OSError) as exc:
            raise self._errors(key, exc) from exc
        return self._chunks(key, result.stream(min_chunk_size=PART_BYTES))

    async def _chunks(self, key: str, stream: Any) -> AsyncIterator[bytes]:
        try:
            async for chunk in stream:
                yield chunk
        except (self._obstore.exceptions.BaseError, OSError) as exc:
            raise self._errors(key, exc) from exc

    async def delete(self, key: str) -> None:
        try:
            await self._obstore.delete_async(self._store, check_key(key))
        except (self._obstore.exceptions.BaseError, OSError) as exc:
            error = self._errors(key, exc)
            if not isinstance(error, BlobMissing):
                raise error from exc

    async def info(self, key: str) -> BlobInfo:
        try:
            meta = await self._obstore.head_async(self._store, check_key(key))
        except (self._obstore.exceptions.BaseError, OSError) as exc:
            raise self._errors(key, exc) from exc
        return BlobInfo(
            key, meta["size"], int(meta["last_modified"].timestamp() * 1000)
        )

    async def listing(self) -> list[BlobInfo]:
        found: list[BlobInfo] = []
        try:
            async for batch in self._obstore.list(self._store):
                found.extend(
                    BlobInfo(
                        meta["path"],
                        meta["size"],
                        int(meta["last_modified"].timestamp() * 1000),
                    )
                    for meta in batch
                    if _KEY.fullmatch(meta["path"])
                )
        except (self._obstore.exceptions.BaseError, OSError) as exc:
            raise self._errors("", exc) from exc
        return found

    async def close(self) -> None:
        return None


async def _one(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def _file_chunks(source: Any, path: Path) -> AsyncIterator[bytes]:
    with source:
        while True:
            try:
                chunk: bytes = await asyncio.to_thread(source.read, PART_BYTES)
            except OSError as exc:
                raise BlobUnavailable(f"cannot read {path}: {exc}") from exc
            if not chunk:
                return
            yield chunk


def open_blobs(url: str) -> BlobStore:
    """The object store a `file://` or `s3://` URL names.

    Raises:
        StoreError: an unknown scheme, or obstore missing for s3://.
    """
    parts = urlsplit(url)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise StoreError(store=url, detail="file:// URLs name a local folder")
        return FileBlobs(unquote(parts.path))
    if parts.scheme in ("s3", "s3a"):
        return S3Blobs(url)
    raise StoreError(
        store=url,
        detail="unknown object store scheme; use s3://bucket/prefix or file:///folder",
    )
