"""The size a commit reports is what it wrote, also when the result went to the object store.

A result streamed to the object store leaves a 52-byte reference in its row;
the step span's `resumable.checkpoint.bytes` and the metric
`resumable_checkpoint_write_bytes` report the sealed bytes uploaded instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from resumable import Engine, step, workflow
from resumable.observability import Metrics, Tracing
from resumable.stores.blobref import REFERENCE_SIZE, written_size
from resumable.stores.offload import BlobRef, OffloadStore, is_reference

STREAMED = 3_000_000  # past STREAM_OVER: sealed a chunk at a time, uploaded as made
WHOLE = 800_000  # under it: sealed whole, then offloaded (past offload_over)


@step(name="observed.text")
async def text(n: int) -> str:
    return os.urandom(n // 2).hex()


@workflow(name="observed.flow")
async def flow(n: int) -> int:
    return len(await text(n))


def _written_bytes(registry: CollectorRegistry) -> float:
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            if sample.name == "resumable_checkpoint_write_bytes_total":
                return sample.value
    raise AssertionError("no resumable_checkpoint_write_bytes_total")


@pytest.mark.parametrize("size", [STREAMED, WHOLE], ids=["streamed", "whole"])
async def test_checkpoint_bytes_are_the_sealed_bytes_stored_not_the_reference(
    tmp_path: Path, size: int
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    metrics, registry = Metrics(), CollectorRegistry()
    registry.register(metrics)
    async with Engine(
        f"sqlite:///{tmp_path}/state.db",
        blobs=(tmp_path / "objects").as_uri(),
        observers=[Tracing(provider), metrics],
    ) as engine:
        assert await engine.run(flow, size, run_id="r") == size
        assert isinstance(engine.store, OffloadStore)
        (row,) = await engine.store.inner.load_journal("r")
    provider.shutdown()
    assert is_reference(row.output)
    stored = BlobRef.decode(row.output or b"", place="").size
    assert stored > size // 3  # the sealed frame (hex text compresses to about half)
    expected = stored + len(row.usage or b"")
    (span,) = [
        s for s in exporter.get_finished_spans() if s.name.startswith("resumable.step")
    ]
    assert span.attributes is not None
    assert span.attributes["resumable.checkpoint.bytes"] == expected
    assert _written_bytes(registry) == expected


def test_written_size_counts_frames_as_they_are_and_references_by_their_object() -> (
    None
):
    ref = BlobRef(codec=1, size=123_456_789, sha256=bytes(32))
    assert written_size(ref.encode()) == 123_456_789
    assert written_size(b"\x01\x00abc") == 5
    assert written_size(None) == 0
    damaged = bytearray(ref.encode())
    damaged[-1] ^= 0x01  # fails its CRC: counted as the bytes the row holds
    assert written_size(bytes(damaged)) == REFERENCE_SIZE
