"""A run's feed: append-only channels of entries that any process can read from an offset.

One mechanism carries two features. Progress events (`resumable.publish`) are the
entries of a run's `events` channel; a streaming step's chunks are the entries of
that step's channel (`stream_channel(seq)`), each attempt opening with a marker so
readers never mix two attempts. The store numbers a channel's entries from 1 in
the order they were appended, so a reader's cursor is the last offset it saw.

An append may carry a `once_key`: an entry whose once_key the channel already holds is
not appended again. That makes a replayed `publish` a no-op: its once_key is the
journal position it was made at.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

EVENTS_CHANNEL: Final = "events"
"""The channel of a run's progress events."""

MAX_ENTRY_BYTES: Final = 64 * 1024
"""The largest payload one feed entry may hold (an event, or a chunk batch)."""

MAX_READ: Final = 1000
"""The most entries one `read_feed` returns; readers page with `after`."""


def stream_channel(seq: int) -> str:
    """The channel of the chunks streamed by the step at `seq`."""
    return f"stream:{seq}"


@dataclass(frozen=True, slots=True, kw_only=True)
class FeedEntry:
    """One entry of a run's feed channel."""

    run_id: str
    channel: str
    offset: int
    """1 for the channel's first entry; the order entries were appended in."""
    payload: bytes
    """Encoded by the engine's serde; stores never decode it."""
    created_at_ms: int
