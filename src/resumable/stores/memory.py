"""MemoryStore: the Store protocol in plain dicts, for tests and throwaway runs.

Every method runs to completion without awaiting, so each is atomic with respect
to the event loop: the same guarantee a transaction gives the SQL stores.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence

from resumable.errors import ChunksMissing, LeaseLost, RunNotFound
from resumable.stores import _rules, claims, packing
from resumable.stores._records import checked_thread
from resumable.stores.checks import checked_run
from resumable.stores.feeds import FeedEntry
from resumable.stores.packing import check_swap
from resumable.stores.protocol import (
    NO_CHUNKS,
    DeleteResult,
    InputRecord,
    Lease,
    Payload,
    PayloadKind,
    QueuePolicy,
    RunQuery,
    RunRecord,
    RunUpdate,
    ScheduleRecord,
    SnapshotRecord,
    StepRecord,
    ThreadRecord,
)
from resumable.stores.step_cache import CacheEntry
from resumable.stores.stubs import ArchiveStub, ThreadStub


class MemoryStore:
    """A Store that keeps everything in this process's memory."""

    any_loop = True  # see capabilities.RunsOnAnyLoop
    local_writes = True  # see capabilities.LocalWrites

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._runs: dict[str, RunRecord] = {}
        self._steps: dict[str, dict[int, StepRecord]] = {}
        self._inputs: dict[str, dict[str, InputRecord]] = {}
        self._starts: dict[str, list[int]] = {}  # queue -> start times, for rate limits
        self._chunks: dict[str, bytes] = {}
        self._snapshots: dict[tuple[str, str], dict[str, SnapshotRecord]] = {}
        self._stubs: dict[str, ArchiveStub] = {}
        self._thread_stubs: dict[str, ThreadStub] = {}
        self._cache: dict[str, CacheEntry] = {}
        self._schedules: dict[str, ScheduleRecord] = {}
        self._feeds: dict[str, dict[str, list[FeedEntry]]] = {}  # run -> channel
        self._feed_keys: dict[tuple[str, str], set[str]] = {}

    # --- runs -------------------------------------------------------------------
    async def create_run(self, run: RunRecord) -> RunRecord:
        return self._runs.setdefault(run.run_id, run)

    async def get_run(self, run_id: str) -> RunRecord | None:
        return self._runs.get(run_id)

    async def list_runs(self, query: RunQuery) -> list[RunRecord]:
        found = [
            checked_run(run)
            for run in self._runs.values()
            if _rules.matches(run, query) and _rules.listed_after(run, query.after)
        ]
        found.sort(key=lambda run: (run.created_at_ms, run.run_id), reverse=True)
        return found[: query.limit]

    async def count_runs(self, query: RunQuery) -> dict[tuple[str, str | None], int]:
        return _rules.count_by_status_and_queue(
            run for run in self._runs.values() if _rules.matches(run, query)
        )

    async def acquire_lease(
        self,
        run_id: str,
        *,
        owner: str,
        now_ms: int,
        ttl_ms: int,
        take_over: str | None = None,
    ) -> Lease | None:
        run = self._require(run_id)
        if not _rules.can_acquire(run, owner=owner, now_ms=now_ms, take_over=take_over):
            return None
        return self._lease(run, owner=owner, now_ms=now_ms, ttl_ms=ttl_ms)

    async def renew_lease(
        self, run_id: str, *, fence: int, now_ms: int, ttl_ms: int
    ) -> None:
        run = self._fenced(run_id, fence)
        self._runs[run_id] = dataclasses.replace(
            run, lease_expires_at_ms=now_ms + ttl_ms
        )

    async def update_run(self, run_id: str, *, fence: int, update: RunUpdate) -> None:
        run = self._fenced(run_id, fence)
        self._runs[run_id] = _rules.apply_update(run, update)

    async def cancel_run(self, run_id: str, *, now_ms: int) -> RunRecord:
        run = self._require(run_id)
        if not run.is_terminal:
            run = _rules.cancelled(run, now_ms)
            self._runs[run_id] = run
        return run

    async def reopen_run(self, run_id: str, *, now_ms: int) -> bool:
        run = self._require(run_id)
        if run.status != "failed":
            return False
        self._runs[run_id] = _rules.reopened(run, now_ms)
        return True

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
        candidates = sorted(
            (
                run
                for run in self._runs.values()
                if run.workflow in workflows
                and claims.is_claimable(run, now_ms=now_ms, versions=versions)
            ),
            key=lambda run: (run.created_at_ms, run.run_id),
        )[: claims.candidate_window(limit)]
        admission = claims.Admission(queues)
        claimed: list[Lease] = []
        for run in candidates:
            if len(claimed) >= limit:
                break
            for name in admission.needs_load([run.queue]):
                admission.set_load(name, self._queue_load(name, queues[name], now_ms))
            if admission.admit(run.queue, is_start=run.status == "queued"):
                claimed.append(
                    self._lease(run, owner=owner, now_ms=now_ms, ttl_ms=ttl_ms)
                )
        for name in admission.starts:
            self._starts.setdefault(name, []).append(now_ms)
        return claimed

    async def delete_runs(self, run_ids: Collection[str]) -> DeleteResult:
        deleted: list[str] = []
        steps = inputs = size = 0
        for run_id in run_ids:
            run = self._runs.get(run_id)
            if run is None or not run.is_terminal:
                continue
            del self._runs[run_id]
            self._stubs.pop(run_id, None)
            journal = self._steps.pop(run_id, {}).values()
            values = self._inputs.pop(run_id, {}).values()
            for channel in self._feeds.pop(run_id, {}):
                self._feed_keys.pop((run_id, channel), None)
            steps, inputs = steps + len(journal), inputs + len(values)
            size += len(run.input) + len(run.output or b"")
            size += sum(len(s.output or b"") + len(s.usage or b"") for s in journal)
            size += sum(len(value.value) for value in values)
            deleted.append(run_id)
        gone = set(deleted)  # the step cache entries naming their rows go with them
        for key in [k for k, e in self._cache.items() if e.run_id in gone]:
            del self._cache[key]
        return DeleteResult(
            runs=len(deleted),
            steps=steps,
            inputs=inputs,
            run_ids=tuple(deleted),
            bytes=size,
        )

    # --- feeds (KeepsFeeds) ------------------------------------------------------
    async def append_feed(
        self,
        run_id: str,
        channel: str,
        payloads: Sequence[bytes],
        *,
        now_ms: int,
        once_key: str | None = None,
    ) -> int | None:
        self._require(run_id)
        entries = self._feeds.setdefault(run_id, {}).setdefault(channel, [])
        if once_key is not None:
            keys = self._feed_keys.setdefault((run_id, channel), set())
            if once_key in keys:
                return None
            keys.add(once_key)
        for payload in payloads:
            entries.append(
                FeedEntry(
                    run_id=run_id,
                    channel=channel,
                    offset=len(entries) + 1,
                    payload=bytes(payload),
                    created_at_ms=now_ms,
                )
            )
        return len(entries)

    async def read_feed(
        self, run_id: str, channel: str, *, after: int, limit: int
    ) -> list[FeedEntry]:
        entries = self._feeds.get(run_id, {}).get(channel, [])
        return entries[max(after, 0) : max(after, 0) + limit]

    # --- journal ----------------------------------------------------------------
    async def load_journal(
        self, run_id: str, *, up_to_seq: int | None = None
    ) -> list[StepRecord]:
        steps = self._steps.get(run_id, {})
        return [
            steps[seq] for seq in sorted(steps) if up_to_seq is None or seq <= up_to_seq
        ]

    async def commit_step(self, step: StepRecord, *, fence: int) -> None:
        self._fenced(step.run_id, fence, seq=step.seq)
        self._steps.setdefault(step.run_id, {})[step.seq] = step

    # --- archive (SupportsArchive) ------------------------------------------------
    async def archive_journal(self, stub: ArchiveStub) -> bool:
        run = self._runs.get(stub.run_id)
        if (
            run is None
            or not run.is_terminal
            or run.fence != stub.fence
            or stub.run_id in self._stubs
            or len(self._steps.get(stub.run_id, {})) != stub.steps
            or len(self._inputs.get(stub.run_id, {})) != stub.inputs
        ):
            return False
        self._steps.pop(stub.run_id, None)
        self._inputs.pop(stub.run_id, None)
        self._stubs[stub.run_id] = stub
        return True

    async def load_archive_stub(self, run_id: str) -> ArchiveStub | None:
        return self._stubs.get(run_id)

    async def restore_journal(
        self,
        stub: ArchiveStub,
        steps: Sequence[StepRecord],
        inputs: Sequence[InputRecord],
    ) -> bool:
        held = self._stubs.get(stub.run_id)
        if held is None or held.key != stub.key:
            return False
        del self._stubs[stub.run_id]
        # a row written meanwhile (none should be) is kept, as the SQL stores do
        journal = self._steps.setdefault(stub.run_id, {})
        for step in steps:
            journal.setdefault(step.seq, step)
        sent = self._inputs.setdefault(stub.run_id, {})
        for record in inputs:
            sent.setdefault(record.key, record)
        return True

    # --- step cache (SupportsStepCache) ------------------------------------------
    async def put_cache_entries(self, entries: Sequence[CacheEntry]) -> None:
        for entry in entries:
            self._cache[entry.key] = entry

    async def lookup_cache(
        self, key: str, *, now_ms: int
    ) -> tuple[CacheEntry, StepRecord] | None:
        entry = self._cache.get(key)
        if entry is None or not entry.is_live(now_ms):
            return None
        row = self._steps.get(entry.run_id, {}).get(entry.seq)
        return None if row is None else (entry, row)

    async def clear_cache(
        self, *, step: str | None = None, workflow: str | None = None
    ) -> int:
        doomed = [
            key
            for key, entry in self._cache.items()
            if (step is None or entry.step == step)
            and (workflow is None or entry.workflow == workflow)
        ]
        for key in doomed:
            del self._cache[key]
        return len(doomed)

    async def list_archive_stubs(
        self, *, after: str | None, limit: int
    ) -> list[ArchiveStub]:
        ids = sorted(i for i in self._stubs if after is None or i > after)
        return [self._stubs[i] for i in ids[:limit]]

    # --- thread archive (SupportsThreadArchive) -------------------------------------
    async def archive_snapshots(
        self,
        stub: ThreadStub,
        *,
        moved: Collection[tuple[str, str]],
        chunks: Collection[str],
        replaces: str | None,
    ) -> bool:
        held = self._thread_stubs.get(stub.thread_id)
        if (None if held is None else held.key) != replaces or not all(
            cp in self._snapshots.get((stub.thread_id, ns), {}) for ns, cp in moved
        ):
            return False
        for ns, cp in moved:
            del self._snapshots[(stub.thread_id, ns)][cp]
        named = {
            ref
            for snaps in self._snapshots.values()
            for snap in snaps.values()
            for ref in snap.chunk_refs
        }
        for digest in set(chunks) - named:
            self._chunks.pop(digest, None)
        self._thread_stubs[stub.thread_id] = stub
        return True

    async def load_thread_stub(self, thread_id: str) -> ThreadStub | None:
        return self._thread_stubs.get(thread_id)

    async def restore_snapshots(
        self,
        stub: ThreadStub,
        snapshots: Sequence[SnapshotRecord],
        chunks: Mapping[str, bytes],
    ) -> bool:
        held = self._thread_stubs.get(stub.thread_id)
        if held is None or held.key != stub.key:
            return False
        del self._thread_stubs[stub.thread_id]
        for digest, data in chunks.items():
            self._chunks.setdefault(digest, data)
        for snap in snapshots:  # a row written meanwhile is kept
            thread = self._snapshots.setdefault((stub.thread_id, snap.namespace), {})
            thread.setdefault(snap.checkpoint_id, snap)
        return True

    async def list_thread_stubs(
        self, *, after: str | None, limit: int
    ) -> list[ThreadStub]:
        ids = sorted(i for i in self._thread_stubs if after is None or i > after)
        return [self._thread_stubs[i] for i in ids[:limit]]

    # --- inputs -----------------------------------------------------------------
    async def send_input(self, record: InputRecord) -> bool:
        run = self._require(record.run_id)
        inputs = self._inputs.setdefault(record.run_id, {})
        if record.key in inputs:
            return False
        inputs[record.key] = record
        if run.status == "waiting":
            self._runs[run.run_id] = _rules.woken(run, record.sent_at_ms)
        return True

    # --- schedules (KeepsSchedules) ----------------------------------------------
    async def save_schedule(self, record: ScheduleRecord) -> ScheduleRecord:
        found = self._schedules.get(record.name)
        if found is not None:
            record = dataclasses.replace(
                found,
                workflow=record.workflow,
                cron=record.cron,
                tz=record.tz,
                catch_up=record.catch_up,
                updated_at_ms=record.updated_at_ms,
            )
        self._schedules[record.name] = record
        return record

    async def list_schedules(self) -> list[ScheduleRecord]:
        return [self._schedules[name] for name in sorted(self._schedules)]

    async def set_schedule_paused(
        self, name: str, *, paused: bool, through_ms: int | None, now_ms: int
    ) -> ScheduleRecord | None:
        found = self._schedules.get(name)
        if found is None:
            return None
        last = found.last_tick_ms
        if through_ms is not None and (last is None or through_ms > last):
            last = through_ms
        record = dataclasses.replace(
            found, paused=paused, last_tick_ms=last, updated_at_ms=now_ms
        )
        self._schedules[name] = record
        return record

    async def mark_schedule_ticked(
        self, name: str, *, tick_ms: int, now_ms: int
    ) -> bool:
        found = self._schedules.get(name)
        if found is None or (
            found.last_tick_ms is not None and tick_ms <= found.last_tick_ms
        ):
            return False
        self._schedules[name] = dataclasses.replace(
            found, last_tick_ms=tick_ms, updated_at_ms=now_ms
        )
        return True

    async def get_inputs(self, run_id: str) -> dict[str, bytes]:
        return {key: rec.value for key, rec in self._inputs.get(run_id, {}).items()}

    async def list_inputs(self, run_id: str) -> list[InputRecord]:
        return sorted(
            self._inputs.get(run_id, {}).values(),
            key=lambda rec: (rec.sent_at_ms, rec.key),
        )

    # --- snapshots --------------------------------------------------------------
    async def put_chunks(self, chunks: Mapping[str, bytes]) -> None:
        for digest, data in chunks.items():
            self._chunks.setdefault(digest, data)

    async def get_chunks(self, hashes: Collection[str]) -> dict[str, bytes]:
        return {h: self._chunks[h] for h in hashes if h in self._chunks}

    async def save_snapshot(
        self, snapshot: SnapshotRecord, *, chunks: Mapping[str, bytes] = NO_CHUNKS
    ) -> None:
        self._check_chunks(snapshot, chunks)
        await self.put_chunks(chunks)
        thread = self._snapshots.setdefault(
            (snapshot.thread_id, snapshot.namespace), {}
        )
        thread[snapshot.checkpoint_id] = snapshot

    async def load_snapshot(
        self, thread_id: str, *, namespace: str = "", checkpoint_id: str | None = None
    ) -> SnapshotRecord | None:
        thread = self._snapshots.get((thread_id, namespace), {})
        if checkpoint_id is not None:
            return thread.get(checkpoint_id)
        return thread[max(thread)] if thread else None

    async def list_snapshots(
        self,
        thread_id: str,
        *,
        namespace: str | None = "",
        before: str | None = None,
        limit: int | None = None,
    ) -> list[SnapshotRecord]:
        found = [
            snap
            for (thread, ns), snaps in self._snapshots.items()
            if thread == thread_id and (namespace is None or ns == namespace)
            for snap in snaps.values()
            if before is None or snap.checkpoint_id < before
        ]
        found.sort(key=lambda snap: (snap.checkpoint_id, snap.namespace), reverse=True)
        return found if limit is None else found[:limit]

    async def swap_snapshots(
        self,
        thread_id: str,
        old: Sequence[SnapshotRecord],
        *,
        by: SnapshotRecord | None,
        chunks: Mapping[str, bytes] = NO_CHUNKS,
        durable: bool = True,
    ) -> bool:
        check_swap(thread_id, old, by)
        for record in old:
            stored = self._snapshots.get((thread_id, record.namespace), {})
            now = stored.get(record.checkpoint_id)
            if now is None or now.manifest != record.manifest:
                return False
        keys = packing.keys_of(old)
        if by is not None and (by.namespace, by.checkpoint_id) not in keys:
            taken = self._snapshots.get((thread_id, by.namespace), {})
            if by.checkpoint_id in taken:
                return False
        if by is not None:
            self._check_chunks(by, chunks)
        await self.delete_snapshots(thread_id, keys)
        await self.put_chunks(chunks)
        if by is not None:
            self._snapshots.setdefault((thread_id, by.namespace), {})[
                by.checkpoint_id
            ] = by
        return True

    def _check_chunks(
        self, record: SnapshotRecord, chunks: Mapping[str, bytes]
    ) -> None:
        """Raise ChunksMissing if `record` names a chunk neither given nor stored."""
        missing = tuple(
            ref
            for ref in record.chunk_refs
            if ref not in chunks and ref not in self._chunks
        )
        if missing:
            raise ChunksMissing(
                store=self.url, thread_id=record.thread_id, hashes=missing
            )

    async def delete_snapshots(
        self, thread_id: str, keys: Collection[tuple[str, str]]
    ) -> int:
        deleted = 0
        for namespace, checkpoint_id in set(keys):
            snaps = self._snapshots.get((thread_id, namespace), {})
            deleted += snaps.pop(checkpoint_id, None) is not None
            if not snaps:
                self._snapshots.pop((thread_id, namespace), None)
        return deleted

    async def delete_thread(self, thread_id: str) -> int:
        self._thread_stubs.pop(thread_id, None)
        keys = [key for key in self._snapshots if key[0] == thread_id]
        return sum(len(self._snapshots.pop(key)) for key in keys)

    async def list_threads(
        self,
        *,
        prefix: str | None = None,
        after: tuple[int, str] | None = None,
        limit: int = 100,
    ) -> list[ThreadRecord]:
        newest: dict[str, int] = {}
        for (thread_id, _), snaps in self._snapshots.items():
            if snaps and (prefix is None or thread_id.startswith(prefix)):
                latest = max(
                    checked_thread(thread_id, snap.created_at_ms).updated_at_ms
                    for snap in snaps.values()
                )
                newest[thread_id] = max(latest, newest.get(thread_id, latest))
        keys = sorted(
            ((ms, thread_id) for thread_id, ms in newest.items()), reverse=True
        )
        return [
            ThreadRecord(thread_id=thread_id, updated_at_ms=ms)
            for ms, thread_id in keys
            if after is None or (ms, thread_id) < after
        ][: max(limit, 0)]

    async def delete_unreferenced_chunks(self, limit: int) -> int:
        referenced = {
            ref
            for snaps in self._snapshots.values()
            for snap in snaps.values()
            for ref in snap.chunk_refs
        }
        orphans = [digest for digest in self._chunks if digest not in referenced][
            :limit
        ]
        for digest in orphans:
            del self._chunks[digest]
        return len(orphans)

    async def scan_payloads(
        self, kind: PayloadKind, *, after: tuple[str | int, ...] | None, limit: int
    ) -> list[Payload]:
        found = sorted(
            (key, data)
            for key, data in self._payloads(kind)
            if after is None or key > after
        )
        return [Payload(kind=kind, key=key, data=data) for key, data in found[:limit]]

    async def replace_payload(self, payload: Payload, *, data: bytes) -> bool:
        current = dict(self._payloads(payload.kind)).get(payload.key)
        if current != payload.data:
            return False
        key, kind = payload.key, payload.kind
        if kind == "run.input":
            self._runs[str(key[0])] = dataclasses.replace(
                self._runs[str(key[0])], input=data
            )
        elif kind == "run.output":
            self._runs[str(key[0])] = dataclasses.replace(
                self._runs[str(key[0])], output=data
            )
        elif kind in ("step.output", "step.usage"):
            steps, seq = self._steps[str(key[0])], int(key[1])
            steps[seq] = (
                dataclasses.replace(steps[seq], output=data)
                if kind == "step.output"
                else dataclasses.replace(steps[seq], usage=data)
            )
        elif kind == "input.value":
            inputs = self._inputs[str(key[0])]
            inputs[str(key[1])] = dataclasses.replace(inputs[str(key[1])], value=data)
        elif kind in ("snapshot.manifest", "snapshot.metadata"):
            thread, checkpoint = (
                self._snapshots[(str(key[0]), str(key[1]))],
                str(key[2]),
            )
            thread[checkpoint] = (
                dataclasses.replace(thread[checkpoint], manifest=data)
                if kind == "snapshot.manifest"
                else dataclasses.replace(thread[checkpoint], metadata=data)
            )
        else:
            self._chunks[str(key[0])] = data
        return True

    def _payloads(self, kind: PayloadKind) -> list[tuple[tuple[str | int, ...], bytes]]:
        found: list[tuple[tuple[str | int, ...], bytes | None]]
        if kind in ("run.input", "run.output"):
            found = [
                ((run.run_id,), run.input if kind == "run.input" else run.output)
                for run in self._runs.values()
            ]
        elif kind in ("step.output", "step.usage"):
            found = [
                (
                    (step.run_id, step.seq, step.name),
                    step.output if kind == "step.output" else step.usage,
                )
                for steps in self._steps.values()
                for step in steps.values()
            ]
        elif kind == "input.value":
            found = [
                ((record.run_id, record.key), record.value)
                for inputs in self._inputs.values()
                for record in inputs.values()
            ]
        elif kind in ("snapshot.manifest", "snapshot.metadata"):
            found = [
                (
                    (snap.thread_id, snap.namespace, snap.checkpoint_id),
                    snap.manifest if kind == "snapshot.manifest" else snap.metadata,
                )
                for thread in self._snapshots.values()
                for snap in thread.values()
            ]
        else:
            found = [((digest,), data) for digest, data in self._chunks.items()]
        return [(key, data) for key, data in found if data is not None]

    async def close(self) -> None:
        return None

    # --- helpers ----------------------------------------------------------------
    def _require(self, run_id: str) -> RunRecord:
        run = self._runs.get(run_id)
        if run is None:
            raise RunNotFound(run_id=run_id)
        return run

    def _fenced(self, run_id: str, fence: int, *, seq: int | None = None) -> RunRecord:
        run = self._runs.get(run_id)
        if run is None or run.fence != fence:
            raise LeaseLost(run_id=run_id, seq=seq, fence=fence)
        return run

    def _lease(self, run: RunRecord, *, owner: str, now_ms: int, ttl_ms: int) -> Lease:
        leased = _rules.leased(run, owner=owner, now_ms=now_ms, ttl_ms=ttl_ms)
        self._runs[run.run_id] = leased
        return Lease(
            run_id=run.run_id,
            owner=owner,
            fence=leased.fence,
            expires_at_ms=leased.lease_expires_at_ms,
            taken_from=_rules.lease_taken_from(run.status, run.lease_owner, owner),
        )

    def _queue_load(
        self, queue: str, policy: QueuePolicy, now_ms: int
    ) -> claims.QueueLoad:
        """The queue's live leases and its starts in the rate window (forgetting older)."""
        active = sum(
            1
            for run in self._runs.values()
            if run.queue == queue
            and run.status == "running"
            and run.lease_expires_at_ms > now_ms
        )
        since = claims.rate_window_start_ms(policy, now_ms)
        if since is None:
            return claims.QueueLoad(active, 0)
        recent = [t for t in self._starts.get(queue, []) if t > since]
        self._starts[queue] = recent
        return claims.QueueLoad(active, len(recent))
