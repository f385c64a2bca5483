"""The step cache across runs: a step's value served from another run's journal.

A step declared with `@step(cache=True)` (or a `CachePolicy`) looks its key up
before it executes for the first time in a run. The key is the step's name, its
code version (`@step(version=)`, else a hash of its source) and its arguments'
fingerprint (or a custom `key=`), with the workflow's name unless the policy's
scope is the whole store. On a hit the value recorded by run R at seq S is
decoded (with R's place), re-sealed for this run's row (encryption binds a
payload to its row) and committed here as this step's outcome, like any result:
it is then replayed like any step, and the row does not need R any more (gc or
archive of R strands nothing). The row's usage records where it came from and
the calls it saved, which the ledger counts as reused (`ledger.cached_source`).

On a miss the step executes; once its result is committed, the key is pointed at
its row (the last write wins: two runs that miss at once both execute, and each
keeps its own row). A value the current code cannot decode, an expired entry, or
an entry whose row is gone is a miss, never an error.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from resumable._engine import ledger, replay
from resumable._engine.cache_policy import CachePolicy
from resumable._engine.commits import commit, recorded_first
from resumable.errors import ResumableError
from resumable.serde.chunked import SealedStream
from resumable.stores.places import step_place
from resumable.stores.protocol import StepRecord
from resumable.stores.step_cache import CacheEntry
from resumable.usage import Usage

if TYPE_CHECKING:
    from resumable._engine.context import RunContext
    from resumable._engine.specs import StepSpec

log = logging.getLogger("resumable.cache")


@dataclass(frozen=True, slots=True)
class Served:
    """A call answered from the cache: its value, already committed in its own row."""

    value: Any


def cache_key(
    ctx: RunContext,
    spec: StepSpec,
    *,
    policy: CachePolicy,
    fingerprint: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> str:
    """The call's key: scope, step name, code version, and its arguments' part."""
    part = fingerprint if policy.key is None else str(policy.key(*args, **kwargs))
    scope = ctx.workflow if policy.scope == "workflow" else ""
    text = "\x00".join((scope, spec.name, spec.code_version(), part))
    return hashlib.blake2b(text.encode(), digest_size=20).hexdigest()


async def look_up(
    ctx: RunContext,
    seq: int,
    spec: StepSpec,
    *,
    fingerprint: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    plan: replay.Execute,
) -> Served | str | None:
    """The call served from the cache; else the key to `remember` once it executed.

    None when the cache does not apply to this call: the store keeps no index,
    the call resumes its attempts, or `Engine.check` is looking (it writes nothing).
    """
    policy, index = spec.cache, ctx.runtime.step_cache
    if (
        policy is None
        or index is None
        or plan is not replay.FIRST_RUN  # resuming its attempts: no lookup
        or ctx.check is not None  # Engine.check writes nothing
    ):
        return None
    key = cache_key(
        ctx, spec, policy=policy, fingerprint=fingerprint, args=args, kwargs=kwargs
    )
    observer = ctx.runtime.observer
    try:
        found = await index.lookup_cache(key, now_ms=ctx.runtime.clock.now_ms())
    except ResumableError as exc:  # the cache only saves money: never fail a run
        log.warning(
            "run %r, step %r: cache lookup failed (%s)", ctx.run_id, spec.name, exc
        )
        found = None
    if found is not None:
        served = await _serve(ctx, seq, spec, fingerprint, found[1])
        if served is not None:
            value, saved = served
            if observer is not None:
                observer.cache_looked_up(ctx, spec.name, hit=True, saved=saved)
            return Served(value)
    if observer is not None:
        observer.cache_looked_up(ctx, spec.name, hit=False, saved=[])
    return key


async def remember(ctx: RunContext, seq: int, spec: StepSpec, key: str) -> None:
    """Point `key` at the row the call at `seq` just committed (`look_up` missed)."""
    now_ms = ctx.runtime.clock.now_ms()
    ttl_ms = spec.cache.ttl_ms if spec.cache is not None else None
    entry = CacheEntry(
        key=key,
        step=spec.name,
        workflow=ctx.workflow,
        run_id=ctx.run_id,
        seq=seq,
        created_at_ms=now_ms,
        expires_at_ms=None if ttl_ms is None else now_ms + ttl_ms,
    )
    # the result is committed; the entry only indexes it, written in a batch later
    ctx.cache_entries.append(entry)
    if len(ctx.cache_entries) >= _BATCH:
        await write_entries(ctx)


_BATCH = 500
"""Entries an execution keeps before it writes them (else at its end)."""


async def write_entries(ctx: RunContext) -> None:
    """Write the execution's pending cache entries in one batch.

    A failure is logged, never raised: later calls with those keys then miss.
    """
    index, entries = ctx.runtime.step_cache, ctx.cache_entries
    if index is None or not entries:
        return
    ctx.cache_entries = []
    try:
        await index.put_cache_entries(entries)
    except ResumableError as exc:
        log.warning(
            "run %r: %d step cache entries not written (%s)",
            ctx.run_id,
            len(entries),
            exc,
        )


class _Miss(Exception):
    """The entry's row cannot serve this call."""


async def _serve(
    ctx: RunContext, seq: int, spec: StepSpec, fingerprint: str, source: StepRecord
) -> tuple[Any, list[Usage]] | None:
    """Copy the source row's value into this run at `seq`; None: it cannot serve."""
    runtime = ctx.runtime
    serde = runtime.serde
    try:
        if source.status != "ok" or source.name != spec.name or source.output is None:
            raise _Miss(f"the row is {source.status} {source.name!r}")
        # decoded with its own place, sealed again for this row's
        source_place = step_place(source.run_id, source.seq, source.name)
        value = serde.loads(source.output, place=source_place)
        saved: list[tuple[int, Usage]] = []
        if source.usage is not None:
            raw = serde.loads(source.usage, place=source_place + " usage")
            saved = ledger.usage_entries(raw, place=source_place + " usage")
        place = step_place(ctx.run_id, seq, spec.name)
        output: bytes | SealedStream | None = runtime.dumps_result(value, place=place)
    except (ResumableError, _Miss) as exc:
        log.info(
            "run %r, step #%d %r: cached value of run %r step #%d not used (%s)",
            ctx.run_id,
            seq,
            spec.name,
            source.run_id,
            source.seq,
            exc,
        )
        return None
    if ctx.recording:  # a value now()/uuid4() drew may be among its arguments
        await recorded_first(ctx)
    sealed = None
    if isinstance(output, SealedStream):
        sealed, output = output, None
    now_ms = runtime.clock.now_ms()
    usages = [usage for _, usage in saved]
    usage = ledger.encode_cached(
        run_id=source.run_id, seq=source.seq, fence=ctx.fence, calls=usages
    )
    await commit(
        ctx,
        StepRecord(
            run_id=ctx.run_id,
            seq=seq,
            name=spec.name,
            fingerprint=fingerprint,
            status="ok",
            output=output,
            attempts=1,
            started_at_ms=now_ms,
            finished_at_ms=now_ms,
            usage=serde.dumps_json(usage, place=place + " usage"),
        ),
        sealed=sealed,
    )
    return value, usages
