"""A run's journal as `Engine.history` shows it: one `StepView` per step.

Steps are listed in call order, numbered as the workflow took them (1, 2, 3...),
each `map_steps` item right under its map call with that call's number and the
user's key (`3 [mail-0]`). `resumable show`, the dashboard, export and
`Engine.fork(at_step=)` all use these numbers; how items are stored stays inside
`map_items`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from resumable._engine.clock import datetime_of
from resumable._engine.journal import load_journal
from resumable._engine.ledger import cached_source
from resumable._engine.map_items import item_seqs
from resumable.errors import ResumableError
from resumable.serde import Serde
from resumable.serde.chunked import stored_size
from resumable.stores.kinds import JournalKind
from resumable.stores.places import step_place
from resumable.stores.protocol import RunRecord, RunStore, StepRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class StepView:
    """One journal entry as `Engine.history()` shows it."""

    seq: int
    """The step's number in call order (1, 2, 3...); a `map_steps` item has its
    map call's number, and its key in `item_key`."""
    name: str
    status: str
    attempts: int
    started_at: datetime
    duration_ms: int
    fingerprint: str
    output_bytes: int
    inherited_from: str | None
    """The run this step belongs to when it is shared through a fork."""
    item_key: str | None = None
    """For a `map_steps` item: the key the workflow gave it (`key=`, or the item)."""
    _payload: bytes | None
    _place: str
    _serde: Serde
    _usage: bytes | None = None

    def output(self) -> Any:
        """The recorded result, or for a failed step the recorded error as a dict."""
        return self._serde.loads(self._payload or b"", place=self._place)

    def view(self) -> Any:
        """`output()` as plain JSON-like data, readable without the step's types.

        Tagged values keep their type name (`{"$type": "mod:Class", ...fields}`);
        nothing is imported or constructed (see `resumable.serde.view`).

        Raises:
            CorruptCheckpointError: The stored value is damaged or over the limit.
        """
        return self._serde.view(self._payload or b"", place=self._place)

    def cached_from(self) -> tuple[str, int] | None:
        """The (run id, seq) its value was served from by the step cache, or None.

        None too when its usage cannot be read here (damaged, or encrypted with
        a key this process lacks).
        """
        if self._usage is None:
            return None
        try:
            raw = self._serde.loads(self._usage, place=self._place + " usage")
        except ResumableError:
            return None
        return cached_source(raw)


async def run_history(store: RunStore, serde: Serde, run: RunRecord) -> list[StepView]:
    """The run's journal in call order, including steps shared through a fork."""
    journal = await load_journal(store, run, serde=serde)
    return [
        _step_view(record, run.run_id, serde, number=number, item_key=key)
        for number, key, record in in_call_order(journal, serde)
    ]


def in_call_order(
    journal: dict[int, StepRecord], serde: Serde
) -> list[tuple[int, str | None, StepRecord]]:
    """Each step with its number and item key, items under their map call.

    An item no map call lists (recorded before map calls listed their keys, or
    with keys unreadable here) comes last, under its stored seq and no key.
    """
    items = {
        seq: record
        for seq, record in journal.items()
        if record.kind is JournalKind.BATCH_ITEM
    }
    ordered: list[tuple[int, str | None, StepRecord]] = []
    for seq in sorted(journal):
        record = journal[seq]
        if record.kind is not JournalKind.STEP:
            continue
        ordered.append((seq, None, record))
        for item_seq, key in (item_seqs(record, serde) or {}).items():
            item = items.pop(item_seq, None)
            if item is not None:
                ordered.append((seq, key, item))
    ordered.extend((seq, None, items[seq]) for seq in sorted(items))
    return ordered


def _step_view(
    record: StepRecord,
    run_id: str,
    serde: Serde,
    *,
    number: int,
    item_key: str | None,
) -> StepView:
    return StepView(
        seq=number,
        item_key=item_key,
        name=record.name,
        status=record.status,
        attempts=record.attempts,
        started_at=datetime_of(record.started_at_ms),
        duration_ms=record.finished_at_ms - record.started_at_ms,
        fingerprint=record.fingerprint,
        output_bytes=stored_size(record.output),
        inherited_from=None if record.run_id == run_id else record.run_id,
        _payload=record.output,
        _place=step_place(record.run_id, record.seq, record.name),
        _serde=serde,
        _usage=record.usage,
    )
