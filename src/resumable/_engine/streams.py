"""Durable streams: a step that yields chunks, readable from any process as it runs.

An `async def` step that `yield`s is a streaming step. Inside a run, each chunk
is appended to the step's channel of the run's feed (`stores.feeds`) as it comes,
in batches (`Batcher`): a batch goes when the one before it is written (the
chunks that came meanwhile, even if no more come), so a fast model waits for one
store write at most, and a batch holds at most
`BATCH_CHUNKS` chunks, so memory stays bounded. The step's value, committed to
the journal as any step's, is the assembled result (the chunks joined when they
are all text, else their list), and a replay returns it without running the step:
readers of the stream read the recorded chunks from the feed.

Each execution of the step opens with an `attempt` entry, numbered from 1, and
every chunk carries its attempt's number. A step that runs again (a retry, or the
in-flight step after a crash) writes a new attempt; readers (`read_stream`) are
handed the `attempt` entry and only the newest attempt's chunks after it, never a
mix of two.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from resumable._engine import feed
from resumable._engine.context import RunContext, _step
from resumable.serde import Serde
from resumable.stores.capabilities import KeepsFeeds
from resumable.stores.feeds import stream_channel
from resumable.stores.protocol import RunStore

BATCH_CHUNKS: Final = 64
"""The most chunks one append carries; a producer faster than the store waits."""

StreamKind = Literal["attempt", "chunk", "end"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamEvent:
    """One entry of a step's stream, as a reader sees it."""

    kind: StreamKind
    """`attempt`: an execution of the step begins (drop what an earlier one
    showed); `chunk`: a piece it yielded; `end`: it finished (`value` is True) or
    raised (False)."""
    attempt: int
    """The execution it belongs to, from 1."""
    value: Any
    offset: int
    """Its place in the stream, from 1: resume a reader with `since=offset`."""
    at: datetime


def assemble(chunks: list[Any]) -> Any:
    """A streaming step's value: its chunks joined if all are text, else their list."""
    if all(isinstance(chunk, str) for chunk in chunks):
        return "".join(chunks)
    return chunks


def collecting(
    fn: Callable[..., AsyncIterator[Any]],
) -> Callable[..., Coroutine[Any, Any, Any]]:
    """An `async def` that runs the generator `fn` and returns its assembled value.

    Inside a step attempt of a run whose store keeps feeds, each chunk is streamed
    to the feed; anywhere else the chunks are only collected.
    """

    async def collect(*args: Any, **kwargs: Any) -> Any:
        scope = _step.get()
        feeds = scope[0].runtime.feeds if scope is not None else None
        if scope is None or feeds is None:
            return assemble([chunk async for chunk in fn(*args, **kwargs)])
        ctx, seq, name, _, _ = scope
        batcher = Batcher(ctx, feeds, seq)
        await batcher.open(name)
        chunks: list[Any] = []
        try:
            async for chunk in fn(*args, **kwargs):
                chunks.append(chunk)
                await batcher.add(chunk)
        except BaseException:
            with contextlib.suppress(Exception):
                await asyncio.shield(batcher.close(ok=False))
            raise
        await batcher.close(ok=True)
        return assemble(chunks)

    collect.__name__ = getattr(fn, "__name__", "stream")
    collect.__qualname__ = getattr(fn, "__qualname__", collect.__name__)
    collect.__module__ = getattr(fn, "__module__", __name__)
    return collect


class Batcher:
    """Appends one attempt's chunks to its step's channel, a batch at a time."""

    def __init__(self, ctx: RunContext, feeds: KeepsFeeds, seq: int) -> None:
        self._ctx, self._feeds, self._seq = ctx, feeds, seq
        self._channel = stream_channel(seq)
        self.attempt = 0
        self._pending: list[bytes] = []
        self._writing: asyncio.Task[None] | None = None
        self._batches = 0

    def _seal(self, body: dict[str, Any], what: str) -> bytes:
        return feed.seal(
            self._ctx.runtime.serde,
            self._ctx.run_id,
            self._channel,
            body,
            what=what,
            seq=self._seq,
        )

    async def open(self, step: str) -> None:
        """Write this attempt's opening entry; its number is the first one free."""
        attempt = 0
        while True:  # a once_key per attempt number: the first free one is ours
            attempt += 1
            marker = self._seal(
                {"kind": "attempt", "attempt": attempt, "step": step}, "the marker"
            )
            if await feed.append(
                self._ctx,
                self._feeds,
                self._channel,
                [marker],
                once_key=f"a{attempt}",
                seq=self._seq,
                kind="attempt",
            ):
                self.attempt = attempt
                return

    async def add(self, chunk: object) -> None:
        """Queue a chunk; start a write unless one is in flight; wait if full."""
        self._pending.append(
            self._seal(
                {"kind": "chunk", "attempt": self.attempt, "value": chunk},
                f"chunk {len(self._pending) + 1} of the stream",
            )
        )
        if self._writing is not None and self._writing.done():
            self._writing.result()  # a write that failed stops the step here
            self._writing = None
        if self._writing is None:
            self._writing = asyncio.ensure_future(self._flush())
        elif len(self._pending) >= BATCH_CHUNKS:
            await self._writing
            self._writing = asyncio.ensure_future(self._flush())

    async def _flush(self) -> None:
        # until nothing is queued: chunks that came during a write go when it
        # ends, not with the next chunk (a model may pause for long mid-answer)
        while self._pending:
            batch, self._pending = self._pending, []
            self._batches += 1
            await feed.append(
                self._ctx,
                self._feeds,
                self._channel,
                batch,
                once_key=f"a{self.attempt}.b{self._batches}",
                seq=self._seq,
                kind="chunk",
            )

    async def close(self, *, ok: bool) -> None:
        """Write what is queued and the attempt's closing entry."""
        if self._writing is not None:
            writing, self._writing = self._writing, None
            await writing
        if self.attempt == 0:
            return
        self._pending.append(
            self._seal(
                {"kind": "end", "attempt": self.attempt, "value": ok}, "the end marker"
            )
        )
        await self._flush()


def _stream_event(entry: feed.Entry) -> StreamEvent:
    body = entry.value
    return StreamEvent(
        kind=body["kind"],
        attempt=int(body["attempt"]),
        value=True if body["kind"] == "attempt" else body.get("value"),
        offset=entry.offset,
        at=datetime.fromtimestamp(entry.created_at_ms / 1000, UTC),
    )


async def read_stream(
    store: RunStore,
    feeds: KeepsFeeds,
    serde: Serde,
    run_id: str,
    seq: int,
    *,
    since: int,
    follow: bool,
    poll_s: float,
) -> AsyncIterator[StreamEvent]:
    """The stream of the step at `seq` past offset `since`, never two attempts mixed.

    An entry of an attempt older than one already seen is left out (a process
    that lost its lease may still write for a moment). With `follow`, waits for
    more until the newest attempt ended well and the step is in the journal, or
    the run has finished; without it, stops when caught up.
    """
    newest = 0
    ended = False

    async def is_done() -> bool:
        if not follow:
            return True
        run = await store.get_run(run_id)
        if run is None or run.is_terminal:
            return True
        if not ended:
            return False
        # an attempt that ended well may still die before its commit: the next
        # attempt would follow, so the stream is over once the journal has the step
        journal = await store.load_journal(run_id, up_to_seq=seq)
        return any(record.seq == seq and record.status == "ok" for record in journal)

    async for entry in feed.tail(
        feeds,
        serde,
        run_id,
        stream_channel(seq),
        after=since,
        is_done=is_done,
        poll_s=poll_s,
    ):
        event = _stream_event(entry)
        if event.attempt < newest:
            continue
        if event.attempt > newest:
            newest, ended = event.attempt, False
        if event.kind == "end":
            ended = bool(event.value)
        yield event
