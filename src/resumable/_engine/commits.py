"""Commit before continue: a record is durable before the workflow sees its outcome.

A fenced store write is retried with backoff for `store_retry_s`; a large result
is uploaded to the object store first, a chunk at a time, and its row keeps the
reference. When the store still cannot take a record, the run is poisoned: this
and every later step raise the error, and the run ends with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from resumable._engine.context import RunContext
from resumable.errors import CheckpointWriteError, LeaseLost, StoreError
from resumable.serde.chunked import SealedStream
from resumable.stores.protocol import StepRecord

log = logging.getLogger("resumable.steps")


def log_fields(ctx: RunContext, seq: int, name: str, attempt: int) -> dict[str, Any]:
    """The `extra` of a log record about a step: run_id, seq, step, attempt."""
    return {
        "run_id": ctx.run_id,
        "workflow": ctx.workflow,
        "seq": seq,
        "step": name,
        "attempt": attempt,
    }


async def put_sealed(
    ctx: RunContext, sealed: SealedStream, *, seq: int | None
) -> bytes:
    """Upload a frame `Runtime.dumps_result` made on demand (retried as writes are).

    Returns:
        The reference the row keeps in its place.

    Raises:
        CheckpointWriteError: the object store still failed when the time ran out.
    """
    uploads = ctx.runtime.uploads
    assert uploads is not None  # noqa: S101 - dumps_result made it for one
    refs: list[bytes] = []

    async def put() -> None:
        refs.append(await uploads.put_sealed(sealed, run_id=ctx.run_id, seq=seq))

    await durably(ctx, put, seq=seq)
    return refs[-1]


async def commit(
    ctx: RunContext, record: StepRecord, *, sealed: SealedStream | None = None
) -> None:
    """Make a step record durable before anyone sees the outcome it records.

    With `sealed`, the record's output is that frame, uploaded to the object
    store first (its reference goes in the row). If the store cannot take it
    (after `store_retry_s` of retries), or the lease was lost, the run is
    poisoned: this and every later step raise the error, and the run ends with it.
    """
    observer = ctx.runtime.observer
    started_s = time.perf_counter() if observer is not None else 0.0
    try:
        if sealed is not None:
            output = await put_sealed(ctx, sealed, seq=record.seq)
            record = dataclasses.replace(record, output=output)
        store = ctx.runtime.store
        await durably(
            ctx, lambda: store.commit_step(record, fence=ctx.fence), seq=record.seq
        )
    except (LeaseLost, CheckpointWriteError) as exc:
        ctx.failure = exc
        if observer is not None:
            observer.checkpoint_written(
                ctx, record, duration_s=time.perf_counter() - started_s, error=exc
            )
        log.error(
            "run %r, step #%d %r: its record could not be written (%s); the run stops",
            ctx.run_id,
            record.seq,
            record.name,
            type(exc).__name__,
            extra=log_fields(ctx, record.seq, record.name, record.attempts),
        )
        raise
    if observer is not None:
        observer.checkpoint_written(
            ctx, record, duration_s=time.perf_counter() - started_s, error=None
        )


async def recorded_first(ctx: RunContext) -> None:
    """Await the records of `now()`, `uuid4()`, `random()` values still being written.

    Called before whatever could act on such a value outside the run starts (a
    step, a child run, a batch) and before the run ends, so no effect of it
    survives a crash that lost the value. Raises the run's failure if one failed.
    """
    while ctx.recording:
        writing, ctx.recording = ctx.recording, []
        for write in writing:
            with contextlib.suppress(LeaseLost, CheckpointWriteError):
                await write  # commit() poisoned the run with it: raised below
    if ctx.failure is not None:
        raise ctx.failure


async def confirm_lease(ctx: RunContext, *, seq: int, name: str) -> int:
    """Renew the lease, fenced, before step `seq` starts; returns the time after.

    Called when `ctx.tenure` is no longer fresh: after a pause (SIGSTOP, a blocked
    event loop, a suspended machine) another worker may have taken the run over
    and run this very step, so it must not start. A lost lease stops the run as
    a refused commit would (LeaseLost for this and every later step); a store that
    cannot confirm it within `store_retry_s` stops it with CheckpointWriteError.
    """
    runtime = ctx.runtime
    renewing = ctx.tenure.renewing if ctx.tenure is not None else None
    asked_s, asked_ms = time.monotonic(), runtime.clock.now_ms()
    try:
        if renewing is not None and not renewing.done():
            # the heartbeat's renewal is on its way: wait for it as for a write,
            # rather than send a second one to a store slow for every run
            await asyncio.wait({renewing}, timeout=runtime.store_retry_s)
            now_ms = runtime.clock.now_ms()
            if ctx.tenure is not None and ctx.tenure.is_fresh(now_ms):
                return now_ms
            if not renewing.done():
                raise CheckpointWriteError(
                    run_id=ctx.run_id,
                    seq=seq,
                    detail="the store did not answer in time",
                )
            asked_s, asked_ms = time.monotonic(), runtime.clock.now_ms()
        await durably(
            ctx,
            lambda: runtime.store.renew_lease(
                ctx.run_id,
                fence=ctx.fence,
                now_ms=asked_ms,
                ttl_ms=int(runtime.lease_ttl_s * 1000),
            ),
            seq=seq,
        )
    except (LeaseLost, CheckpointWriteError) as exc:
        ctx.failure = exc
        if isinstance(exc, LeaseLost) and runtime.observer is not None:
            runtime.observer.lease_lost(ctx)
        log.warning(
            "run %r, step #%d %r: not started, the lease could not be confirmed "
            "after a pause (%s); the run stops",
            ctx.run_id,
            seq,
            name,
            type(exc).__name__,
            extra=log_fields(ctx, seq, name, 0),
        )
        raise
    if ctx.tenure is not None:
        ctx.tenure.renewed(asked_s=asked_s, asked_ms=asked_ms)
    return runtime.clock.now_ms()


async def durably(
    ctx: RunContext, write: Callable[[], Awaitable[None]], *, seq: int | None
) -> None:
    """Run a fenced store write; retry it with backoff for `store_retry_s` once it fails.

    Every fenced write is an idempotent upsert guarded by the fence, so a retry
    cannot duplicate it. LeaseLost is not retried, nor a record the store refused
    as data (`CheckpointWriteError.transient` is False): it would fail again.

    Raises:
        CheckpointWriteError: the store still failed when the time ran out.
    """
    runtime = ctx.runtime
    window_ms = int(runtime.store_retry_s * 1000)
    # a store whose writes wait on no server (LocalWrites) is given no timeout,
    # and its window opens when a write first fails
    timed = runtime.times_out_writes
    deadline = runtime.clock.now_ms() + window_ms if timed else None
    delay = 0.05
    while True:
        try:
            if not timed or deadline is None:
                await write()
            else:
                # no attempt outlasts the window: a store that hangs (a pool waiting
                # for a server that is gone) fails the write when store_retry_s says
                remaining_s = max(deadline - runtime.clock.now_ms(), 0) / 1000
                async with asyncio.timeout(remaining_s):
                    await write()
        except (CheckpointWriteError, StoreError, TimeoutError) as exc:
            if runtime.observer is not None:
                runtime.observer.store_error(ctx, exc)
            if isinstance(exc, CheckpointWriteError) and not exc.transient:
                raise
            if deadline is None:
                deadline = runtime.clock.now_ms() + window_ms
            if runtime.clock.now_ms() + delay * 1000 >= deadline:
                if isinstance(exc, CheckpointWriteError):
                    raise
                detail = str(exc) or "the store did not answer in time"
                raise CheckpointWriteError(
                    run_id=ctx.run_id, seq=seq, detail=detail
                ) from exc
            await runtime.clock.sleep(delay)
            delay = min(delay * 2, 2.0)
        else:
            return
