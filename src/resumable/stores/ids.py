"""The one limit on ids, valid on every store.

Run ids, thread ids, namespaces, checkpoint ids, step and workflow names, input
keys and queue names are at most `MAX_ID_BYTES` bytes as the SQL stores keep
them (UTF-8, with `%`, NUL and lone surrogates escaped). Three of them fit in one
PostgreSQL index entry (2,704 bytes at most), the tightest limit of any store;
SQLite and Redis take more, but a run must be movable between stores, so an id
one store takes is taken by all. The engine checks ids against it before
anything is written (`resumable._engine.ids`).
"""

from __future__ import annotations

from typing import Final

from resumable.stores._sql import to_text

__all__ = ["MAX_ID_BYTES", "stored_size"]

MAX_ID_BYTES: Final = 512


def stored_size(value: str) -> int:
    """The bytes an id takes in a store (its escaped UTF-8)."""
    return len(to_text(value).encode("utf-8"))
