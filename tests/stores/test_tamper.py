"""The tamper suite on every store: damaged rows end in typed errors, in time, in bounded memory."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from conftest import BACKENDS, service_url
from resumable.testing import TamperSubject, TamperSuite
from tamper.subjects import (
    memory_subject,
    postgres_subject,
    redis_subject,
    sqlite_subject,
)

SERVER_MUTATIONS = frozenset(
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
        "huge float",
        "number for bytes",
        "bytes for text, not UTF-8",
    }
)


def subject_factory(
    backend: str, tmp_path: Path
) -> Callable[[], Awaitable[TamperSubject]]:
    if backend == "memory":
        return memory_subject
    if backend == "sqlite":

        async def fresh_sqlite() -> TamperSubject:
            return sqlite_subject(tmp_path)

        return fresh_sqlite
    url = service_url(backend)
    if backend == "postgres":
        return lambda: postgres_subject(url)
    return lambda: redis_subject(url)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_every_damaged_column_fails_safe(backend: str, tmp_path: Path) -> None:
    modules_before = set(sys.modules)
    # the server stores get one mutation of each kind (each case there costs a
    # schema copy and server round trips); the embedded ones get them all
    keep = None if backend in ("memory", "sqlite") else SERVER_MUTATIONS.__contains__
    report = await TamperSuite(
        subject_factory(backend, tmp_path), mutation_filter=keep
    ).run()
    assert report.cases > 50, report.summary()
    assert not report.failures, (
        report.summary()
        + "\n"
        + "\n".join(
            f"{f.table}.{f.column} / {f.mutation} / {f.action}: {f.problem}"
            for f in report.failures
        )
    )
    # the LangChain constructor JSON imported nothing
    assert not {m for m in set(sys.modules) - modules_before if "langchain" in m}
