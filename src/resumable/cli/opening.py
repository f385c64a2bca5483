"""How a command opens its store: the commands that only read never create one.

A store URL gets the `mode` option (SQLite's, `resumable.stores.sqlite`, which the
PostgreSQL and Redis stores read the same way): `ro` for a command that only reads
(the file, schema or prefix must hold a store, which is neither written nor
migrated), `rw` for one that never creates a store but may change it (`ui`). A mode
the user put in the URL, and the memory store's URL, are left as they are.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

__all__ = ["for_reading", "for_reading_and_writing"]

_MODAL = frozenset({"sqlite", "postgresql", "postgres", "redis", "rediss", "unix"})
"""The schemes of the stores that read `mode=`."""


def for_reading(url: str) -> str:
    """The URL a command that only reads opens: an existing SQLite file, read-only."""
    return _with_mode(url, "ro")


def for_reading_and_writing(url: str) -> str:
    """The URL a command that never creates a store opens (an existing SQLite file)."""
    return _with_mode(url, "rw")


def _with_mode(url: str, mode: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in _MODAL or "mode" in dict(parse_qsl(parts.query)):
        return url  # other stores, and a mode the user chose
    return f"{url}{'&' if parts.query else '?'}mode={mode}"
