"""The optional packing capability: a store that swaps snapshots as read for one record.

The engine keeps a thread's older snapshots as packs (`resumable._engine.packs`)
only on a store that declares `PacksSnapshots`; on any other `SnapshotStore`
they stay loose rows, and saving, loading, history and `delete_states` work the
same. Declared apart from `SnapshotStore` so that a store of your own need not
implement it; `protocol` names it too, and the built-in stores implement it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

if TYPE_CHECKING:
    from resumable.stores.protocol import SnapshotRecord

NO_CHUNKS: Final[Mapping[str, bytes]] = MappingProxyType({})
"""`save_snapshot`'s and `swap_snapshots`' default: no new chunks, all are stored.

Defined here, not in `protocol` (which names it too), as `protocol` imports this
module.
"""


@runtime_checkable
class PacksSnapshots(Protocol):
    """A snapshot store with a compare-and-swap of snapshot records."""

    async def swap_snapshots(
        self,
        thread_id: str,
        old: Sequence[SnapshotRecord],
        *,
        by: SnapshotRecord | None,
        chunks: Mapping[str, bytes] = NO_CHUNKS,
        durable: bool = True,
    ) -> bool:
        """Replace snapshots, as they were read, by one record (a pack) or by none.

        In one transaction: if every record of `old` is still stored at its key
        (thread, namespace, checkpoint_id) with the same manifest bytes, and no
        record other than one of `old` is stored at `by`'s key, delete them,
        insert `by` (when given: it may take the key of one of them, as a pack
        rewritten in place does), store `chunks` (a hash already present is
        left alone) and return True. A chunk they named and `by` does not is
        left for collection. Otherwise change nothing and return False: another
        engine changed, swapped or deleted one of them meanwhile, and the caller
        reads again before it tries again.

        `chunks` are the new chunks `by` names, as for `save_snapshot`: the
        others it names must be stored already. Were the swap to happen but `by`
        names a chunk neither in `chunks` nor stored (a collection deleted it),
        nothing changes and `ChunksMissing` is raised. The check, the swap and
        storing the chunks are atomic with `delete_unreferenced_chunks`, so a
        collection between storing the chunks and swapping cannot take them (as
        it could from a `put_chunks` before the swap).

        With `durable=False` the swap only saves space (packing): the store may
        commit it less durably than other writes (SQLite: without an fsync),
        provided that a swap it loses is lost whole, the records it would have
        replaced staying. A swap that deletes rows (`Engine.delete_states`) is
        durable like any write.

        Raises:
            ValueError: a record of `old`, or `by`, belongs to another thread
                (`check_swap`), before anything is read or written.
            ChunksMissing: `by` names a chunk neither given nor stored; nothing
                changed.
        """
        ...


def check_swap(
    thread_id: str, old: Sequence[SnapshotRecord], by: SnapshotRecord | None
) -> None:
    """What every `swap_snapshots` checks first: all records are of the thread."""
    for record in (*old, *(() if by is None else (by,))):
        if record.thread_id != thread_id:
            raise ValueError(
                f"swap_snapshots: checkpoint {record.checkpoint_id!r} belongs to "
                f"thread {record.thread_id!r}, not to {thread_id!r}, whose "
                f"snapshots it would replace"
            )


def keys_of(records: Sequence[SnapshotRecord]) -> list[tuple[str, str]]:
    """The `(namespace, checkpoint_id)` keys of `records`, each once, in order."""
    return list(dict.fromkeys((r.namespace, r.checkpoint_id) for r in records))
