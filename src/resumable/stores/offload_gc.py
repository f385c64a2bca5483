"""Collecting objects no row references (`OffloadStore.collect_garbage`).

Objects are offloaded payloads (`sha256/...`), archives, and temporary objects
of streamed uploads (`tmp/...`) that a crash or a failed move left behind: none
is referenced by a row, so each is deleted once older than the grace period.
Segments of a streamed upload (`seg/...`, see `stores.segments`) are kept while
a referenced manifest names them, and deleted under the same rule otherwise.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

from resumable.errors import StoreError
from resumable.stores.blobref import key_of
from resumable.stores.blobs import (
    BlobInfo,
    BlobMissing,
    BlobStore,
    BlobUnavailable,
    SegmentedBlobs,
)
from resumable.stores.protocol import PAYLOAD_KINDS, Store
from resumable.stores.segments import MANIFEST_MAX, SEGMENT_PREFIX
from resumable.stores.stubs import SupportsArchive, SupportsThreadArchive

__all__ = ["collect_garbage", "referenced_keys"]

_SCAN_PAGE: Final = 500


async def referenced_keys(inner: Store) -> set[str]:
    """The keys of every object a payload or a stub of the wrapped store references now.

    A stub references its object and the objects its records reference.
    """
    keys = await _stub_keys(inner)
    for kind in PAYLOAD_KINDS:
        after: tuple[str | int, ...] | None = None
        while True:
            page = await inner.scan_payloads(kind, after=after, limit=_SCAN_PAGE)
            for payload in page:
                key = key_of(payload.data)
                if key is not None:
                    keys.add(key)
            if len(page) < _SCAN_PAGE:
                break
            after = page[-1].key
    return keys


async def _stub_keys(inner: Store) -> set[str]:
    keys: set[str] = set()
    after: str | None = None
    while isinstance(inner, SupportsArchive):
        runs = await inner.list_archive_stubs(after=after, limit=_SCAN_PAGE)
        for run in runs:
            keys.add(run.key)
            keys.update(run.refers_to)
        if len(runs) < _SCAN_PAGE:
            break
        after = runs[-1].run_id
    after = None
    while isinstance(inner, SupportsThreadArchive):
        threads = await inner.list_thread_stubs(after=after, limit=_SCAN_PAGE)
        for thread in threads:
            keys.add(thread.key)
            keys.update(thread.refers_to)
        if len(threads) < _SCAN_PAGE:
            break
        after = threads[-1].thread_id
    return keys


async def collect_garbage(
    referenced: Collection[str], blobs: BlobStore, *, older_than_ms: int, now_ms: int
) -> int:
    """Delete objects no row references that are older than `older_than_ms`.

    The grace period covers writes in flight: an object is uploaded before
    the row that references it commits, so a young unreferenced object may
    be about to be referenced. Rows are read first and objects listed after,
    and each object's age is checked again just before it is deleted, so an
    upload that refreshed it meanwhile keeps it. Returns how many were deleted.

    `referenced` must be read before this lists the objects.

    Raises:
        StoreError: the object store did not answer.
    """
    cutoff = now_ms - older_than_ms
    deleted = 0
    try:
        listing = await blobs.listing()
        kept = await _named_segments(blobs, listing, referenced, cutoff)
        for blob in listing:
            if blob.key in referenced or blob.modified_at_ms > cutoff:
                continue
            if blob.key.startswith(SEGMENT_PREFIX) and (
                kept is None or blob.key in kept
            ):
                continue
            try:
                if (await blobs.info(blob.key)).modified_at_ms > cutoff:
                    continue  # uploaded again since the listing
            except BlobMissing:
                continue
            await blobs.delete(blob.key)
            deleted += 1
    except BlobUnavailable as exc:
        raise StoreError(store=blobs.url, detail=str(exc)) from exc
    return deleted


async def _named_segments(
    blobs: BlobStore, listing: list[BlobInfo], referenced: Collection[str], cutoff: int
) -> set[str] | None:
    """The segments referenced manifests name; None: keep them all (cannot tell).

    Manifests are read only when some segment would otherwise be deleted, and
    only the referenced objects small enough to be one.
    """
    if not any(
        b.key.startswith(SEGMENT_PREFIX)
        and b.key not in referenced
        and b.modified_at_ms <= cutoff
        for b in listing
    ):
        return set()
    if not isinstance(blobs, SegmentedBlobs):
        return None
    named: set[str] = set()
    for blob in listing:
        if blob.key in referenced and blob.size <= MANIFEST_MAX:
            try:
                named.update(await blobs.segments(blob.key))
            except BlobMissing:
                continue  # deleted since the listing: it names nothing now
    return named
