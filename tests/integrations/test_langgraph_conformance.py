"""LangGraph's checkpointer conformance suite, through the async and the sync methods."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from conftest import store_url
from resumable._engine import packs
from resumable.integrations.langgraph import ResumableSaver


class SyncDriven(BaseCheckpointSaver[int]):
    """Answers the suite's async calls with the saver's sync methods, on a thread."""

    def __init__(self, saver: ResumableSaver) -> None:
        super().__init__()
        self.saver = saver

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.saver.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        def collect() -> builtins.list[CheckpointTuple]:
            found = self.saver.list(config, filter=filter, before=before, limit=limit)
            return builtins.list(found)

        for found in await asyncio.to_thread(collect):
            yield found

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(
            self.saver.put, config, checkpoint, metadata, new_versions
        )

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(
            self.saver.put_writes, config, writes, task_id, task_path
        )

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.saver.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.saver.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(
            self.saver.copy_thread, source_thread_id, target_thread_id
        )

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
    ) -> None:
        await asyncio.to_thread(self.saver.prune, thread_ids, strategy=strategy)


async def close(saver: ResumableSaver, *, drop: bool) -> None:
    remove = getattr(saver.engine.store, "drop", None)
    if drop and remove is not None:
        await saver.run_on_loop(remove())  # on the saver's loop, which owns the store
    await saver.aclose()


@pytest.mark.parametrize(
    ("face", "packing"), [("async", False), ("sync", False), ("async", True)]
)
async def test_saver_passes_every_conformance_capability(
    backend: str,
    tmp_path: Path,
    face: str,
    packing: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = store_url(backend, tmp_path)
    packed: list[int] = []
    if packing:  # pack after every save: checkpoints and writes are read from packs
        for name, value in ("PACK_EVERY", 1), ("KEEP_LOOSE", 1), ("PACK_MIN", 1):
            monkeypatch.setattr(packs, name, value)
        monkeypatch.setattr(packs, "PACK_MAX", 3)
        pack = packs.Packs.pack

        async def counted(self: packs.Packs, thread_id: str, namespace: str) -> int:
            packed.append(await pack(self, thread_id, namespace))
            return packed[-1]

        monkeypatch.setattr(packs.Packs, "pack", counted)

    @checkpointer_test(name=f"ResumableSaver[{backend}, {face}]")
    async def factory() -> AsyncIterator[BaseCheckpointSaver[Any]]:
        saver = ResumableSaver.from_url(url)
        try:
            yield saver if face == "async" else SyncDriven(saver)
        finally:
            await close(saver, drop=False)

    report = await validate(factory)

    failures = [f for result in report.results.values() for f in result.failures]
    assert failures == []
    assert {name for name, r in report.results.items() if r.detected} == {
        capability.value for capability in ALL_CAPABILITIES
    }
    assert report.passed_all()
    assert report.conformance_level() == "FULL"
    assert sum(packed) > 0 if packing else not packed
    await close(ResumableSaver.from_url(url), drop=True)
