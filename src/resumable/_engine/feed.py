"""A run's feed from the engine's side: entries sealed by the serde, appended, tailed.

Progress events (`events`) and streaming steps (`streams`) both write here: an
entry is a value the run's serde encodes (checksummed, encrypted when the engine
is), sealed for its channel, and bounded by `feeds.MAX_ENTRY_BYTES`. Readers in
any process tail a channel by polling the store from their last offset
(`tail`): every store can serve that, none needs a connection held open.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from resumable._engine.commits import durably
from resumable._engine.context import RunContext
from resumable.errors import FeedEntryTooLarge
from resumable.serde import Serde
from resumable.stores.capabilities import KeepsFeeds
from resumable.stores.feeds import MAX_ENTRY_BYTES, MAX_READ

POLL_S: Final = 0.2
"""How often a reader that caught up asks the store for more (`watch`, `stream`)."""


def place(run_id: str, channel: str) -> str:
    """Where an entry of the channel is sealed (its checksum and encryption bind it)."""
    return f"run {run_id!r}, feed {channel!r}"


def seal(
    serde: Serde,
    run_id: str,
    channel: str,
    value: object,
    *,
    what: str,
    seq: int | None = None,
) -> bytes:
    """One entry's payload: `value` encoded for the channel.

    Raises:
        FeedEntryTooLarge: it encodes to more than `MAX_ENTRY_BYTES`.
        SerializationError: it cannot be encoded.
    """
    payload = serde.dumps(value, place=place(run_id, channel))
    if len(payload) > MAX_ENTRY_BYTES:
        raise FeedEntryTooLarge(
            run_id=run_id, what=what, size=len(payload), limit=MAX_ENTRY_BYTES, seq=seq
        )
    return payload


async def append(
    ctx: RunContext,
    feeds: KeepsFeeds,
    channel: str,
    payloads: Sequence[bytes],
    *,
    once_key: str,
    seq: int | None,
    kind: str,
) -> bool:
    """Append from a run, retried as step commits are; whether it was new.

    `kind` names what is appended, for the observer (`Observer.feed_appended`).
    `once_key` makes the append idempotent: a retry after a write whose answer was
    lost, or a replay of the same position, appends nothing.
    """
    appended: list[int | None] = []
    now_ms = ctx.runtime.clock.now_ms()

    async def write() -> None:
        appended.append(
            await feeds.append_feed(
                ctx.run_id, channel, payloads, now_ms=now_ms, once_key=once_key
            )
        )

    await durably(ctx, write, seq=seq)
    # a retried write whose first try landed finds its own once_key: still new
    new = any(offset is not None for offset in appended)
    observer = ctx.runtime.observer
    if new and observer is not None:
        observer.feed_appended(
            ctx, kind, entries=len(payloads), size=sum(map(len, payloads))
        )
    return new


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """An entry read back: its offset, its decoded value and when it was appended."""

    offset: int
    value: Any
    created_at_ms: int


async def read(
    feeds: KeepsFeeds, serde: Serde, run_id: str, channel: str, *, after: int
) -> list[Entry]:
    """The next page of the channel past `after`, decoded."""
    where = place(run_id, channel)
    return [
        Entry(
            offset=entry.offset,
            value=serde.loads(entry.payload, place=where),
            created_at_ms=entry.created_at_ms,
        )
        for entry in await feeds.read_feed(run_id, channel, after=after, limit=MAX_READ)
    ]


async def tail(
    feeds: KeepsFeeds,
    serde: Serde,
    run_id: str,
    channel: str,
    *,
    after: int,
    is_done: Callable[[], Awaitable[bool]],
    poll_s: float = POLL_S,
) -> AsyncIterator[Entry]:
    """Every entry past `after`, then each new one as it is appended.

    Ends once the channel has no more entries and `is_done()` says none will
    come (asked only when caught up, and once more after it said so, to take
    what was appended between the last read and the question).
    """
    fetch = functools.partial(read, feeds, serde, run_id, channel)
    done = False
    while True:
        page = await fetch(after=after)
        for entry in page:
            after = entry.offset
            yield entry
        if len(page) == MAX_READ:
            continue
        if done:
            return
        done = await is_done()
        if not done:
            await asyncio.sleep(poll_s)
