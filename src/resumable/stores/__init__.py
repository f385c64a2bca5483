"""Stores: where runs, journals, inputs and snapshots live, chosen by URL."""

from __future__ import annotations

from urllib.parse import urlsplit

from resumable.errors import StoreError
from resumable.stores.memory import MemoryStore
from resumable.stores.protocol import Store
from resumable.stores.sqlite import DEFAULT_PATH, SQLiteStore

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


def redact(url: str) -> str:
    """The URL with any password replaced, fit for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def create_store(url: str = DEFAULT_URL) -> Store:
    """The store a URL names, not yet connected.

    It opens (creating or migrating its schema) on first use. Drivers are imported only when their scheme is used; a
    missing one is reported with the extra to install.
    """
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


async def open_store(url: str = DEFAULT_URL) -> Store:
    """The store a URL names, connected and migrated (errors surface here)."""
    store = create_store(url)
    opener = getattr(store, "open", None)
    if opener is not None:
        await opener()
    return store
