"""A third-party store that implements only `RunStore` runs workflows in full.

`RunsOnly` stands for a store written outside this project: it offers exactly the
RunStore methods (it keeps its rows in a MemoryStore, as a third party's would in
its own database) and nothing else: no snapshots, no listing, no maintenance, no
optional capability.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Collection, Mapping
from pathlib import Path
from typing import Any

import pytest

from resumable import CapabilityMissing, Engine, Worker, step, wait_for, workflow
from resumable.stores import MemoryStore
from resumable.stores.blobs import open_blobs
from resumable.stores.capabilities import Capabilities
from resumable.stores.offload import OffloadStore
from resumable.stores.protocol import (
    InputRecord,
    Lease,
    QueuePolicy,
    RunRecord,
    RunStore,
    RunUpdate,
    SnapshotStore,
    StepRecord,
    Store,
)
from resumable.testing import StoreContract, StoredField, TamperSubject, TamperSuite
from tamper.subjects import memory_subject


class RunsOnly:
    """The RunStore methods and nothing more."""

    def __init__(self, rows: MemoryStore | None = None) -> None:
        self.url = "runs-only://"
        self._rows = rows if rows is not None else MemoryStore()

    async def create_run(self, run: RunRecord) -> RunRecord:
        return await self._rows.create_run(run)

    async def get_run(self, run_id: str) -> RunRecord | None:
        return await self._rows.get_run(run_id)

    async def acquire_lease(
        self,
        run_id: str,
        *,
        owner: str,
        now_ms: int,
        ttl_ms: int,
        take_over: str | None = None,
    ) -> Lease | None:
        return await self._rows.acquire_lease(
            run_id, owner=owner, now_ms=now_ms, ttl_ms=ttl_ms, take_over=take_over
        )

    async def renew_lease(
        self, run_id: str, *, fence: int, now_ms: int, ttl_ms: int
    ) -> None:
        await self._rows.renew_lease(run_id, fence=fence, now_ms=now_ms, ttl_ms=ttl_ms)

    async def update_run(self, run_id: str, *, fence: int, update: RunUpdate) -> None:
        await self._rows.update_run(run_id, fence=fence, update=update)

    async def cancel_run(self, run_id: str, *, now_ms: int) -> RunRecord:
        return await self._rows.cancel_run(run_id, now_ms=now_ms)

    async def reopen_run(self, run_id: str, *, now_ms: int) -> bool:
        return await self._rows.reopen_run(run_id, now_ms=now_ms)

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
        return await self._rows.claim_runs(
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
        return await self._rows.load_journal(run_id, up_to_seq=up_to_seq)

    async def commit_step(self, step: StepRecord, *, fence: int) -> None:
        await self._rows.commit_step(step, fence=fence)

    async def send_input(self, record: InputRecord) -> bool:
        return await self._rows.send_input(record)

    async def get_inputs(self, run_id: str) -> dict[str, bytes]:
        return await self._rows.get_inputs(run_id)

    async def close(self) -> None:
        await self._rows.close()


calls: list[str] = []


@step
async def fetch(doc: str) -> str:
    calls.append(doc)
    return doc.upper()


@workflow(name="run_store_only:review")
async def review(docs: list[str]) -> str:
    fetched = [await fetch(doc) for doc in docs]
    verdict = await wait_for("verdict")
    return f"{verdict}: {' '.join(fetched)}"


def test_the_type_checker_takes_it_as_a_run_store_and_not_as_a_store() -> None:
    store: RunStore = RunsOnly()  # mypy checks this assignment
    assert isinstance(store, RunStore)
    assert not isinstance(store, SnapshotStore)
    assert not isinstance(store, Store)


def test_capabilities_are_found_once_from_what_the_store_declares(
    tmp_path: Path,
) -> None:
    assert Capabilities.of(RunsOnly()) == Capabilities()
    assert Capabilities.of(RunsOnly()).names == ()
    memory = Capabilities.of(MemoryStore())
    assert memory.names == (
        "SnapshotStore",
        "PacksSnapshots",
        "RunListing",
        "Maintenance",
        "RunsOnAnyLoop",
        "LocalWrites",
        "SupportsStepCache",
        "KeepsSchedules",
        "KeepsFeeds",
    )
    # a wrapper offers what it wraps (the memory store runs on any loop), and
    # the offload store adds streamed payloads; but its writes are its own: it
    # uploads to an object store
    wrapped = OffloadStore(MemoryStore(), open_blobs(f"file://{tmp_path}"))
    found = Capabilities.of(wrapped)
    assert found.payload_streams is wrapped
    assert found.objects is wrapped
    # the step cache is looked up through the wrapper, which resolves a value it
    # offloaded (the index lives in the wrapped store, and only if it keeps one)
    assert found.step_cache is wrapped
    bare = OffloadStore(RunsOnly(), open_blobs(f"file://{tmp_path}"))  # type: ignore[arg-type]  # only its capabilities are asked
    assert Capabilities.of(bare).step_cache is None
    # the schedules and the feeds live in the wrapped store
    assert found.schedules is memory_of(wrapped)
    assert found.feeds is memory_of(wrapped)
    assert dataclasses.replace(
        found,
        payload_streams=None,
        objects=None,
        step_cache=None,
        schedules=None,
        feeds=None,
    ) == dataclasses.replace(
        memory, local_writes=False, step_cache=None, schedules=None, feeds=None
    )
    moved = {"LocalWrites", "SupportsStepCache", "KeepsSchedules", "KeepsFeeds"}
    assert found.names == (
        *(name for name in memory.names if name not in moved),
        "StreamsPayloads",
        "KeepsObjects",
        "SupportsStepCache",
        "KeepsSchedules",
        "KeepsFeeds",
    )


async def test_a_run_store_alone_runs_suspends_resumes_and_replays() -> None:
    calls.clear()
    store = RunsOnly()
    async with Engine(store) as engine:
        handle = await engine.start(review, ["a", "b"], run_id="r1")
        while (run := await store.get_run("r1")) is None or run.status != "waiting":
            await asyncio.sleep(0.01)
        await engine.send("r1", "verdict", "ok")
        assert await handle.result() == "ok: A B"
    async with Engine(store) as again:  # a finished run returns its result
        assert await again.run(review, ["a", "b"], run_id="r1") == "ok: A B"
        assert [step.name for step in await again.history("r1")][:2] == [
            "fetch",
            "fetch",
        ]
    assert calls == ["a", "b"]  # replayed, never run twice


async def test_what_a_run_store_lacks_raises_naming_the_capability() -> None:
    key = "k1:" + base64.b64encode(bytes(range(32))).decode()
    async with Engine(RunsOnly(), encryption_key=key) as engine:
        with pytest.raises(CapabilityMissing, match="SnapshotStore") as saving:
            await engine.save_state("thread-1", {"n": 1})
        assert saving.value.capability == "SnapshotStore"
        assert saving.value.store == "runs-only://"
        with pytest.raises(CapabilityMissing, match="SnapshotStore"):
            await engine.load_state("thread-1")
        with pytest.raises(CapabilityMissing, match="RunListing"):
            await engine.runs()
        with pytest.raises(CapabilityMissing, match="RunListing"):
            await engine.gc()
        with pytest.raises(CapabilityMissing, match="Maintenance"):
            await engine.rekey()


class TestARunStoreAlonePassesTheContract(StoreContract):
    """The contract's core runs on it; the parts it lacks skip, naming them."""

    @pytest.fixture
    async def store(self) -> AsyncIterator[RunStore]:
        store = RunsOnly()
        yield store
        await store.close()


class Waking(RunsOnly):
    """A RunStore that also declares `SupportsWakeUp`: a new run wakes a worker."""

    def __init__(self) -> None:
        super().__init__()
        self.work = asyncio.Event()
        self.waits = 0

    async def create_run(self, run: RunRecord) -> RunRecord:
        stored = await super().create_run(run)
        self.work.set()
        return stored

    async def wait_for_work(self, timeout_s: float) -> None:
        self.waits += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.work.wait(), timeout_s)
        self.work.clear()


@workflow(name="run_store_only:double")
async def double(n: int) -> int:
    return n * 2


async def test_a_declared_wake_up_wakes_an_idle_worker_before_its_poll() -> None:
    store = Waking()
    async with Engine(store) as engine:
        waker: object = engine.capabilities.wake_up
        assert waker is store
        worker = Worker(engine, poll_s=600, workflows=["run_store_only:double"])
        working = asyncio.create_task(worker.run(until=lambda w: w.completed >= 1))
        while store.waits == 0:  # idle, in the store's wait_for_work
            await asyncio.sleep(0.01)
        run_id = await engine.enqueue(double, 21)
        await asyncio.wait_for(working, 30)  # far sooner than the 600 s poll
        assert await engine.run(double, 21, run_id=run_id) == 42


class RunsOnlySubject:
    """The tamper suite's raw access to a RunsOnly store's rows."""

    url = None  # the CLI cannot open it

    def __init__(self, rows: TamperSubject) -> None:
        assert isinstance(rows.store, MemoryStore)
        self._rows = rows
        self.store = RunsOnly(rows.store)

    async def fields(self) -> list[StoredField]:
        return await self._rows.fields()

    async def write(self, field: StoredField, value: Any) -> bool:
        return await self._rows.write(field, value)

    async def reopen(self) -> RunStore:
        return self.store

    async def clone(self) -> RunsOnlySubject:
        return RunsOnlySubject(await self._rows.clone())

    async def drop(self) -> None:
        await self._rows.drop()


async def runs_only_subject() -> TamperSubject:
    return RunsOnlySubject(await memory_subject())


@pytest.mark.timeout(600)
async def test_the_tamper_suite_runs_on_a_run_store_alone() -> None:
    report = await TamperSuite(runs_only_subject).run()
    assert report.cases > 50, report.summary()
    assert not report.failures, report.summary()


def memory_of(wrapped: OffloadStore) -> object:
    return wrapped.inner
