"""Deleting single checkpoints of a thread (`Engine.delete_states`).

A snapshot may be loose (its own row) or inside a pack (`packs`), and a kept
snapshot may be a delta against one about to go. Deleting runs in two phases of
atomic store calls, so that a crash anywhere leaves every kept snapshot loadable:

1. every kept snapshot whose delta chain runs through a doomed one is written
   again, in place, with a full manifest of the same state (loose: an upsert of
   its row; packed: its pack rewritten);
2. then the doomed snapshots go: loose ones with one `Store.delete_snapshots`,
   packed ones by rewriting each pack without them.

A crash between them leaves doomed snapshots in place; deleting again finishes.

Every rewrite is a compare-and-swap of the rows as read
(`PacksSnapshots.swap_snapshots`): if another engine packed those rows or
extended that pack meanwhile, it is refused, and the namespace is read again and
the pass retried, so rows another engine moved are never overwritten and a
deleted row never comes back. A rewrite hands the swap the new chunks its full
manifest names (`chunks=`): stored in the swap's transaction, a collection
running meanwhile (`resumable gc`) cannot delete them before the swap names them.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

from resumable._engine.packs import is_pack_namespace
from resumable._engine.snapshots import Snapshots
from resumable.errors import StoreError
from resumable.stores.protocol import SnapshotRecord
from resumable.stores.roles import pack_namespace

_Rows = dict[str, SnapshotRecord]  # checkpoint_id -> record, loose or packed
ATTEMPTS: Final = 8
"""Passes over a namespace before giving up on other engines changing its packs."""


async def delete_states(
    snapshots: Snapshots, thread_id: str, keys: Collection[tuple[str, str]]
) -> int:
    """Delete the thread's checkpoints at `(namespace, checkpoint_id)` keys.

    Returns how many existed. Keys naming no checkpoint are skipped.

    Raises:
        ValueError: a key names a pack's namespace (packs are the engine's own).
    """
    by_namespace: dict[str, set[str]] = {}
    for namespace, checkpoint_id in keys:
        if is_pack_namespace(namespace):
            raise ValueError(
                f"thread {thread_id!r}: namespace {namespace!r} holds packs of "
                f"snapshots, not checkpoints; name the checkpoints' own namespace"
            )
        by_namespace.setdefault(namespace, set()).add(checkpoint_id)
    deleted = 0
    try:
        for namespace, ids in sorted(by_namespace.items()):
            deleted += await _delete_in(snapshots, thread_id, namespace, ids)
    finally:
        # cached shapes may be of deleted snapshots: a delta against one could
        # never be loaded
        snapshots.forget(thread_id)
    return deleted


async def _delete_in(
    snapshots: Snapshots, thread_id: str, namespace: str, ids: set[str]
) -> int:
    gone = 0
    for _ in range(ATTEMPTS):
        deleted, done = await _delete_pass(snapshots, thread_id, namespace, ids)
        gone += deleted  # a later pass no longer finds what this one deleted
        if done:
            return gone
    raise StoreError(
        store=snapshots.store.url,
        detail=f"thread {thread_id!r} namespace {namespace!r}: other engines "
        f"changed its packs during each of {ATTEMPTS} passes of delete_states; "
        f"every kept checkpoint is intact, but some of those named may not be "
        f"deleted yet: call delete_states again",
    )


async def _delete_pass(
    snapshots: Snapshots, thread_id: str, namespace: str, ids: set[str]
) -> tuple[int, bool]:
    """One pass: how many it deleted, and whether it finished (False: retry)."""
    store = snapshots.store
    loose, packs = await _read(snapshots, thread_id, namespace)
    rows: _Rows = {**_packed_rows(snapshots, packs, namespace), **loose}
    doomed = ids & rows.keys()
    if not doomed:
        return 0, True
    dependents = _dependents(snapshots, rows, doomed)
    for checkpoint_id in sorted(dependents & loose.keys()):
        full, chunks = await snapshots.full_version(loose[checkpoint_id])
        if not await snapshots.replace_loose(loose[checkpoint_id], full, chunks):
            return 0, False  # packed meanwhile: read again
    for pack in packs:
        held = snapshots.packs.rows(pack, namespace)
        if any(row.checkpoint_id in dependents for row in held):
            fulls: list[SnapshotRecord] = []
            new: dict[str, bytes] = {}
            for row in held:
                if row.checkpoint_id in dependents:
                    full, chunks = await snapshots.full_version(row)
                    new.update(chunks)
                    row = full  # noqa: PLW2901 - the row's full version replaces it
                fulls.append(row)
            if not await snapshots.packs.rewrite(pack, namespace, fulls, chunks=new):
                return 0, False
    # every kept snapshot is now loadable without the doomed ones
    gone = await store.delete_snapshots(
        thread_id,
        [(namespace, checkpoint_id) for checkpoint_id in doomed & loose.keys()],
    )
    _, packs = await _read(snapshots, thread_id, namespace)
    for pack in packs:
        held = snapshots.packs.rows(pack, namespace)
        kept = [row for row in held if row.checkpoint_id not in doomed]
        if len(kept) < len(held):
            if not await snapshots.packs.rewrite(pack, namespace, kept):
                return gone, False
            # a row both loose and packed (a swap's leftover) is counted once
            gone += sum(
                row.checkpoint_id in doomed and row.checkpoint_id not in loose
                for row in held
            )
    return gone, True


async def _read(
    snapshots: Snapshots, thread_id: str, namespace: str
) -> tuple[_Rows, list[SnapshotRecord]]:
    """The namespace's loose snapshots by id, and its packs."""
    store = snapshots.store
    loose = await store.list_snapshots(thread_id, namespace=namespace)
    packs = await store.list_snapshots(thread_id, namespace=pack_namespace(namespace))
    return {row.checkpoint_id: row for row in loose}, packs


def _packed_rows(
    snapshots: Snapshots, packs: list[SnapshotRecord], namespace: str
) -> _Rows:
    return {
        row.checkpoint_id: row
        for pack in packs
        for row in snapshots.packs.rows(pack, namespace)
    }


def _dependents(snapshots: Snapshots, rows: _Rows, doomed: set[str]) -> set[str]:
    """The kept snapshots whose chain of delta manifests runs through a doomed one."""
    crosses: dict[str, bool] = {}
    for start in rows.keys() - doomed:
        chain: list[str] = []
        current: str | None = start
        found = False
        while (
            current is not None and current not in crosses and len(chain) <= len(rows)
        ):
            record = rows.get(current)
            if record is None or snapshots.is_full(record):
                break
            chain.append(current)
            current = record.parent_id
            if current in doomed:
                found = True
                break
        if current is not None and current in crosses:
            found = crosses[current]
        for checkpoint_id in chain:
            crosses[checkpoint_id] = found
    return {checkpoint_id for checkpoint_id, found in crosses.items() if found}
