"""Damage found while reading stored data is reported as CorruptCheckpointError.

Decoding a payload has typed errors of its own (`Serde.loads`). What is built
from decoded payloads (a snapshot's manifests, shapes and packs) assumes the
structure this library wrote; a row that was altered breaks that assumption with
whatever Python raises. `reading(place)` turns those into the one error a caller
of a read can expect, naming where the damage is.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from resumable.errors import CorruptCheckpointError

# what code walking a decoded structure raises when the structure is not ours
# (DecodeError is a ValueError; MemoryError: a structure too big to build)
_DAMAGE = (
    TypeError,
    ValueError,
    KeyError,
    IndexError,
    AttributeError,
    RecursionError,
    MemoryError,
    OverflowError,
)


@contextmanager
def reading(place: str) -> Iterator[None]:
    """Raise CorruptCheckpointError at `place` for damage met inside the block."""
    try:
        yield
    except _DAMAGE as exc:
        raise CorruptCheckpointError(
            place=place,
            detail=f"its stored structure is damaged ({type(exc).__name__}: "
            f"{str(exc)[:200]})",
        ) from exc
