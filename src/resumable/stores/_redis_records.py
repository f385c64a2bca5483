"""How RedisStore lays out its keys and encodes records in Redis values.

Key names follow the scheme `lib.lua` builds from the same base; records are hashes
(runs) or packed values (steps, inputs, snapshots, archive stubs), see `_redis_packing`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, cast

from resumable.stores._records import converter
from resumable.stores._redis_packing import pack as _pack
from resumable.stores._redis_packing import to_bytes as _b
from resumable.stores._redis_packing import to_str as _s
from resumable.stores._redis_packing import unpack as _unpack
from resumable.stores.protocol import (
    RunRecord,
    RunStatus,
    SnapshotRecord,
    StepRecord,
    StepStatus,
)
from resumable.stores.stubs import ArchiveStub

RUN_BYTES_FIELDS: Final = ("input", "output")
RUN_TEXT_FIELDS: Final = ("parent_id", "forked_from", "queue", "lease_owner")
RUN_INT_FIELDS: Final = ("fork_seq", "wake_at_ms", "expires_at_ms")


def num(value: int) -> bytes:
    """A number as Redis stores it."""
    return str(int(value)).encode()


def text_or_none(item: bytes | None) -> str | None:
    """An optional id from its bytes."""
    return None if item is None else _s(item)


def int_or_zero(item: bytes | None) -> int:
    """A stored number (missing: 0)."""
    return int(item or b"0")


def pairs(flat: Sequence[bytes]) -> dict[bytes, bytes]:
    """A flat [key, value, ...] reply as a dict."""
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


class Keys:
    """Key names; the same scheme `lib.lua` builds from the base it is given."""

    def __init__(self, prefix: str) -> None:
        self.base = b"{" + _b(prefix) + b"}"
        self.runs = self.base + b"runs"
        self.timers = self.base + b"timers"
        self.chunks = self.base + b"chunks"
        self.chunkrefs = self.base + b"chunkrefs"
        self.orphans = self.base + b"orphans"
        self.threads = self.base + b"threads"
        self.counts = self.base + b"counts"
        self.stubs = self.base + b"archived"
        self.meta = self.base + b"meta"
        self.channel = self.base + b"work"

    def of(self, kind: bytes, name: str) -> bytes:
        return self.base + kind + _b(name)

    def run(self, run_id: str) -> bytes:
        return self.of(b"run:", run_id)

    def steps(self, run_id: str) -> bytes:
        return self.of(b"steps:", run_id)

    def inputs(self, run_id: str) -> bytes:
        return self.of(b"inputs:", run_id)

    def stub(self, run_id: str) -> bytes:
        return self.of(b"archived:", run_id)

    def snapshots(self, thread_id: str, namespace: str) -> tuple[bytes, bytes]:
        """The (checkpoint ids, records) keys of one thread's namespace."""
        thread = _b(thread_id)
        suffix = str(len(thread)).encode() + b":" + thread + _b(namespace)
        return self.base + b"cps:" + suffix, self.base + b"cp:" + suffix


def run_fields(run: RunRecord) -> list[tuple[str, bytes]]:
    values: list[tuple[str, str | bytes | int | None]] = [
        ("workflow", run.workflow),
        ("status", run.status),
        ("input", run.input),
        ("output", run.output),
        ("created_at_ms", run.created_at_ms),
        ("updated_at_ms", run.updated_at_ms),
        ("parent_id", run.parent_id),
        ("forked_from", run.forked_from),
        ("fork_seq", run.fork_seq),
        ("queue", run.queue),
        ("lease_owner", run.lease_owner),
        ("lease_expires_at_ms", run.lease_expires_at_ms),
        ("fence", run.fence),
        ("wake_at_ms", run.wake_at_ms),
        ("expires_at_ms", run.expires_at_ms),
        ("version", run.version),
    ]
    encoded: list[tuple[str, bytes]] = []
    for name, value in values:
        if value is None:
            continue
        if isinstance(value, bytes):
            encoded.append((name, value))
        elif isinstance(value, str):
            encoded.append((name, _b(value)))
        else:
            encoded.append((name, num(value)))
    return encoded


@converter("run", lambda run_id, found: f"run {run_id!r}")
def run_from_hash(run_id: str, found: Mapping[bytes, bytes]) -> RunRecord:
    def text(name: str) -> str | None:
        return text_or_none(found.get(name.encode()))

    def number(name: str) -> int | None:
        value = found.get(name.encode())
        return None if value is None else int(value)

    return RunRecord(
        run_id=run_id,
        workflow=text("workflow") or "",
        status=cast("RunStatus", text("status")),
        input=found.get(b"input", b""),
        output=found.get(b"output"),
        created_at_ms=number("created_at_ms") or 0,
        updated_at_ms=number("updated_at_ms") or 0,
        parent_id=text("parent_id"),
        forked_from=text("forked_from"),
        fork_seq=number("fork_seq"),
        queue=text("queue"),
        lease_owner=text("lease_owner"),
        lease_expires_at_ms=number("lease_expires_at_ms") or 0,
        fence=number("fence") or 0,
        wake_at_ms=number("wake_at_ms"),
        expires_at_ms=number("expires_at_ms"),
        version=text("version"),
    )


def step_packed(step: StepRecord) -> bytes:
    return _pack(
        [
            _b(step.name),
            _b(step.fingerprint),
            _b(step.status),
            step.output,
            num(step.attempts),
            num(step.started_at_ms),
            num(step.finished_at_ms),
            step.usage,
        ]
    )


def stub_packed(stub: ArchiveStub) -> bytes:
    return _pack(
        [
            _b(stub.key),
            num(stub.size),
            num(stub.steps),
            num(stub.inputs),
            num(stub.fence),
            num(stub.archived_at_ms),
            "\n".join(stub.refers_to).encode(),
        ]
    )


@converter("archive stub", lambda run_id, packed: f"run {run_id!r} archive stub")
def stub_from_packed(run_id: str, packed: bytes) -> ArchiveStub:
    key, size, steps, inputs, fence, archived, refers_to = _unpack(packed)
    return ArchiveStub(
        run_id=run_id,
        key=_s(key or b""),
        size=int_or_zero(size),
        steps=int_or_zero(steps),
        inputs=int_or_zero(inputs),
        fence=int_or_zero(fence),
        archived_at_ms=int_or_zero(archived),
        refers_to=tuple(_s(refers_to or b"").split("\n")) if refers_to else (),
    )


@converter("input")
def inputs_from_hash(found: Mapping[Any, Any]) -> dict[str, bytes]:
    return {_s(key): _unpack(packed)[0] or b"" for key, packed in found.items()}


@converter(
    "step",
    lambda run_id, seq, data: (
        f"run {run_id!r} step #{_s(seq) if isinstance(seq, bytes) else seq}"
    ),
)
def step_from_packed(run_id: str, seq: bytes | int, data: bytes) -> StepRecord:
    name, fingerprint, status, output, attempts, started, finished, usage = _unpack(
        data
    )
    return StepRecord(
        run_id=run_id,
        seq=int(seq),
        name=text_or_none(name) or "",
        fingerprint=text_or_none(fingerprint) or "",
        status=cast("StepStatus", text_or_none(status)),
        output=output,
        attempts=int_or_zero(attempts),
        started_at_ms=int_or_zero(started),
        finished_at_ms=int_or_zero(finished),
        usage=usage,
    )


def snapshot_packed(snapshot: SnapshotRecord) -> bytes:
    # refs come last: lib.lua's snapshot_refs() skips the first five items
    return _pack(
        [
            None if snapshot.parent_id is None else _b(snapshot.parent_id),
            snapshot.manifest,
            num(snapshot.created_at_ms),
            None if snapshot.label is None else _b(snapshot.label),
            snapshot.metadata,
            *(_b(ref) for ref in snapshot.chunk_refs),
        ]
    )


@converter(
    "snapshot",
    lambda thread_id, namespace, checkpoint_id, data: (
        f"thread {thread_id!r} checkpoint {checkpoint_id!r}"
    ),
)
def snapshot_from_packed(
    thread_id: str, namespace: str, checkpoint_id: str, data: bytes
) -> SnapshotRecord:
    parent, manifest, created, label, metadata, *refs = _unpack(data)
    return SnapshotRecord(
        thread_id=thread_id,
        checkpoint_id=checkpoint_id,
        parent_id=text_or_none(parent),
        manifest=manifest or b"",
        chunk_refs=tuple(_s(ref or b"") for ref in refs),
        created_at_ms=int_or_zero(created),
        namespace=namespace,
        label=text_or_none(label),
        metadata=metadata,
    )


def bytes_dict(found: Mapping[Any, Any]) -> dict[bytes, bytes]:
    return {as_bytes(key): as_bytes(value) for key, value in found.items()}


def as_bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else _b(value)


def config_value(found: Mapping[Any, Any]) -> str | None:
    value = next(iter(found.values()), None)
    return None if value is None else _s(as_bytes(value))
