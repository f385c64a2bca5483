"""Records and identifiers that `StoreContract`'s tests build stores from."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from resumable.stores.protocol import RunRecord, SnapshotRecord, StepRecord

T0 = 1_800_000_000_000
"""A fixed "now" (ms) for records built in tests: far from 0, so subtraction bugs show."""


@contextmanager
def must_raise(kind: type[BaseException]) -> Iterator[None]:
    """Fail unless the block raises `kind`."""
    try:
        yield
    except kind:
        return
    raise AssertionError(f"expected {kind.__name__}")


def needs(store: object, *parts: type) -> None:
    """Skip the calling test unless `store` implements every Protocol of `parts`.

    A store need only implement `RunStore`: the tests of the optional parts
    (`SnapshotStore`, `RunListing`, `Maintenance`) skip on a store without them,
    saying which part is missing, instead of failing.
    """
    import pytest  # the suite runs under pytest; importing resumable.testing does not

    missing = [part.__name__ for part in parts if not isinstance(store, part)]
    if missing:
        pytest.skip(f"the store does not implement {', '.join(missing)}")


def run_record(run_id: str, **fields: Any) -> RunRecord:
    """A queued run of workflow "wf" created at T0, with `fields` replaced."""
    base = RunRecord(
        run_id=run_id,
        workflow="wf",
        status="queued",
        input=b"in",
        created_at_ms=T0,
        updated_at_ms=T0,
    )
    return dataclasses.replace(base, **fields)


def step_record(run_id: str, seq: int, **fields: Any) -> StepRecord:
    """A succeeded first attempt of step "step<seq>" at T0, with `fields` replaced."""
    base = StepRecord(
        run_id=run_id,
        seq=seq,
        name=f"step{seq}",
        fingerprint="f" * 16,
        status="ok",
        output=b"out",
        attempts=1,
        started_at_ms=T0,
        finished_at_ms=T0 + 5,
    )
    return dataclasses.replace(base, **fields)


def snapshot_record(
    thread: str, checkpoint: str, refs: tuple[str, ...], **fields: Any
) -> SnapshotRecord:
    """Snapshot `checkpoint` of `thread` at T0 naming chunks `refs`, `fields` replaced."""
    base = SnapshotRecord(
        thread_id=thread,
        checkpoint_id=checkpoint,
        parent_id=None,
        manifest=b"m-" + checkpoint.encode(),
        chunk_refs=refs,
        created_at_ms=T0,
    )
    return dataclasses.replace(base, **fields)


WEIRD_IDS = (
    "plain",
    'it\'s "quoted"',
    "'; DROP TABLE resumable_runs; --",
    "]]..redis.call('FLUSHALL')..[[",
    "@tag:{x} | -y *",  # RediSearch syntax
    "glob*?[x]",
    "100% done %25 %u00e9",
    "nul\x00byte",
    "lone \ud800 surrogate \udfff",
    "üñíçødé 🚀",
    "",
)
"""Identifiers every store must keep literally: quotes, SQL, Lua, RediSearch, glob
characters, percent signs, NUL bytes, lone surrogates, non-ASCII, empty."""
