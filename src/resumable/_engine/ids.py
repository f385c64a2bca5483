"""Ids checked before anything is written, and ids made here.

Every id is a str of at most `MAX_ID_BYTES` bytes as stored, on every store
(`resumable.stores.ids` says why); `check_id` refuses others, and `derived_id`
keeps an id made from another within the limit.
"""

from __future__ import annotations

import hashlib
import secrets
import time

from resumable.stores.ids import MAX_ID_BYTES, stored_size

__all__ = ["MAX_ID_BYTES", "check_id", "derived_id", "new_run_id", "stored_size"]


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
