"""Cold history: `resumable archive` moves finished runs' payloads into one object per run."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from offload.s3server import MotoS3
from resumable import Engine, current_run, step, wait_for, workflow
from resumable.cli import main
from resumable.errors import CapabilityMissing, CorruptCheckpointError, UsageError
from resumable.stores.blobref import is_member
from resumable.stores.memory import MemoryStore
from resumable.stores.offload import OffloadStore
from resumable.stores.stubs import SupportsArchive, SupportsThreadArchive

RAN: Counter[str] = Counter()


@step(name="archive.write")
async def write(i: int) -> str:
    RAN[f"write {i}"] += 1
    current_run().record_usage(model="gpt-5-mini", input_tokens=100, output_tokens=20)
    return f"chapter {i}: " + os.urandom(300).hex()


@workflow(name="archive.book")
async def book(n: int) -> list[int]:
    chapters = [await write(i) for i in range(n)]
    return [len(c) for c in chapters]


@workflow(name="archive.waits")
async def waits() -> str:
    first = await write(0)
    return first[:9] + str(await wait_for("go"))


def _engine(url: str, moto_s3: MotoS3, bucket: str) -> Engine:
    return Engine(url, blobs=moto_s3.blobs(bucket, prefix="cold"))


async def _archived(engine: Engine) -> list[str]:
    await asyncio.sleep(0.01)  # updated strictly before "now"
    done = await engine.archive(older_than=timedelta(0))
    return sorted(f"{item.kind} {item.name}" for item in done if item.payloads)


async def test_archived_runs_read_back_through_show_fork_ledger_and_check(
    primary_url: str, moto_s3: MotoS3, bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with _engine(primary_url, moto_s3, bucket) as engine:
        expected = await engine.run(book, 4, run_id="cold-1")
        await engine.start(waits, run_id="live")  # waiting: not finished, not archived
        for _ in range(200):
            if (run := await engine.store.get_run("live")) and run.status == "waiting":
                break
            await asyncio.sleep(0.02)
        before = [v.output() for v in await engine.history("cold-1")]
        ledger_before = await engine.ledger("cold-1")

        assert await _archived(engine) == ["run cold-1"]
        store = engine.store
        assert isinstance(store, OffloadStore)
        assert isinstance(store.inner, SupportsArchive)
        # the rows are gone from the primary store: one stub stands for them
        assert await store.inner.load_journal("cold-1") == []
        stub = await store.inner.load_archive_stub("cold-1")
        assert stub is not None
        assert stub.steps == len(await store.load_journal("cold-1")) == 4
        keys = {stub.key}
        assert await store.inner.load_journal("live")  # waiting: kept
        assert await store.inner.load_archive_stub("live") is None
        assert await _archived(engine) == []  # nothing left to move

        RAN.clear()
        assert [v.output() for v in await engine.history("cold-1")] == before
        assert await engine.run(book, 4, run_id="cold-1") == expected
        assert await engine.ledger("cold-1") == ledger_before
        fork = await engine.fork("cold-1", at_step=2, run_id="cold-fork")
        assert await engine.run(book, 4, run_id=fork) == expected
        assert dict(RAN) == {"write 2": 1, "write 3": 1}  # the fork's own steps
        assert (await engine.check(run_ids=["cold-1"])).ok
        # an archive is referenced: gc keeps it, however old
        assert (await engine.gc(blobs_grace=timedelta(0))).blobs == 0
        assert keys <= {b.key for b in await store.blobs.listing()}

    url = f"{primary_url}{'&' if '?' in primary_url else '?'}blobs=s3://{bucket}/cold"
    with pytest.MonkeyPatch.context() as env:
        for name, value in {
            "AWS_ENDPOINT_URL": moto_s3.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
        }.items():
            env.setenv(name, value)
        assert await asyncio.to_thread(main, ["show", "cold-1", "--store", url]) == 0
        assert "chapter 3" in capsys.readouterr().out
        await asyncio.sleep(0.01)
        argv = ["archive", "--older-than", "0s", "--store", url]
        assert await asyncio.to_thread(main, argv) == 0
    # the fork finished since: the CLI archives it; cold-1 has nothing left
    out = capsys.readouterr().out
    assert out.startswith("archived 1 run and 0 threads"), out
    assert "cold-fork" in out
    with pytest.MonkeyPatch.context() as env:
        for name, value in {
            "AWS_ENDPOINT_URL": moto_s3.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
        }.items():
            env.setenv(name, value)
        argv = ["archive", "--restore", "cold-1", "--store", url]
        assert await asyncio.to_thread(main, argv) == 0
        assert "back in the store" in capsys.readouterr().out
    async with _engine(primary_url, moto_s3, bucket) as engine:
        store = engine.store
        assert isinstance(store, OffloadStore)
        assert len(await store.inner.load_journal("cold-1")) == stub.steps
        assert [v.output() for v in await engine.history("cold-1")] == before
        # nothing references the object now: a collection deletes it
        assert (await engine.gc(blobs_grace=timedelta(0))).blobs >= 1
        assert stub.key not in {b.key for b in await store.blobs.listing()}


async def test_a_damaged_or_missing_archive_is_a_corrupt_checkpoint(
    primary_url: str, moto_s3: MotoS3, bucket: str
) -> None:
    async with _engine(primary_url, moto_s3, bucket) as engine:
        await engine.run(book, 2, run_id="cold-2")
        assert await _archived(engine) == ["run cold-2"]
        store = engine.store
        assert isinstance(store, OffloadStore)
        key = next(b.key for b in await store.blobs.listing())
        packed = bytearray(await store.blobs.get(key))
        packed[len(packed) // 2] ^= 0x04
        await store.blobs.put(key, bytes(packed))
    async with _engine(primary_url, moto_s3, bucket) as engine:  # nothing cached
        with pytest.raises(CorruptCheckpointError, match="hash check") as caught:
            [v.output() for v in await engine.history("cold-2")]
        assert "run 'cold-2'" in str(caught.value)
        assert key in str(caught.value)
        await engine.store.blobs.delete(key)  # type: ignore[attr-defined]  # OffloadStore
        with pytest.raises(CorruptCheckpointError, match="missing"):
            [v.output() for v in await engine.history("cold-2")]


async def test_archive_without_an_object_store_says_how_to_add_one(
    primary_url: str,
) -> None:
    async with Engine(primary_url) as engine:
        with pytest.raises(UsageError, match=r"\?blobs="):
            await engine.archive(older_than=timedelta(days=30))


async def test_a_cold_threads_saved_states_move_into_one_object_and_read_back(
    primary_url: str, moto_s3: MotoS3, bucket: str
) -> None:
    async with _engine(primary_url, moto_s3, bucket) as engine:
        state: dict[str, object] = {"notes": [], "doc": os.urandom(2000).hex()}
        for i in range(6):
            state["notes"] = [*state["notes"], f"note {i}: " + os.urandom(100).hex()]  # type: ignore[misc]
            await engine.save_state("cold-thread", state, label=f"save {i}")
        history = [
            (c.checkpoint_id, c.label)
            for c in await engine.state_history("cold-thread")
        ]
        assert await _archived(engine) == ["thread cold-thread"]
        store = engine.store
        assert isinstance(store, OffloadStore)
        rows = await store.inner.list_snapshots("cold-thread", namespace=None)
        # the built-in stores archive threads by row (stores.archive): the
        # older rows left and one stub stands; the newest stays live, full
        assert [r.checkpoint_id for r in rows] == [history[0][0]]
        inner = store.inner
        assert isinstance(inner, SupportsThreadArchive)
        stub = await inner.load_thread_stub("cold-thread")
        assert stub is not None
        assert [ns for ns, _ in stub.newest] == [":pack:"]  # packed first, then moved
        assert not any(is_member(r.manifest) for r in rows)
        assert await _archived(engine) == []
    async with _engine(primary_url, moto_s3, bucket) as engine:  # nothing cached
        assert await engine.load_state("cold-thread") == state
        assert [
            (c.checkpoint_id, c.label)
            for c in await engine.state_history("cold-thread")
        ] == history
        first = history[-1][0]
        old = await engine.load_state("cold-thread", checkpoint_id=first)
        assert len(old["notes"]) == 1


class _KeepsNoStub(MemoryStore):
    """A full store that declares neither archive capability (a method set to
    None blocks it, as `typing.Protocol` documents)."""

    archive_journal = None  # type: ignore[assignment]  # None blocks the capability
    load_archive_stub = None  # type: ignore[assignment]  # None blocks the capability
    restore_journal = None  # type: ignore[assignment]  # None blocks the capability
    list_archive_stubs = None  # type: ignore[assignment]  # None blocks the capability
    archive_snapshots = None  # type: ignore[assignment]  # None blocks the capability
    load_thread_stub = None  # type: ignore[assignment]  # None blocks the capability
    restore_snapshots = None  # type: ignore[assignment]  # None blocks the capability
    list_thread_stubs = None  # type: ignore[assignment]  # None blocks the capability


@workflow(name="archive.double")
async def double(n: int) -> int:
    return n * 2


async def test_archive_on_a_store_that_keeps_no_stub_raises_naming_both_capabilities(
    tmp_path: Path,
) -> None:
    # the payload-level archive that moved such a store's payloads is gone (#37)
    store = _KeepsNoStub()
    declared: object = store  # what isinstance finds at run time, not its class
    assert not isinstance(declared, SupportsArchive | SupportsThreadArchive)
    async with Engine(store, blobs=f"file://{tmp_path}") as engine:
        await engine.run(double, 2, run_id="done")
        with pytest.raises(CapabilityMissing, match="SupportsArchive") as archiving:
            await engine.archive(older_than=timedelta(0))
        assert archiving.value.capability == "SupportsArchive or SupportsThreadArchive"
        assert not await engine.unarchive("done")
    assert not any(tmp_path.iterdir())  # nothing was written to the object store
