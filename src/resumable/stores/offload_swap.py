"""Packing through an offload (`OffloadStore.swap_snapshots`).

The engine names the records a swap replaces as it read them: resolved, their
manifests the frames themselves. The wrapped store holds each manifest either as
that frame or as the reference to its object, and compares what it holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from resumable.stores.blobref import BlobRef, is_reference
from resumable.stores.protocol import SnapshotRecord, Store

__all__ = ["as_stored"]


async def as_stored(
    inner: Store, thread_id: str, old: Sequence[SnapshotRecord]
) -> list[SnapshotRecord] | None:
    """`old` as `inner` holds them; None if one is gone or holds another manifest."""
    held: dict[tuple[str, str], bytes] = {}
    for namespace in dict.fromkeys(record.namespace for record in old):
        for row in await inner.list_snapshots(thread_id, namespace=namespace):
            held[namespace, row.checkpoint_id] = row.manifest
    stored: list[SnapshotRecord] = []
    for record in old:
        raw = held.get((record.namespace, record.checkpoint_id))
        if raw is None:
            return None
        if raw != record.manifest:
            if not is_reference(raw) or raw != BlobRef.of(record.manifest).encode():
                return None
            record = dataclasses.replace(record, manifest=raw)  # noqa: PLW2901 - as stored
        stored.append(record)
    return stored
