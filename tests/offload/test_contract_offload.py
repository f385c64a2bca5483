"""An offloading store is a Store: the conformance suite on SQLite rows and file objects."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from resumable.stores import create_store
from resumable.stores.blobref import REFERENCE_SIZE, is_reference
from resumable.stores.blobs import FileBlobs
from resumable.stores.offload import OffloadStore
from resumable.stores.protocol import Store
from resumable.testing import StoreContract
from resumable.testing.contract.records import snapshot_record

_A = {"a": b"A"}


class TestOffloadStoreContract(StoreContract):
    """Every payload longer than a reference is offloaded (the smallest threshold)."""

    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[Store]:
        inner = create_store(f"sqlite:///{tmp_path / 'state.db'}")
        store = OffloadStore(
            inner, FileBlobs(tmp_path / "objects"), offload_over=REFERENCE_SIZE
        )
        try:
            yield store
        finally:
            await store.close()


async def test_a_swap_offloads_the_large_chunks_it_stores_as_a_save_does(
    tmp_path: Path,
) -> None:
    inner = create_store(f"sqlite:///{tmp_path / 'state.db'}")
    store = OffloadStore(inner, FileBlobs(tmp_path / "objects"), offload_over=4096)
    try:
        await store.save_snapshot(snapshot_record("t", "0001", ("a",)), chunks=_A)
        (old,) = await store.list_snapshots("t")
        full = dataclasses.replace(old, manifest=b"full", chunk_refs=("a", "big"))
        big = os.urandom(20_000)
        await store.put_chunks({"big": big})
        assert await store.delete_unreferenced_chunks(100) == 1  # before the swap
        assert await store.swap_snapshots("t", [old], by=full, chunks={"big": big})
        assert await store.delete_unreferenced_chunks(100) == 0
        # the row holds a reference to an object, which reads back as the chunk
        assert is_reference((await inner.get_chunks(["big"]))["big"])
        assert await store.get_chunks(["a", "big"]) == {"a": b"A", "big": big}
        assert await store.list_snapshots("t") == [full]
    finally:
        await store.close()
