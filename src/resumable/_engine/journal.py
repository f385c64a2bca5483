"""A run and its journal as stored, and how messages name their payloads.

The one place that reads a run record (`get_run`) or a journal with the steps
a fork shares (`load_journal`) for the modules above: executing, forking,
listing, exporting and the ledger.
"""

from __future__ import annotations

from resumable.errors import CorruptCheckpointError, RunNotFound, UsageError
from resumable.stores._records import checked_run, checked_steps
from resumable.stores.archiving import SupportsArchive
from resumable.stores.kinds import JournalKind
from resumable.stores.protocol import RunRecord, StepRecord, Store
from resumable.stores.urls import redact


async def get_run(store: Store, run_id: str) -> RunRecord:
    """The stored run, checked.

    Raises:
        RunNotFound: there is no such run.
    """
    run = await store.get_run(run_id)
    if run is None:
        raise RunNotFound(run_id=run_id)
    return checked_run(run)


async def load_journal(
    store: Store, run: RunRecord, up_to: int | None = None
) -> dict[int, StepRecord]:
    """A run's journal by seq, with the steps it shares with the run it was forked from."""
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
        inherited = await load_journal(store, parent, limit)
        journal.update(
            (seq, record)
            for seq, record in inherited.items()
            if record.kind is not JournalKind.LEDGER  # the parent's executions'
        )
    steps = await store.load_journal(run.run_id, up_to_seq=up_to)
    if not steps and run.is_terminal:
        await refuse_archived(store, run.run_id)
    for record in checked_steps(run.run_id, steps):
        journal[record.seq] = record
    return journal


async def refuse_archived(store: Store, run_id: str) -> None:
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
