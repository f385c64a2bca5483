"""A run and its journal as stored, and how messages name their payloads.

The one place that reads a run record (`get_run`) or a journal with the steps
a fork shares (`load_journal`) for the modules above: executing, forking,
listing, exporting and the ledger.
"""

from __future__ import annotations

from resumable._engine.map_items import item_seqs
from resumable.errors import CorruptCheckpointError, RunNotFound, UsageError
from resumable.serde import Serde
from resumable.stores.checks import checked_run, checked_steps
from resumable.stores.kinds import JournalKind
from resumable.stores.protocol import RunRecord, RunStore, StepRecord
from resumable.stores.stubs import SupportsArchive
from resumable.stores.urls import redact


async def get_run(store: RunStore, run_id: str) -> RunRecord:
    """The stored run, checked.

    Raises:
        RunNotFound: there is no such run.
    """
    run = await store.get_run(run_id)
    if run is None:
        raise RunNotFound(run_id=run_id)
    return checked_run(run)


async def load_journal(
    store: RunStore, run: RunRecord, up_to: int | None = None, *, serde: Serde
) -> dict[int, StepRecord]:
    """A run's journal by seq, with the steps it shares with the run it was forked from.

    A fork shares the original's steps up to its fork point, and the items of
    the `map_steps` calls among them (found through the keys each call lists).
    """
    journal: dict[int, StepRecord] = {}
    if run.forked_from is not None and run.fork_seq:
        parent = await store.get_run(run.forked_from)
        if parent is None:
            raise CorruptCheckpointError(
                place=f"run {run.run_id!r}",
                detail=f"it was forked from run {run.forked_from!r}, which no longer exists",
            )
        checked_run(parent)
        limit = run.fork_seq if up_to is None else min(up_to, run.fork_seq)
        # items sit far above every step seq: read them all, keep the shared calls'
        inherited = await load_journal(store, parent, serde=serde)
        journal.update(_shared(inherited, limit, serde))
    steps = await store.load_journal(run.run_id, up_to_seq=up_to)
    if not steps and run.is_terminal:
        await refuse_archived(store, run.run_id)
    for record in checked_steps(run.run_id, steps):
        journal[record.seq] = record
    return journal


def _shared(
    journal: dict[int, StepRecord], limit: int, serde: Serde
) -> dict[int, StepRecord]:
    """The steps at or before `limit`, and the items of the map calls among them."""
    shared: dict[int, StepRecord] = {}
    for seq, record in journal.items():
        if record.kind is JournalKind.STEP and seq <= limit:
            shared[seq] = record
            for item_seq in item_seqs(record, serde) or {}:
                item = journal.get(item_seq)
                if item is not None:
                    shared[item_seq] = item
    return shared


async def refuse_archived(store: RunStore, run_id: str) -> None:
    """UsageError if the run's journal is archived where `store` cannot read it.

    A store opened with `?blobs=` (`OffloadStore`) reads archived journals
    through and does not declare `SupportsArchive`; its wrapped store does.
    """
    if isinstance(store, SupportsArchive) and (
        await store.load_archive_stub(run_id) is not None
    ):
        raise UsageError(
            f"run {run_id!r}: its journal is archived in an object store, which "
            f"store {redact(store.url)} was opened without: add ?blobs=... (the "
            f"bucket it was archived to) to the store URL"
        )
