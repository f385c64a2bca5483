"""The tamper suite on stores whose payloads are offloaded: damaged references fail safe."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import service_url
from resumable.testing import TamperSubject, TamperSuite
from tamper.offload import ArchivingTamperSuite, offload_subject
from tamper.subjects import postgres_subject, sqlite_subject

ONE_OF_EACH = frozenset(
    {
        "bit flipped at byte 0",
        "truncated to half",
        "NULL",
        "text for bytes",
        "zstd bomb of unstated size",
        "unknown type tag",
        "LangChain constructor JSON",
        "swapped with another run's",
        "number for text",
        "text for a number",
        "huge",
    }
)
"""One mutation of each kind (tests/stores/test_tamper.py's SERVER_MUTATIONS)."""


# SQLite in CI: references are bytes like any payload, and the suite runs on
# PostgreSQL's own rows in tests/stores; RESUMABLE_OFFLOAD_TAMPER_POSTGRES=1 adds
# PostgreSQL here too (it passes, in about twice SQLite's time: over CI's budget)
TAMPER_BACKENDS = ["sqlite"] + (
    [pytest.param("postgres", marks=pytest.mark.postgres)]
    if os.environ.get("RESUMABLE_OFFLOAD_TAMPER_POSTGRES") == "1"
    else []
)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("backend", TAMPER_BACKENDS)
async def test_every_damaged_column_fails_safe_when_rows_hold_references(
    backend: str, tmp_path: Path
) -> None:
    objects = tmp_path / "objects"

    async def fresh() -> TamperSubject:
        if backend == "postgres":
            return offload_subject(
                await postgres_subject(service_url(backend)), objects
            )
        return offload_subject(sqlite_subject(tmp_path), objects)

    # one mutation of each kind (tests/stores runs them all on the rows' own frames)
    report = await TamperSuite(fresh, mutation_filter=ONE_OF_EACH.__contains__).run()
    assert report.cases > 50, report.summary()
    assert report.typed_errors["CorruptCheckpointError"] > 20, report.summary()
    assert not report.failures, (
        report.summary()
        + "\n"
        + "\n".join(
            f"{f.table}.{f.column} / {f.mutation} / {f.action}: {f.problem}"
            for f in report.failures
        )
    )
    # the rows really held references: every offloaded payload is an object
    assert len(list(objects.rglob("*"))) > 10


@pytest.mark.timeout(300)  # each action of ~100 cases reads the runs' archives back
@pytest.mark.parametrize("share", range(2))  # two tests, for parallel workers
async def test_every_damaged_column_fails_safe_when_runs_are_archived(
    share: int, tmp_path: Path
) -> None:
    objects = tmp_path / "objects"

    async def fresh() -> TamperSubject:
        # nothing offloaded on the way in: the archive moves the payloads
        return offload_subject(sqlite_subject(tmp_path), objects, offload_over=1 << 30)

    # an archive's object key also as '' and as a path out of the object store
    kinds = ONE_OF_EACH | {"empty text", "path traversal"}
    report = await ArchivingTamperSuite(
        fresh, mutation_filter=kinds.__contains__, part=(share, 2)
    ).run()
    assert report.cases > 25, report.summary()
    assert not report.failures, "\n".join(
        f"{f.table}.{f.column} / {f.mutation} / {f.action}: {f.problem}"
        for f in report.failures
    )
    assert len([p for p in objects.rglob("*") if p.is_file()]) >= 3
