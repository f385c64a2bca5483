"""Stores: where runs, journals, inputs and snapshots live, chosen by URL."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit

from resumable.errors import StoreError
from resumable.stores.capabilities import Capabilities
from resumable.stores.memory import MemoryStore
from resumable.stores.protocol import Store
from resumable.stores.sqlite import DEFAULT_PATH, SQLiteStore
from resumable.stores.urls import redact

DEFAULT_URL = f"sqlite:///{DEFAULT_PATH}"

__all__ = [
    "DEFAULT_URL",
    "MemoryStore",
    "SQLiteStore",
    "Store",
    "create_store",
    "open_store",
    "redact",
]


def create_store(url: str = DEFAULT_URL) -> Store:
    """The store a URL names, not yet connected.

    It opens (creating or migrating its schema) on first use. Drivers are imported only when their scheme is used; a
    missing one is reported with the extra to install. `?blobs=s3://bucket/prefix`
    (or `file:///folder`) on any URL offloads large payloads to that object store,
    those over `&blobs_over=N` bytes (default 256 KiB): see `stores.offload`.
    """
    url, blobs, offload_over = _split_blobs(url)
    if blobs is not None:
        from resumable.stores.blobref import REFERENCE_SIZE
        from resumable.stores.blobs import open_blobs
        from resumable.stores.offload import OffloadStore

        if offload_over < REFERENCE_SIZE:
            raise StoreError(
                store=redact(url),
                detail=f"blobs_over={offload_over} is smaller than a reference "
                f"({REFERENCE_SIZE} bytes): offloading would grow the rows",
            )
        return OffloadStore(
            create_store(url), open_blobs(blobs), offload_over=offload_over
        )
    scheme = urlsplit(url).scheme
    if scheme == "memory":
        return MemoryStore(url)
    if scheme == "sqlite":
        return SQLiteStore(url)
    if scheme in ("postgresql", "postgres"):
        try:
            from resumable.stores.postgres import PostgresStore
        except ImportError as exc:
            raise StoreError(
                store=redact(url),
                detail=f"needs psycopg ({exc}); pip install 'resumable[postgres]'",
            ) from exc
        return PostgresStore(url)
    if scheme in ("redis", "rediss"):
        try:
            from resumable.stores.redis import RedisStore
        except ImportError as exc:
            raise StoreError(
                store=redact(url),
                detail=f"needs redis-py ({exc}); pip install 'resumable[redis]'",
            ) from exc
        return RedisStore(url)
    raise StoreError(
        store=redact(url),
        detail="unknown scheme; use memory://, sqlite:///path.db, "
        "postgresql://... or redis://...",
    )


def _split_blobs(url: str) -> tuple[str, str | None, int]:
    """The URL without its `blobs` and `blobs_over` options, and their values."""
    from resumable.stores.offload import DEFAULT_OFFLOAD_OVER

    parts = urlsplit(url)
    if "blobs" not in parts.query:
        return url, None, DEFAULT_OFFLOAD_OVER
    options = parse_qsl(parts.query, keep_blank_values=True)
    rest = [(k, v) for k, v in options if k not in ("blobs", "blobs_over")]
    found = dict(options)
    over = found.get("blobs_over", str(DEFAULT_OFFLOAD_OVER))
    if not over.isdigit():
        raise StoreError(
            store=redact(url), detail=f"blobs_over={over!r} is not a number of bytes"
        )
    base = url.split("?", 1)[0]  # not geturl(): it turns sqlite://// into sqlite://
    return (
        f"{base}?{urlencode(rest)}" if rest else base,
        found.get("blobs") or None,
        int(over),
    )


async def open_store(url: str = DEFAULT_URL) -> Store:
    """The store a URL names, connected and migrated (errors surface here)."""
    store = create_store(url)
    opener = Capabilities.of(store).opener
    if opener is not None:
        await opener.open()
    return store
