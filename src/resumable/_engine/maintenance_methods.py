"""The Engine's maintenance and analysis methods: gc, archive, rekey, export, check.

A group of `Engine`'s public methods, as redis-py groups its commands: each
delegates to one module of this layer, and the Engine inherits them, so users
and the API reference see one class.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta

from resumable._engine.check import CheckReport, check_runs
from resumable._engine.clock import Clock
from resumable._engine.context import Runtime
from resumable._engine.export import StepExport, export_query, export_steps
from resumable._engine.maintenance import (
    archive,
    collect_garbage,
    unarchive,
    unarchive_thread,
)
from resumable._engine.rekey import RekeyReport, rekey
from resumable._engine.retention import GcReport
from resumable._engine.snapshots import Snapshots
from resumable.serde import Serde
from resumable.stores.archive import Archived
from resumable.stores.protocol import RunStatus, Store

__all__ = ["MaintenanceMethods"]


class MaintenanceMethods:
    """Collect, archive, re-key, export and check the runs of a store."""

    store: Store
    serde: Serde
    clock: Clock
    _runtime: Runtime
    _encrypted: bool
    _snapshots: Snapshots

    async def gc(
        self,
        *,
        older_than: timedelta | None = None,
        status: RunStatus | tuple[RunStatus, ...] = (
            "succeeded",
            "failed",
            "cancelled",
        ),
        keep_last: int | None = None,
        dry_run: bool = False,
        batch: int = 500,
        blobs_grace: timedelta = timedelta(hours=1),
    ) -> GcReport:
        """Delete finished runs (with their journals and inputs) and unused chunks.

        A run is due when it finished more than `older_than` ago, or its `ttl`
        (given when it started) has passed; with `keep_last` and no `older_than`,
        when it is not among the newest `keep_last` of its workflow. Runs that have
        not finished, runs a fork shares steps with, and children of unfinished
        parents are kept.

        Args:
            older_than: Age (since the run last changed) beyond which it is due.
            status: Which finished statuses may be deleted.
            keep_last: Keep this many of the newest finished runs of each workflow;
                alone, delete the other finished runs, whatever their age.
            dry_run: Report what would be deleted; delete nothing.
            batch: Runs per delete transaction.
            blobs_grace: With payload offload, objects no row references are
                deleted once older than this: younger ones may belong to a row
                about to commit (an upload precedes its row).
        """
        return await collect_garbage(
            self._runtime,
            older_than=older_than,
            status=status,
            keep_last=keep_last,
            dry_run=dry_run,
            batch=batch,
            blobs_grace=blobs_grace,
        )

    async def archive(
        self, *, older_than: timedelta, limit: int = 1000
    ) -> list[Archived]:
        """Move finished runs' journals to the object store, one object per run.

        Runs that finished more than `older_than` ago keep their run row (listed
        and returning their result as before) but their journal records and
        inputs move into one compressed object each and one stub row stays; they
        are shown, forked, checked and priced as before (`resumable.stores.archive`,
        `unarchive` puts them back). The saved states of threads whose newest save
        is that old move into one object per thread too, but for the newest
        snapshot of each namespace, which stays live, so loading a thread's
        latest state never reads the object store (`resumable.stores.archive`;
        `unarchive_thread` puts them back). Saving to an archived thread adds live
        rows beside its stub.

        Raises:
            UsageError: the engine has no object store (`blobs=`).
            StoreError: the object store did not take an archive (runs archived
                before it stay archived).
        """
        return await archive(
            self.store,
            self.clock,
            self._snapshots,
            older_than=older_than,
            limit=limit,
        )

    async def unarchive(self, run_id: str) -> bool:
        """Put an archived run's journal and inputs back in the primary store.

        Returns False when the run was not archived.

        Raises:
            UsageError: the engine has no object store (`blobs=`).
            RunNotFound: there is no such run.
            CorruptCheckpointError: the run's archive object is missing or damaged.
        """
        return await unarchive(self.store, run_id)

    async def unarchive_thread(self, thread_id: str) -> bool:
        """Put a thread's archived snapshots and chunks back in the primary store.

        Returns False when none of its snapshots was archived.

        Raises:
            UsageError: the engine has no object store (`blobs=`).
            CorruptCheckpointError: the thread's archive object is missing or damaged.
        """
        return await unarchive_thread(self.store, thread_id)

    async def rekey(self, *, batch: int = 500, dry_run: bool = False) -> RekeyReport:
        """Re-encrypt every payload not sealed with the current key (key rotation).

        Give the engine a key ring whose first key is the new one and that still
        holds the old ones; after rekey, the old keys can be dropped. A store
        written without encryption is encrypted in place the same way. Crash-safe:
        every payload stays readable throughout, and running it again finishes.
        """
        return await rekey(
            self.store,
            self.serde,
            encrypted=self._encrypted,
            batch=batch,
            dry_run=dry_run,
        )

    def export(
        self,
        run_ids: Sequence[str] = (),
        *,
        workflow: str | None = None,
        status: RunStatus | Sequence[RunStatus] | None = None,
        since: datetime | timedelta | None = None,
        run_input: bool = False,
        steps: slice | None = None,
    ) -> AsyncIterator[StepExport]:
        """Every step of the selected runs as flat records, for analysis.

        `async for record in engine.export(workflow="analyze"): ...` yields one
        `StepExport` per journal entry (oldest run first, each in seq order) with
        timings, attempts, the args fingerprint, usage and cost, and the generic
        view of the result or error, readable without the application's code.

        Args:
            run_ids: These runs only (RunNotFound if one is missing); default:
                every run the other filters match.
            workflow: Runs of this workflow only.
            status: Runs in this status (or any of these) only.
            since: Runs created at or after this time, or within this long ago.
            run_input: Add the view of each run's input `(args, kwargs)`.
            steps: Only these of each run's steps, by position in its journal
                (`slice(-100, None)`: the newest 100); only those are read.
        """
        query = export_query(
            run_ids,
            workflow=workflow,
            status=status,
            since=since,
            run_input=run_input,
            now_ms=self.clock.now_ms(),
            steps=steps,
        )
        return export_steps(self.store, self.serde, self._runtime.prices, query)

    async def check(
        self,
        *,
        status: RunStatus | list[RunStatus] | None = None,
        workflow: str | None = None,
        version: str | None = None,
        run_ids: list[str] | None = None,
        limit: int | None = None,
        since: timedelta | None = None,
        timeout_s: float = 10.0,
    ) -> CheckReport:
        """Replay stored runs against the code loaded now, executing nothing.

        Each run's workflow runs from the top as a resume would, but every step,
        child run, wait and sleep is answered from the journal or stops the check
        there: nothing executes and nothing is written. See `CheckReport`.

        Args:
            status: Which runs (default: those that may execute again: queued,
                running, waiting, sleeping, failed).
            workflow: Only runs of this workflow.
            version: Only runs that started on this workflow version.
            run_ids: Only these runs (then `status` and `workflow` are ignored).
            limit: At most this many runs, newest first.
            since: Only runs updated within this long.
            timeout_s: How long one run's workflow body may take before its
                verdict is "timeout" (a body awaiting something other than steps).
        """
        return await check_runs(
            self._runtime,
            status=status,
            workflow=workflow,
            version=version,
            run_ids=run_ids,
            limit=limit,
            since=since,
            timeout_s=timeout_s,
        )
