"""What a journal record is, and the one place that maps it to its stored `seq`.

A run's journal holds three kinds of record, all stored as step records keyed by
`(run_id, seq)`:

| kind | index | stored seq |
| --- | --- | --- |
| `STEP` | the call's order in the run: 1, 2, ... | the index itself |
| `LEDGER` | the fence of the execution that wrote it | `-fence` (at most 0) |
| `BATCH_ITEM` | a `map_steps` item's 61-bit key hash | `KEYED_SEQ_BASE + hash` |

Readers ask `StepRecord.kind` (or `kind_of(seq)`) and never compare a seq's sign
or range themselves: only this module knows the encoding, which is what every
store already holds (a store compares seqs only to keep a fork's `up_to_seq`).
"""

from __future__ import annotations

import enum
from typing import Final

KEYED_SEQ_BASE: Final = 1 << 62
"""The first seq of a batch item; step seqs never get there."""
_MAX_SEQ: Final = (1 << 63) - 1  # a signed 64-bit column holds every seq


class JournalKind(enum.Enum):
    """What a journal record records (see the module docstring)."""

    STEP = "step"
    """A `@step` call's outcome, at its place in the run's call order."""
    LEDGER = "ledger"
    """What one execution replayed (and the usage that replay reused)."""
    BATCH_ITEM = "batch_item"
    """One item of a `map_steps` call, found by its key rather than by order."""


def kind_of(seq: int) -> JournalKind:
    """The kind of the record stored at `seq`."""
    if seq >= KEYED_SEQ_BASE:
        return JournalKind.BATCH_ITEM
    if seq > 0:
        return JournalKind.STEP
    return JournalKind.LEDGER


def is_step(seq: int) -> bool:
    """Whether `seq` holds a step call (neither a ledger entry nor a batch item)."""
    return 0 < seq < KEYED_SEQ_BASE


def index_of(seq: int) -> int:
    """The record's index within its kind: step number, fence, or item key hash."""
    kind = kind_of(seq)
    if kind is JournalKind.BATCH_ITEM:
        return seq - KEYED_SEQ_BASE
    return -seq if kind is JournalKind.LEDGER else seq


def seq_of(kind: JournalKind, index: int) -> int:
    """The stored seq of the record of `kind` at `index` (the inverse of both above).

    Raises:
        ValueError: `index` is out of the kind's range.
    """
    if kind is JournalKind.STEP and 0 < index < KEYED_SEQ_BASE:
        return index
    if kind is JournalKind.LEDGER and 0 <= index <= KEYED_SEQ_BASE:
        return -index
    if kind is JournalKind.BATCH_ITEM and 0 <= index <= _MAX_SEQ - KEYED_SEQ_BASE:
        return KEYED_SEQ_BASE + index
    raise ValueError(f"{kind.value} index {index} is out of range")
