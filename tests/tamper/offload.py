"""A tamper subject whose payloads are offloaded: the rows hold object-store references.

It wraps another subject (SQLite, PostgreSQL): the suite damages that subject's
rows as usual, and since nearly every payload is offloaded (the threshold is the
smallest allowed), what it damages are mostly references. A damaged reference
must end as any damaged payload does: in a typed error, never a crash or a hang.
The objects themselves are shared by every clone (they are content-addressed and
the suite never writes them); tests/offload damages objects on their own.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

from resumable._engine.engine import Engine
from resumable.stores.blobref import REFERENCE_SIZE
from resumable.stores.blobs import FileBlobs
from resumable.stores.capabilities import Capabilities
from resumable.stores.offload import OffloadStore
from resumable.stores.protocol import RunStore, Store
from resumable.testing.tamper import StoredField, TamperSubject, TamperSuite

__all__ = ["OFFLOAD_OVER", "ArchivingTamperSuite", "offload_subject"]

OFFLOAD_OVER = REFERENCE_SIZE
"""Every payload longer than a reference is offloaded."""


def _full(store: RunStore) -> Store:
    """The store an OffloadStore wraps: every part of the protocol."""
    return Capabilities.of(store).full_store(store, call="OffloadStore")


class _OffloadSubject:
    def __init__(self, rows: TamperSubject, folder: Path, offload_over: int) -> None:
        self._rows = rows
        self._folder = folder
        self._over = offload_over
        self.store: Store = OffloadStore(
            _full(rows.store), FileBlobs(folder), offload_over=offload_over
        )
        self._stores = [self.store]

    @property
    def url(self) -> str | None:
        base = self._rows.url
        if base is None:
            return None
        separator = "&" if "?" in base else "?"
        return f"{base}{separator}blobs={self._folder.as_uri()}&blobs_over={self._over}"

    async def fields(self) -> list[StoredField]:
        return await self._rows.fields()

    async def write(self, field: StoredField, value: Any) -> bool:
        return await self._rows.write(field, value)

    async def reopen(self) -> Store:
        store = OffloadStore(
            _full(await self._rows.reopen()),
            FileBlobs(self._folder),
            offload_over=OFFLOAD_OVER,
        )
        self._stores.append(store)
        return store

    async def clone(self) -> _OffloadSubject:
        return _OffloadSubject(await self._rows.clone(), self._folder, self._over)

    async def drop(self) -> None:
        await self._rows.drop()


def offload_subject(
    rows: TamperSubject, folder: Path, *, offload_over: int = OFFLOAD_OVER
) -> TamperSubject:
    """`rows`' store with payloads offloaded to files under `folder`."""
    return _OffloadSubject(rows, folder, offload_over)


class ArchivingTamperSuite(TamperSuite):
    """The tamper suite on a store whose finished runs were archived after the fill."""

    @staticmethod
    async def fill(subject: TamperSubject) -> None:
        """The suite's scenario, then every finished run archived (`stores.archive`)."""
        await TamperSuite.fill(subject)
        await asyncio.sleep(0.01)  # "older than 0": changed strictly before now
        # the fill's engine closed the subject's store: archive through a new one
        async with Engine(await subject.reopen()) as engine:
            done = await engine.archive(older_than=timedelta(0))
        if not any(run.payloads for run in done):
            raise AssertionError("the scenario left no finished run to archive")
