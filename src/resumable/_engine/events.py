"""Progress events: `publish(key, value)` in a run, `events`/`watch` from anywhere.

A web request that started a 20-minute batch wants "37 of 50 documents" without
reading the journal. The run publishes; any process reads the latest value per
key (`Engine.events`) or follows every value as it comes (`Engine.watch`).

Events are the entries of the run's `events` channel (`stores.feeds`). Each is
tied to where the run's code made it, as a step is to its seq, and that position
is the append's once_key, so a replayed `publish` appends nothing:

- in the workflow body, the n-th publish made after the body called its steps up
  to seq S (the next step would take S + 1): deterministic, as the body is;
- in a step, the n-th publish of attempt A of the step at seq S: the in-flight
  step that runs again after a crash publishes at the same positions, and
  readers keep the values of the first execution; a retry (attempt A + 1)
  publishes anew.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from resumable._engine import feed
from resumable._engine.context import RunContext, _run, _step
from resumable.errors import NotInRun
from resumable.serde import Serde
from resumable.stores.capabilities import KeepsFeeds
from resumable.stores.feeds import EVENTS_CHANNEL, MAX_READ
from resumable.stores.protocol import RunStore


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One published progress value, as a reader sees it."""

    key: str
    value: Any
    offset: int
    """Its place in the run's events, from 1: pass it to `watch(after=)` to go on."""
    published_at: datetime


async def publish(key: str, value: object) -> None:
    """Publish a progress value under `key` for readers of this run.

    Durable before it returns, and replay-safe: a publish the run makes again when
    it is resumed (or replayed) is not published twice. Call it from an `async`
    workflow or step::

        @workflow
        async def index(docs: list[str]) -> int:
            for n, doc in enumerate(docs, 1):
                await embed(doc)
                await resumable.publish("progress", {"done": n, "of": len(docs)})
            return len(docs)

    Readers: `await engine.events(run_id, "progress")` for the latest value, or
    `async for event in engine.watch(run_id)` for every value, in order.

    Raises:
        NotInRun: called outside a run.
        FeedEntryTooLarge: the value encodes to more than 64 KiB.
        CapabilityMissing: the store keeps no feeds.
    """
    scope = _step.get()
    if scope is not None:
        ctx, seq, _, attempt, _ = scope
        position = (seq, attempt)
        prefix = f"s{seq}.{attempt}"
    else:
        found = _run.get()
        if found is None:
            raise NotInRun(call="publish()", where="from a @workflow or @step")
        ctx = found
        seq = ctx.next_seq - 1  # the last seq the body took
        position = (seq, 0)
        prefix = f"w{seq}"
    feeds = _feeds_of(ctx)
    published = ctx.published if ctx.published is not None else {}
    ctx.published = published
    n = published.get(position, 0)
    published[position] = n + 1
    payload = feed.seal(
        ctx.runtime.serde,
        ctx.run_id,
        EVENTS_CHANNEL,
        {"key": key, "value": value},
        what=f"the event {key!r}",
        seq=seq if scope is not None else None,
    )
    await feed.append(
        ctx,
        feeds,
        EVENTS_CHANNEL,
        [payload],
        once_key=f"{prefix}.{n}",
        seq=seq if scope is not None else None,
        kind="event",
    )


def _feeds_of(ctx: RunContext) -> KeepsFeeds:
    feeds = ctx.runtime.feeds
    if feeds is None:
        from resumable.errors import CapabilityMissing

        raise CapabilityMissing(
            store=ctx.runtime.store.url, capability="KeepsFeeds", call="publish()"
        )
    return feeds


def _event(entry: feed.Entry) -> Event:
    body = entry.value
    return Event(
        key=str(body["key"]),
        value=body["value"],
        offset=entry.offset,
        published_at=datetime.fromtimestamp(entry.created_at_ms / 1000, UTC),
    )


async def read_events(
    feeds: KeepsFeeds, serde: Serde, run_id: str, *, after: int = 0
) -> list[Event]:
    """Every event of the run past `after`, in publish order."""
    events: list[Event] = []
    while True:
        page = await feed.read(feeds, serde, run_id, EVENTS_CHANNEL, after=after)
        events.extend(_event(entry) for entry in page)
        if len(page) < MAX_READ:
            return events
        after = page[-1].offset


def latest(events: list[Event]) -> dict[str, Any]:
    """The last value published under each key, keys in first-publish order."""
    values: dict[str, Any] = {}
    for event in events:
        values[event.key] = event.value
    return values


async def watch_events(
    store: RunStore,
    feeds: KeepsFeeds,
    serde: Serde,
    run_id: str,
    *,
    after: int,
    poll_s: float,
) -> AsyncIterator[Event]:
    """Each event past `after`, then each new one, until the run has finished."""

    async def finished() -> bool:
        run = await store.get_run(run_id)
        return run is None or run.is_terminal

    async for entry in feed.tail(
        feeds,
        serde,
        run_id,
        EVENTS_CHANNEL,
        after=after,
        is_done=finished,
        poll_s=poll_s,
    ):
        yield _event(entry)
