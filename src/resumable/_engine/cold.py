"""Readying a thread gone cold for its archive (`Engine.archive`).

Before a thread's snapshots are moved to an object (`stores.archive`), each
namespace keeps its newest snapshot live, and that one must load on its own:

- its older loose rows are packed first (all but the newest), so that the
  rows left loose after the archive are all newer than the archived ones and
  packing goes on as before;
- a newest snapshot stored as a delta is rewritten as a full one
  (`Snapshots.make_full`), so loading it needs none of the archived ones.

Pack namespaces keep nothing live: the packs move whole.
"""

from __future__ import annotations

import logging

from resumable._engine.packs import is_pack_namespace
from resumable._engine.snapshots import Snapshots
from resumable.errors import CorruptCheckpointError
from resumable.stores.protocol import SnapshotRecord

__all__ = ["ready_thread"]

_log = logging.getLogger("resumable")


async def ready_thread(snapshots: Snapshots, thread_id: str) -> set[tuple[str, str]]:
    """Pack and make full as above; the (namespace, checkpoint_id) to keep live."""
    store = snapshots.store
    records = await store.list_snapshots(thread_id, namespace=None)
    namespaces = sorted(
        {r.namespace for r in records if not is_pack_namespace(r.namespace)}
    )
    keep: set[tuple[str, str]] = set()
    for namespace in namespaces:
        await snapshots.packs.pack(thread_id, namespace, keep_loose=1, least=1)
        newest = await store.load_snapshot(thread_id, namespace=namespace)
        if newest is None:
            continue
        if await _full(snapshots, newest):
            keep.add((namespace, newest.checkpoint_id))
    return keep


async def _full(snapshots: Snapshots, newest: SnapshotRecord) -> bool:
    """Make `newest` full; False if it was deleted meanwhile (nothing to keep)."""
    try:
        await snapshots.make_full(newest)
    except CorruptCheckpointError as exc:
        gone = await snapshots.store.load_snapshot(
            newest.thread_id,
            namespace=newest.namespace,
            checkpoint_id=newest.checkpoint_id,
        )
        if gone is None:
            # another engine deleted the thread (and gc its chunks) since it was
            # read: what is missing was deleted on purpose, nothing was lost
            _log.info(
                "archiving thread %r: it was deleted meanwhile (delete_thread); "
                "nothing was lost and there is nothing to archive",
                newest.thread_id,
            )
            return False
        # it stays as it is: loading it fails as it did, and its thread's other
        # snapshots are archived all the same (one damaged thread stops no archive)
        _log.warning("archiving thread %r: %s", newest.thread_id, exc)
    return True
