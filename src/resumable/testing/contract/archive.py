"""`StoreContract`'s archive part: a store declaring `SupportsArchive` swaps rows for stubs.

A store without the capability skips these tests (`Engine.archive` then archives
none of its runs: `stores.archive`).
"""

from __future__ import annotations

import dataclasses

from resumable.stores.kinds import JournalKind, seq_of
from resumable.stores.protocol import InputRecord, RunUpdate, Store
from resumable.stores.stubs import ArchiveStub, SupportsArchive
from resumable.testing.contract.records import T0, WEIRD_IDS, run_record, step_record

_KEYED = seq_of(JournalKind.BATCH_ITEM, 12345)  # a map_steps item
_LEDGER = seq_of(JournalKind.LEDGER, 1)  # an execution's ledger entry


def _archiving(store: Store) -> SupportsArchive:
    if not isinstance(store, SupportsArchive):
        import pytest  # the suite runs under pytest; resumable does not need it

        pytest.skip(f"{type(store).__name__} does not declare SupportsArchive")
    return store


async def _finished_run(store: Store, run_id: str) -> ArchiveStub:
    """A succeeded run with a step, a ledger entry, a batch item and two inputs."""
    await store.create_run(run_record(run_id))
    lease = await store.acquire_lease(run_id, owner="w", now_ms=T0, ttl_ms=1000)
    assert lease is not None
    for seq in (1, 2, _LEDGER, _KEYED):
        await store.commit_step(
            step_record(run_id, seq, usage=b"u%d" % seq), fence=lease.fence
        )
    for key, at in (("b", T0 + 1), ("a", T0 + 2)):
        await store.send_input(
            InputRecord(run_id=run_id, key=key, value=key.encode() * 3, sent_at_ms=at)
        )
    await store.update_run(
        run_id,
        fence=lease.fence,
        update=RunUpdate(status="succeeded", now_ms=T0 + 9, output=b"done"),
    )
    return ArchiveStub(
        run_id=run_id,
        key=f"runs/ab/{run_id.encode('utf-8', 'surrogatepass').hex()}",
        size=123,
        steps=4,
        inputs=2,
        fence=lease.fence,
        archived_at_ms=T0 + 10,
        refers_to=("blobs/aa/one", "blobs/bb/two"),
    )


class ArchiveStoreContract:
    """Behaviour of `SupportsArchive` (see `StoreContract`)."""

    async def test_archiving_swaps_journal_and_inputs_for_one_stub(
        self, store: Store
    ) -> None:
        archive = _archiving(store)
        stub = await _finished_run(store, "cold")
        journal = await store.load_journal("cold")
        inputs = await store.list_inputs("cold")
        assert [s.seq for s in journal] == [_LEDGER, 1, 2, _KEYED]
        assert await archive.load_archive_stub("cold") is None
        assert await archive.archive_journal(stub)
        assert await store.load_journal("cold") == []
        assert await store.get_inputs("cold") == {}
        assert await archive.load_archive_stub("cold") == stub
        run = await store.get_run("cold")  # the run row stays, result and all
        assert run is not None
        assert (run.status, run.output) == ("succeeded", b"done")
        assert not await archive.archive_journal(stub)  # archived already
        # restored only by the stub that stands there
        other = dataclasses.replace(stub, key="runs/ff/other")
        assert not await archive.restore_journal(other, journal, inputs)
        assert await archive.load_archive_stub("cold") == stub
        assert await archive.restore_journal(stub, journal, inputs)
        assert await store.load_journal("cold") == journal
        assert await store.list_inputs("cold") == inputs
        assert await archive.load_archive_stub("cold") is None
        assert not await archive.restore_journal(stub, journal, inputs)

    async def test_archiving_refuses_a_run_that_changed_or_is_unfinished(
        self, store: Store
    ) -> None:
        archive = _archiving(store)
        stub = await _finished_run(store, "r")
        for changed in (
            dataclasses.replace(stub, fence=stub.fence + 1),  # taken again since
            dataclasses.replace(stub, steps=3),  # a step committed since it was read
            dataclasses.replace(stub, inputs=1),  # an input sent since
            dataclasses.replace(stub, run_id="missing"),
        ):
            assert not await archive.archive_journal(changed), changed
        assert len(await store.load_journal("r")) == 4
        assert len(await store.list_inputs("r")) == 2
        assert await archive.load_archive_stub("r") is None
        # reopened: not finished, so not archived
        await store.create_run(run_record("f"))
        lease = await store.acquire_lease("f", owner="w", now_ms=T0, ttl_ms=1000)
        assert lease is not None
        await store.commit_step(step_record("f", 1), fence=lease.fence)
        running = dataclasses.replace(stub, run_id="f", steps=1, inputs=0)
        running = dataclasses.replace(running, fence=lease.fence)
        assert not await archive.archive_journal(running)
        await store.update_run(
            "f", fence=lease.fence, update=RunUpdate(status="failed", now_ms=T0)
        )
        assert await store.reopen_run("f", now_ms=T0 + 1)
        assert not await archive.archive_journal(running)
        assert len(await store.load_journal("f")) == 1

    async def test_deleting_an_archived_run_deletes_its_stub(
        self, store: Store
    ) -> None:
        archive = _archiving(store)
        stub = await _finished_run(store, "gone")
        assert await archive.archive_journal(stub)
        deleted = await store.delete_runs(["gone"])
        assert deleted.run_ids == ("gone",)
        assert await archive.load_archive_stub("gone") is None
        assert await archive.list_archive_stubs(after=None, limit=10) == []

    async def test_stubs_list_in_pages_and_keep_weird_ids(self, store: Store) -> None:
        archive = _archiving(store)
        stubs = []
        for run_id in WEIRD_IDS:
            stub = await _finished_run(store, run_id)
            assert await archive.archive_journal(stub), run_id
            assert await archive.load_archive_stub(run_id) == stub
            stubs.append(stub)
        listed: list[ArchiveStub] = []
        after: str | None = None
        while page := await archive.list_archive_stubs(after=after, limit=4):
            listed += page
            after = page[-1].run_id
        assert sorted(s.run_id for s in listed) == sorted(WEIRD_IDS)
        assert {s.run_id: s for s in listed} == {s.run_id: s for s in stubs}
