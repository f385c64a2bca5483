"""The one limit on ids, valid on every store, checked before anything is written.

Run ids, thread ids, namespaces, checkpoint ids, step and workflow names, input
keys and queue names are at most `MAX_ID_BYTES` bytes as the SQL stores keep
them (UTF-8, with `%`, NUL and lone surrogates escaped: see `stores._sql.to_text`).
Three of them fit in one PostgreSQL index entry (2,704 bytes at most), the
tightest limit of any store; SQLite and Redis take more, but a run must be
movable between stores, so an id one store takes is taken by all.
"""

from __future__ import annotations

import hashlib
import secrets
import time

from resumable.stores._sql import to_text

MAX_ID_BYTES = 512


def stored_size(value: str) -> int:
    """The bytes an id takes in a store (its escaped UTF-8)."""
    return len(to_text(value).encode("utf-8"))


def check_id(kind: str, value: str) -> str:
    """`value`, if it is a str within the limit.

    Raises:
        TypeError: It is not a str.
        ValueError: It is longer than MAX_ID_BYTES once stored.
    """
    if type(value) is not str:
        raise TypeError(f"a {kind} must be a str, not {type(value).__name__}")
    if len(value) * 6 <= MAX_ID_BYTES:  # no character escapes to more than 6 bytes
        return value
    size = stored_size(value)
    if size > MAX_ID_BYTES:
        raise ValueError(
            f"this {kind} ({value[:40]!r}...) is {size:,} bytes as stored; ids (run "
            f"and thread ids, namespaces, checkpoint ids, step and workflow names, "
            f"input keys, queues) are at most {MAX_ID_BYTES} bytes on every store: "
            f"use a shorter one (a hash of it, say)"
        )
    return value


def derived_id(prefix: str, suffix: str) -> str:
    """`prefix + suffix`, with the prefix hashed if the whole would be too long.

    For ids made from others (a child run's, `parent/seq`), which must stay
    within the limit however long the id they extend.
    """
    joined = prefix + suffix
    if stored_size(joined) <= MAX_ID_BYTES:
        return joined
    digest = hashlib.sha256(prefix.encode("utf-8", "surrogatepass")).hexdigest()
    return f"~{digest[:32]}{suffix}"


def new_run_id() -> str:
    """A unique, time-sortable run id."""
    return f"{time.time_ns() // 1_000_000:012x}-{secrets.token_hex(6)}"
