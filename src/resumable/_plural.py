"""Counts in English: "1 call", "2 calls", "0 runs". One rule, used by every message."""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, noun: str, many: str | None = None) -> str:
    """`count` and `noun`, in the plural unless the count is exactly one.

    Args:
        count: how many.
        noun: the singular ("call", "step", "attempt").
        many: the plural when it is not `noun + "s"` ("entries").
    """
    word = noun if count == 1 else (many or noun + "s")
    return f"{count:,} {word}"
