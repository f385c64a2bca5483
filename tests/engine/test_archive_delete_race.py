"""A thread deleted (and its chunks collected) while an archive readies it is no damage.

Archiving reads a thread's newest snapshot, then rewrites it whole from its
delta chain (`_engine.cold.ready_thread`). When another process's
`delete_thread` and `resumable gc` run between the two reads, the chain and its
chunks are gone: nothing was lost (the thread was deleted on purpose), and the
log must say so rather than "stored data is corrupt".
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from resumable import Engine
from resumable.stores.blobs import FileBlobs
from resumable.stores.offload import OffloadStore
from resumable.stores.protocol import SnapshotRecord, Store
from resumable.stores.stubs import SupportsThreadArchive
from resumable.testing import FakeClock


class DeletingAfterFirstRead:
    """Wraps a store: right after the first read of `thread`'s newest snapshot,
    another engine deletes the thread and collects its chunks."""

    def __init__(self, inner: Store, thread: str) -> None:
        self.inner = inner
        self.thread = thread
        self.deleted = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def load_snapshot(
        self, thread_id: str, *, namespace: str = "", checkpoint_id: str | None = None
    ) -> SnapshotRecord | None:
        found = await self.inner.load_snapshot(
            thread_id, namespace=namespace, checkpoint_id=checkpoint_id
        )
        if thread_id == self.thread and checkpoint_id is None and not self.deleted:
            self.deleted = await Engine(self.inner).delete_thread(thread_id)
            await self.inner.delete_unreferenced_chunks(100_000)
        return found


async def test_a_thread_deleted_while_an_archive_readies_it_is_logged_as_deleted_not_corrupt(
    store: Store, tmp_path: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    if not isinstance(store, SupportsThreadArchive):
        pytest.skip("the store does not archive threads")
    saver = Engine(store, clock=clock)
    for i in range(6):  # the newest is a delta: readying it reads its chain
        await saver.save_state("t", {"messages": [f"m{n}" for n in range(40 + i)]})
    for turn in range(3):  # archived beside it: all but its newest move
        await saver.save_state("kept", {"turn": turn})
    clock.advance(60)
    racing = DeletingAfterFirstRead(store, "t")
    engine = Engine(OffloadStore(racing, FileBlobs(tmp_path / "objects")), clock=clock)
    with caplog.at_level(logging.DEBUG, logger="resumable"):
        done = await engine.archive(older_than=timedelta(seconds=30))
    assert racing.deleted > 0
    assert "corrupt" not in caplog.text
    [record] = caplog.records
    assert record.levelno == logging.INFO
    assert "archiving thread 't': it was deleted meanwhile" in record.getMessage()
    assert [a.name for a in done if a.kind == "thread"] == ["kept"]
    assert await Engine(store).load_state("kept") == {"turn": 2}
    assert await Engine(store).load_state("t", default=None) is None
