"""A run's journal as `Engine.history` shows it: one `StepView` per step."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from resumable._engine.clock import datetime_of
from resumable._engine.journal import load_journal
from resumable.serde import Serde
from resumable.serde.chunked import stored_size
from resumable.stores.kinds import JournalKind
from resumable.stores.places import step_place
from resumable.stores.protocol import RunRecord, StepRecord, Store


@dataclass(frozen=True, slots=True, kw_only=True)
class StepView:
    """One journal entry as `Engine.history()` shows it."""

    seq: int
    name: str
    status: str
    attempts: int
    started_at: datetime
    duration_ms: int
    fingerprint: str
    output_bytes: int
    inherited_from: str | None
    """The run this step belongs to when it is shared through a fork."""
    _payload: bytes | None
    _place: str
    _serde: Serde

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


async def run_history(store: Store, serde: Serde, run: RunRecord) -> list[StepView]:
    """The run's journal in seq order, including steps shared through a fork."""
    journal = await load_journal(store, run)
    return [
        _step_view(record, run.run_id, serde)
        for _, record in sorted(journal.items())
        if record.kind is not JournalKind.LEDGER
    ]


def _step_view(record: StepRecord, run_id: str, serde: Serde) -> StepView:
    return StepView(
        seq=record.seq,
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
    )
