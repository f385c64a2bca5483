"""Where a `map_steps` call's items live in the journal, and under which key.

The map call records, at its own seq, the keys of its items (`map:<step>`); each
item is journaled at a seq derived from the map call's seq and the item's key.
Readers (history, export, the CLI and the dashboard) list each item under its
map call by the user's key through `item_seqs`; the derived seq stays internal.
"""

from __future__ import annotations

import hashlib

from resumable.errors import ResumableError
from resumable.serde import Serde
from resumable.stores.kinds import JournalKind, seq_of
from resumable.stores.places import step_place
from resumable.stores.protocol import StepRecord

_MAP_PREFIX = "map:"


def keyed_seq(map_seq: int, key: str) -> int:
    """The journal seq of the item with `key` in the map call at `map_seq`."""
    digest = hashlib.blake2b(f"{map_seq}\x00{key}".encode(), digest_size=8).digest()
    return seq_of(JournalKind.BATCH_ITEM, int.from_bytes(digest, "big") >> 3)


def map_record_name(step_name: str) -> str:
    """The name a map call of `step_name` records at its own seq."""
    return f"{_MAP_PREFIX}{step_name}"


def item_seqs(record: StepRecord, serde: Serde) -> dict[int, str] | None:
    """The items a map call's record lists: their seqs and keys, in item order.

    None when `record` is not a map call's, or its keys cannot be read here
    (damaged, or encrypted with a key this process lacks).
    """
    if not record.name.startswith(_MAP_PREFIX) or record.output is None:
        return None
    place = step_place(record.run_id, record.seq, record.name)
    try:
        keys = serde.loads(record.output, place=place)
    except ResumableError:
        return None
    if not isinstance(keys, list):
        return None
    return {keyed_seq(record.seq, str(key)): str(key) for key in keys}


def journal_seq(seq: int, item_key: str | None) -> int:
    """The stored seq of a step as history shows it: `seq`, or its item's."""
    return seq if item_key is None else keyed_seq(seq, item_key)
