"""The rules of `swap_snapshots` and of snapshot keys, for stores and the engine.

`check_swap` and `keys_of` serve the optional packing capability,
`protocol.PacksSnapshots`; `through` bounds a listing that reaches a checkpoint
(as reading a pack's newest row does).

The engine keeps a thread's older snapshots as packs (`resumable._engine.packs`)
only on a store that declares `PacksSnapshots`; on any other `SnapshotStore`
they stay loose rows, and saving, loading, history and `delete_states` work the
same. The Protocol is declared in `protocol`, apart from `SnapshotStore` so that
a store of your own need not implement it, and beside `Store`, which includes
it; this module builds on `protocol`, never the reverse.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from resumable.stores.protocol import SnapshotRecord


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


def through(checkpoint_id: str) -> str:
    """The `before` of `Store.list_snapshots` that still lists `checkpoint_id`.

    The smallest string after the id that every store accepts (NUL is not one).
    """
    return checkpoint_id + "\x01"
