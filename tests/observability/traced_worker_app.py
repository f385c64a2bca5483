"""An app for `resumable worker --app traced_worker_app --traces` in a test.

Imported by the worker, it sets up the OpenTelemetry SDK as an application would
(a global TracerProvider), exporting each finished span as one JSON line to the
file TRACED_SPANS names: OTLP needs a collector, a file needs nothing. Imported
with TRACED_SPANS unset (as by the test itself), it configures nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

from resumable import step, workflow

STEPS = 3


class JsonLinesExporter(SpanExporter):
    """Appends each span (names, ids, attributes, links) to a file, one per line."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a", encoding="utf-8") as out:
            for span in spans:
                out.write(json.dumps(as_dict(span)) + "\n")
        return SpanExportResult.SUCCESS


def as_dict(span: ReadableSpan) -> dict[str, object]:
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent_id": None if span.parent is None else f"{span.parent.span_id:016x}",
        "attributes": dict(span.attributes or {}),
        "links": [f"{link.context.span_id:016x}" for link in span.links],
    }


@step
async def traced_part(i: int) -> int:
    return i * 3


@workflow(name="traced.worker")
async def traced_worker_flow(n: int) -> int:
    return sum([await traced_part(i) for i in range(n)])


if os.environ.get("TRACED_SPANS"):
    provider = TracerProvider()
    provider.add_span_processor(
        SimpleSpanProcessor(JsonLinesExporter(os.environ["TRACED_SPANS"]))
    )
    trace.set_tracer_provider(provider)
