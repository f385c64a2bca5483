"""How `ResumableSaver` lays LangGraph threads out in snapshots; no langgraph import.

The saver (`resumable.integrations.langgraph`) writes, and the CLI (`resumable
threads`, `resumable show-thread`) reads, this layout, so the CLI works without
langgraph installed. Everything is stored through `Engine.save_state`:

```
thread_id     namespace         checkpoint_id    value                metadata
<thread>      <checkpoint_ns>   <checkpoint id>  {"values", "versions", "seen", "updated"}
                                                                      {"lg", "ts", "v"[, "parent"]}
<thread>      writes ns         <id> "." <seq>   {"0": v0, "1": ...}  {"task", "path", "channels"}
INDEX_THREAD  <thread>          "thread"         None                 None
```

- A checkpoint's value is LangGraph's checkpoint dict without `id`, `ts` and `v`
  (kept in the record and its metadata), under short keys because every delta
  names them: `values` (channel_values, split by channel, a `messages` list element
  by element; see `_engine/shapes.py`), `versions`, `seen` (versions_seen),
  `updated` (updated_channels), and `extra` for any other key. `lg` is LangGraph's
  `CheckpointMetadata`.
- `metadata["parent"]` is present only when LangGraph's parent differs from the
  snapshot's own parent (a first checkpoint, or one whose parent was deleted).
- The writes namespace of checkpoint namespace `ns` is `roles.writes_namespace(ns)`
  (role `SnapshotRole.WRITES`); `INDEX_THREAD` is `roles.internal_thread(...)`.
- Pending writes are one record per `put_writes` call, never rewritten, ordered by
  id; readers merge them as LangGraph's savers store them (see `merge_writes`).
  LangGraph namespaces never start with ":" (node names cannot contain it).
- `INDEX_THREAD` holds one record per LangGraph thread, in a namespace named after
  it: it tells LangGraph threads from other snapshot threads (which
  `Engine.threads` lists, this one left out as internal). A deleted thread keeps
  its index record; readers check that the thread still has checkpoints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from resumable._engine.engine import Engine
from resumable._engine.snapshots import Checkpoint as Snapshot
from resumable.stores.roles import (
    SnapshotRole,
    internal_thread,
    snapshot_role,
    writes_namespace,
    writes_owner_namespace,
)

__all__ = [
    "INDEX_THREAD",
    "LANGGRAPH_KEY",
    "SPECIAL_WRITES",
    "CheckpointInfo",
    "ThreadInfo",
    "checkpoint_history",
    "is_writes_namespace",
    "known_threads",
    "list_threads",
    "merge_writes",
    "register_thread",
    "writes_namespace",
    "writes_record_owner",
]

INDEX_THREAD = internal_thread("langgraph-threads")
_INDEX_ID = "thread"
LANGGRAPH_KEY = "lg"
SPECIAL_WRITES = {
    "__error__": -1,
    "__scheduled__": -2,
    "__interrupt__": -3,
    "__resume__": -4,
}
"""LangGraph's WRITES_IDX_MAP: writes to these channels take these indexes."""


def is_writes_namespace(namespace: str) -> bool:
    """Whether a snapshot namespace holds pending writes, not checkpoints."""
    return snapshot_role(namespace) is SnapshotRole.WRITES


def writes_record_owner(record_id: str) -> str:
    """The checkpoint id a pending-writes record belongs to."""
    return record_id.rpartition(".")[0]


def is_langgraph_checkpoint(snapshot: Snapshot) -> bool:
    """Whether a snapshot is a LangGraph checkpoint written by `ResumableSaver`."""
    return (
        snapshot.role is SnapshotRole.CHECKPOINT
        and isinstance(snapshot.metadata, dict)
        and LANGGRAPH_KEY in snapshot.metadata
    )


def langgraph_parent(snapshot: Snapshot) -> str | None:
    """LangGraph's parent checkpoint id of a checkpoint snapshot."""
    metadata = snapshot.metadata if isinstance(snapshot.metadata, dict) else {}
    if "parent" in metadata:
        parent = metadata["parent"]
        return parent if isinstance(parent, str) else None
    return snapshot.parent_id


def langgraph_metadata(snapshot: Snapshot) -> dict[str, Any]:
    """The LangGraph `CheckpointMetadata` of a checkpoint snapshot."""
    metadata = snapshot.metadata if isinstance(snapshot.metadata, dict) else {}
    found = metadata.get(LANGGRAPH_KEY)
    return found if isinstance(found, dict) else {}


def merge_writes(
    records: Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]],
) -> list[tuple[str, str, Any]]:
    """Pending writes as LangGraph's own savers keep them, sorted for replay.

    `records` are (metadata, value) pairs of one checkpoint's pending-writes
    records in the order they were written. A write's index is its position in
    its `put_writes` call, or `SPECIAL_WRITES[channel]`. A regular write (index
    >= 0) keeps the first value stored for its (task, index); a special one
    (ERROR, INTERRUPT, ...) keeps the last. The result is ordered by LangGraph's
    `writes_sort_key`: (task_path, task_id, index).
    """
    merged: dict[tuple[str, int], tuple[str, str, str, Any]] = {}
    for metadata, value in records:
        task_id, task_path = str(metadata["task"]), str(metadata["path"])
        for position, channel in enumerate(metadata["channels"]):
            key = (task_id, SPECIAL_WRITES.get(channel, position))
            if key[1] >= 0 and key in merged:
                continue
            merged[key] = (task_path, task_id, str(channel), value[str(position)])
    ordered = sorted(merged.items(), key=lambda kv: (kv[1][0], kv[0][0], kv[0][1]))
    return [(task_id, channel, value) for _, (_, task_id, channel, value) in ordered]


async def register_thread(engine: Engine, thread_id: str) -> None:
    """Add a thread to the index of LangGraph threads (idempotent)."""
    # Each thread's record has a namespace of its own, so it is written once with
    # a full manifest and is never a delta base of another record.
    if await engine.state_history(INDEX_THREAD, namespace=thread_id, limit=1):
        return
    await engine.save_state(
        INDEX_THREAD, None, namespace=thread_id, checkpoint_id=_INDEX_ID
    )


async def known_threads(engine: Engine) -> list[str]:
    """Every thread ever registered, including deleted ones, in id order."""
    records = await engine.state_history(INDEX_THREAD, namespace=None)
    return sorted({record.namespace for record in records})


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointInfo:
    """One LangGraph checkpoint as `resumable show-thread` lists it."""

    checkpoint_id: str
    namespace: str
    parent_id: str | None
    step: int | None
    source: str | None
    writes: int
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadInfo:
    """One LangGraph thread as `resumable threads` lists it."""

    thread_id: str
    checkpoint_id: str
    step: int | None
    source: str | None
    updated_at: datetime


def _info(snapshot: Snapshot, writes: int) -> CheckpointInfo:
    metadata = langgraph_metadata(snapshot)
    step, source = metadata.get("step"), metadata.get("source")
    return CheckpointInfo(
        checkpoint_id=snapshot.checkpoint_id,
        namespace=snapshot.namespace,
        parent_id=langgraph_parent(snapshot),
        step=step if isinstance(step, int) else None,
        source=source if isinstance(source, str) else None,
        writes=writes,
        created_at=snapshot.created_at,
    )


def _write_counts(records: Sequence[Snapshot]) -> dict[tuple[str, str], int]:
    """How many distinct pending writes each (namespace, checkpoint) has."""
    keys: dict[tuple[str, str], set[tuple[str, int]]] = {}
    for record in records:
        if not is_writes_namespace(record.namespace):
            continue
        metadata = record.metadata if isinstance(record.metadata, dict) else {}
        owner = (
            writes_owner_namespace(record.namespace),
            writes_record_owner(record.checkpoint_id),
        )
        found = keys.setdefault(owner, set())
        for position, channel in enumerate(metadata.get("channels", ())):
            idx = SPECIAL_WRITES.get(channel, position)
            found.add((str(metadata.get("task")), idx))
    return {owner: len(found) for owner, found in keys.items()}


async def checkpoint_history(engine: Engine, thread_id: str) -> list[CheckpointInfo]:
    """A thread's LangGraph checkpoints in every namespace, newest first."""
    records = await engine.state_history(thread_id, namespace=None)
    counts = _write_counts(records)
    return [
        _info(record, counts.get((record.namespace, record.checkpoint_id), 0))
        for record in records
        if is_langgraph_checkpoint(record)
    ]


async def list_threads(engine: Engine, *, limit: int | None = None) -> list[ThreadInfo]:
    """LangGraph threads with their latest root checkpoint, most recent first.

    Reads one record per thread ever registered (the index that tells LangGraph
    threads from `save_state` ones), so it takes time proportional to that number.
    """
    found: list[ThreadInfo] = []
    for thread_id in await known_threads(engine):
        latest = await engine.state_history(thread_id, namespace="", limit=1)
        if not latest or not is_langgraph_checkpoint(latest[0]):
            continue  # deleted since it was registered
        info = _info(latest[0], 0)
        found.append(
            ThreadInfo(
                thread_id=thread_id,
                checkpoint_id=info.checkpoint_id,
                step=info.step,
                source=info.source,
                updated_at=info.created_at,
            )
        )
    found.sort(key=lambda thread: (thread.updated_at, thread.thread_id), reverse=True)
    return found if limit is None else found[:limit]
