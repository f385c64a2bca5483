"""A SQLite snapshot row listing 500,000 chunk hashes fails safe.

A snapshot's `chunk_refs` names the chunks its state is made of. No stored count
bounds how many there are, so a damaged row may list any number of well-formed
hashes: every action of the tamper suite must still end as on a healthy store or
with a typed error, within its time limit and memory bound. (SQLite keeps them as
a JSON array in the row. PostgreSQL keeps one row per chunk, and Redis the tail of
a packed record, which the same damage takes past the memory bound today.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from resumable.testing import StoredField, TamperReport, TamperSubject, TamperSuite
from tamper.subjects import sqlite_subject

HASHES = [f"{i:064x}" for i in range(500_000)]
"""32 MB of hashes as JSON: parsed, still within the suite's memory bound."""


def _damaged(field: StoredField) -> object | None:
    """`field` listing every hash of HASHES; None if it lists no chunks."""
    return json.dumps(HASHES) if field.column == "chunk_refs" else None


@pytest.mark.timeout(300)
async def test_a_snapshot_listing_500000_chunks_fails_safe(tmp_path: Path) -> None:
    template = sqlite_subject(tmp_path)
    report, damaged = TamperReport(), list[str]()
    try:
        await TamperSuite.fill(template)
        for at, stored in enumerate(await template.fields()):
            if _damaged(stored) is None or damaged:  # one snapshot row is enough
                continue
            subject = await template.clone()
            try:
                field = (await subject.fields())[at]  # its rows (a Redis clone: keys)
                if not await subject.write(field, _damaged(field)):
                    continue  # the store's own types refuse it
                damaged.append(f"{field.table}.{field.column}")
                await TamperSuite(_never).examine(
                    report, subject, field, "500,000 chunk hashes"
                )
            finally:
                await subject.drop()
    finally:
        await template.drop()
    assert damaged, "the fill left no snapshot listing chunks"
    assert not report.failures, "\n".join(
        f"{f.table}.{f.column} / {f.action}: {f.problem}" for f in report.failures
    )


async def _never() -> TamperSubject:
    raise AssertionError("examine() makes no subject")
