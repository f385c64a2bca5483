"""An archive stub's `refers_to` nested 200,000 deep, or 2,000,000 keys long, fails safe.

The stub of an archived run or thread lists, as JSON, the objects its archive
references (so a collection keeps them). Reading it back parses that JSON: nested
past the interpreter's recursion limit, it must end in CorruptCheckpointError,
never a RecursionError, in every action of the tamper suite and in `gc`.
(Redis keeps a run stub's keys as lines, which cannot nest: its thread stubs
hold JSON, and are damaged here.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import service_url
from resumable._engine.engine import Engine
from resumable.errors import ResumableError
from resumable.stores.redis.codec import pack, unpack
from resumable.testing import StoredField, TamperReport, TamperSubject
from tamper.offload import ArchivingTamperSuite, offload_subject
from tamper.subjects import postgres_subject, redis_subject, sqlite_subject

NESTED = "[" * 200_000 + "]" * 200_000
KEYS = [f"blobs/{i % 256:02x}/{i:064x}" for i in range(500_000)]
LONG = {"json": json.dumps(KEYS), "lines": "\n".join(KEYS)}
"""Well-formed keys, far more than the archive's records could reference: 40 MB of
text, which parsed would pass the suite's memory bound (a longer row could not
even be fetched within it)."""


async def _subject(backend: str, folder: Path) -> TamperSubject:
    if backend == "postgres":
        rows: TamperSubject = await postgres_subject(service_url(backend))
    elif backend == "redis":
        rows = await redis_subject(service_url(backend))
    else:
        rows = sqlite_subject(folder)
    # nothing offloaded on the way in: the archive moves the payloads
    return offload_subject(rows, folder / "objects", offload_over=1 << 30)


def _damaged(field: StoredField, refers_to: str = NESTED) -> object | None:
    """`field` with `refers_to` as its stub's list; None if it holds none."""
    if field.column == "refers_to":
        return refers_to
    if field.table == "tstub" and field.row[-1] == "stub":  # Redis: a packed stub
        *rest, _refers_to = unpack(field.value)
        return pack([*rest, refers_to.encode()])
    if (
        field.table == "archived"
        and field.row[1] == "string"
        and refers_to == LONG["json"]
    ):
        # Redis keeps a run's stub packed, its keys a line each (which cannot nest)
        *rest, _refers_to = unpack(field.value)
        return pack([*rest, LONG["lines"].encode()])
    return None


@pytest.mark.parametrize(
    "backend",
    [
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ],
)
@pytest.mark.parametrize("damage", ["nested 200,000 deep", "500,000 keys long"])
async def test_an_archive_stub_whose_refers_to_is_nested_deep_or_long_fails_safe(
    backend: str, damage: str, tmp_path: Path
) -> None:
    refers_to = NESTED if damage.startswith("nested") else LONG["json"]
    template = await _subject(backend, tmp_path)
    report, damaged = TamperReport(), []
    try:
        await ArchivingTamperSuite.fill(template)
        for at, stored in enumerate(await template.fields()):
            if _damaged(stored, refers_to) is None:
                continue
            subject = await template.clone()
            try:
                field = (await subject.fields())[at]  # its rows (a Redis clone: keys)
                value = _damaged(field, refers_to)
                if not await subject.write(field, value):
                    continue  # the store's own types refuse it
                damaged.append(f"{field.table}.{field.column}")
                await ArchivingTamperSuite(_never).examine(
                    report, subject, field, f"refers_to {damage}"
                )
                async with Engine(await subject.reopen()) as engine:
                    try:  # gc reads every stub's refers_to to keep those objects
                        await engine.gc()
                    except ResumableError as exc:
                        report.typed_errors[type(exc).__name__] += 1
            finally:
                await subject.drop()
    finally:
        await template.drop()
    assert damaged, "the fill left no archive stub to damage"
    assert not report.failures, "\n".join(
        f"{f.table}.{f.column} / {f.action}: {f.problem}" for f in report.failures
    )
    assert report.typed_errors["CorruptCheckpointError"] > 0, report.summary()


async def _never() -> TamperSubject:
    raise AssertionError("examine() makes no subject")
