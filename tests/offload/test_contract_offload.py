"""An offloading store is a Store: the conformance suite on SQLite rows and file objects."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from resumable.stores import create_store
from resumable.stores.blobref import REFERENCE_SIZE
from resumable.stores.blobs import FileBlobs
from resumable.stores.offload import OffloadStore
from resumable.stores.protocol import Store
from resumable.testing import StoreContract


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
