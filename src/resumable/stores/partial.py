"""A full `Store` over a store that implements only some of it.

The engine holds a `Store`. A store of your own may implement only `RunStore`
(and any of `SnapshotStore`, `PacksSnapshots`, `RunListing`, `Maintenance`): `complete` gives the
engine a `Store` whose missing parts raise `CapabilityMissing` naming the part,
the call and the store, when (and only when) they are used. Running workflows
needs nothing beyond `RunStore`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import cast

from resumable.errors import CapabilityMissing
from resumable.stores.capabilities import Capabilities
from resumable.stores.protocol import (
    NO_CHUNKS,
    DeleteResult,
    InputRecord,
    Lease,
    Maintenance,
    PacksSnapshots,
    Payload,
    PayloadKind,
    QueuePolicy,
    RunListing,
    RunQuery,
    RunRecord,
    RunStore,
    RunUpdate,
    SnapshotRecord,
    SnapshotStore,
    StepRecord,
    Store,
    ThreadRecord,
)


def complete(store: RunStore, capabilities: Capabilities) -> Store:
    """`store` itself if it is a full Store, else a `PartialStore` over it."""
    parts = (capabilities.snapshots, capabilities.packs, capabilities.listing)
    if all(parts) and capabilities.maintenance:
        return cast("Store", store)  # checked by Capabilities.of: every part
    return PartialStore(store, capabilities)


def as_store(store: RunStore) -> Store:
    """`complete` with the capabilities checked here (for code that holds no engine)."""
    return complete(store, Capabilities.of(store))


class PartialStore:
    """Delegates what `inner` implements; the rest raises `CapabilityMissing`."""

    def __init__(self, inner: RunStore, capabilities: Capabilities) -> None:
        self.inner = inner
        self.url = inner.url
        # each cast is backed by the isinstance check Capabilities.of made
        self._snapshots = (
            cast("SnapshotStore", inner) if capabilities.snapshots else None
        )
        self._packs = cast("PacksSnapshots", inner) if capabilities.packs else None
        self._listing = cast("RunListing", inner) if capabilities.listing else None
        self._maintenance = (
            cast("Maintenance", inner) if capabilities.maintenance else None
        )

    def __repr__(self) -> str:
        return f"PartialStore({self.inner!r})"

    def _missing(self, capability: str, call: str) -> CapabilityMissing:
        return CapabilityMissing(store=self.url, capability=capability, call=call)

    def _snapshot_part(self, call: str) -> SnapshotStore:
        if self._snapshots is None:
            raise self._missing("SnapshotStore", call)
        return self._snapshots

    def _listing_part(self, call: str) -> RunListing:
        if self._listing is None:
            raise self._missing("RunListing", call)
        return self._listing

    def _maintenance_part(self, call: str) -> Maintenance:
        if self._maintenance is None:
            raise self._missing("Maintenance", call)
        return self._maintenance

    # --- RunStore: always there ---------------------------------------------------
    async def create_run(self, run: RunRecord) -> RunRecord:
        return await self.inner.create_run(run)

    async def get_run(self, run_id: str) -> RunRecord | None:
        return await self.inner.get_run(run_id)

    async def acquire_lease(
        self,
        run_id: str,
        *,
        owner: str,
        now_ms: int,
        ttl_ms: int,
        take_over: str | None = None,
    ) -> Lease | None:
        return await self.inner.acquire_lease(
            run_id, owner=owner, now_ms=now_ms, ttl_ms=ttl_ms, take_over=take_over
        )

    async def renew_lease(
        self, run_id: str, *, fence: int, now_ms: int, ttl_ms: int
    ) -> None:
        await self.inner.renew_lease(run_id, fence=fence, now_ms=now_ms, ttl_ms=ttl_ms)

    async def update_run(self, run_id: str, *, fence: int, update: RunUpdate) -> None:
        await self.inner.update_run(run_id, fence=fence, update=update)

    async def cancel_run(self, run_id: str, *, now_ms: int) -> RunRecord:
        return await self.inner.cancel_run(run_id, now_ms=now_ms)

    async def reopen_run(self, run_id: str, *, now_ms: int) -> bool:
        return await self.inner.reopen_run(run_id, now_ms=now_ms)

    async def claim_runs(
        self,
        *,
        owner: str,
        now_ms: int,
        ttl_ms: int,
        limit: int,
        workflows: Collection[str],
        queues: Mapping[str, QueuePolicy],
        versions: Collection[str] | None = None,
    ) -> list[Lease]:
        return await self.inner.claim_runs(
            owner=owner,
            now_ms=now_ms,
            ttl_ms=ttl_ms,
            limit=limit,
            workflows=workflows,
            queues=queues,
            versions=versions,
        )

    async def load_journal(
        self, run_id: str, *, up_to_seq: int | None = None
    ) -> list[StepRecord]:
        return await self.inner.load_journal(run_id, up_to_seq=up_to_seq)

    async def commit_step(self, step: StepRecord, *, fence: int) -> None:
        await self.inner.commit_step(step, fence=fence)

    async def send_input(self, record: InputRecord) -> bool:
        return await self.inner.send_input(record)

    async def get_inputs(self, run_id: str) -> dict[str, bytes]:
        return await self.inner.get_inputs(run_id)

    async def close(self) -> None:
        await self.inner.close()

    # --- SnapshotStore --------------------------------------------------------------
    async def put_chunks(self, chunks: Mapping[str, bytes]) -> None:
        await self._snapshot_part("put_chunks").put_chunks(chunks)

    async def get_chunks(self, hashes: Collection[str]) -> dict[str, bytes]:
        return await self._snapshot_part("get_chunks").get_chunks(hashes)

    async def save_snapshot(
        self, snapshot: SnapshotRecord, *, chunks: Mapping[str, bytes] = NO_CHUNKS
    ) -> None:
        await self._snapshot_part("save_snapshot").save_snapshot(
            snapshot, chunks=chunks
        )

    async def load_snapshot(
        self, thread_id: str, *, namespace: str = "", checkpoint_id: str | None = None
    ) -> SnapshotRecord | None:
        return await self._snapshot_part("load_snapshot").load_snapshot(
            thread_id, namespace=namespace, checkpoint_id=checkpoint_id
        )

    async def list_snapshots(
        self,
        thread_id: str,
        *,
        namespace: str | None = "",
        before: str | None = None,
        limit: int | None = None,
    ) -> list[SnapshotRecord]:
        return await self._snapshot_part("list_snapshots").list_snapshots(
            thread_id, namespace=namespace, before=before, limit=limit
        )

    async def swap_snapshots(
        self,
        thread_id: str,
        old: Sequence[SnapshotRecord],
        *,
        by: SnapshotRecord | None,
        chunks: Mapping[str, bytes] = NO_CHUNKS,
        durable: bool = True,
    ) -> bool:
        if self._packs is None:
            raise self._missing("PacksSnapshots", "swap_snapshots")
        return await self._packs.swap_snapshots(
            thread_id, old, by=by, chunks=chunks, durable=durable
        )

    async def delete_snapshots(
        self, thread_id: str, keys: Collection[tuple[str, str]]
    ) -> int:
        part = self._snapshot_part("delete_snapshots")
        return await part.delete_snapshots(thread_id, keys)

    async def delete_thread(self, thread_id: str) -> int:
        return await self._snapshot_part("delete_thread").delete_thread(thread_id)

    async def list_threads(
        self,
        *,
        prefix: str | None = None,
        after: tuple[int, str] | None = None,
        limit: int = 100,
    ) -> list[ThreadRecord]:
        return await self._snapshot_part("list_threads").list_threads(
            prefix=prefix, after=after, limit=limit
        )

    async def delete_unreferenced_chunks(self, limit: int) -> int:
        if self._snapshots is None:
            return 0  # a store without snapshots holds no chunks to collect
        return await self._snapshots.delete_unreferenced_chunks(limit)

    # --- RunListing ---------------------------------------------------------------
    async def list_runs(self, query: RunQuery) -> list[RunRecord]:
        return await self._listing_part("list_runs").list_runs(query)

    async def count_runs(self, query: RunQuery) -> dict[tuple[str, str | None], int]:
        return await self._listing_part("count_runs").count_runs(query)

    async def list_inputs(self, run_id: str) -> list[InputRecord]:
        return await self._listing_part("list_inputs").list_inputs(run_id)

    # --- Maintenance --------------------------------------------------------------
    async def delete_runs(self, run_ids: Collection[str]) -> DeleteResult:
        return await self._maintenance_part("delete_runs").delete_runs(run_ids)

    async def scan_payloads(
        self, kind: PayloadKind, *, after: tuple[str | int, ...] | None, limit: int
    ) -> list[Payload]:
        return await self._maintenance_part("scan_payloads").scan_payloads(
            kind, after=after, limit=limit
        )

    async def replace_payload(self, payload: Payload, *, data: bytes) -> bool:
        return await self._maintenance_part("replace_payload").replace_payload(
            payload, data=data
        )
