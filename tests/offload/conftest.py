"""A real S3 API on 127.0.0.1 (moto's server, in a thread) and offloading engines on it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from conftest import service_url, store_url
from offload.s3server import MotoS3
from resumable.stores import create_store


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[MotoS3]:
    server = MotoS3()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_env(moto_s3: MotoS3, monkeypatch: pytest.MonkeyPatch) -> MotoS3:
    """The AWS_* variables a user sets to reach this endpoint (for ?blobs=s3://)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_s3.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    return moto_s3


OFFLOAD_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=OFFLOAD_BACKENDS)
async def primary_url(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[str]:
    """A fresh SQLite or PostgreSQL store URL (a schema of its own, dropped after)."""
    backend = str(request.param)
    if backend == "postgres":
        service_url(backend)
    url = store_url(backend, tmp_path)
    yield url
    if backend == "postgres":
        store = create_store(url)
        try:
            await store.drop()  # type: ignore[attr-defined]  # PostgresStore.drop, for tests
        finally:
            await store.close()


@pytest.fixture
def bucket(moto_s3: MotoS3) -> str:
    return moto_s3.create_bucket()
