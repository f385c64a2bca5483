"""Shared fixtures: a fresh store per backend, an engine on it, a fake clock.

Also the end-of-run summary of skips by reason (pytest_terminal_summary).
"""

from __future__ import annotations

import enum
import os
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

import pytest

from resumable import Engine
from resumable.serde import TypeRegistry
from resumable.stores import create_store
from resumable.stores.protocol import Store
from resumable.testing import FakeClock

if TYPE_CHECKING:
    from resumable.stores.postgres import PostgresStore

BACKENDS = [
    "memory",
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]
_SERVICE_URLS = {
    "postgres": "RESUMABLE_TEST_POSTGRES_URL",
    "redis": "RESUMABLE_TEST_REDIS_URL",
}


def service_url(backend: str) -> str:
    """The test server URL for a backend, or a skip (a failure in CI) if it is unset."""
    variable = _SERVICE_URLS[backend]
    url = os.environ.get(variable)
    if not url:
        reason = f"{variable} is not set: no {backend} server to test against"
        if os.environ.get("RESUMABLE_REQUIRE_SERVICES") == "1":
            pytest.fail(f"{reason} (RESUMABLE_REQUIRE_SERVICES=1)")
        pytest.skip(reason)
    return url


def store_url(backend: str, tmp_path: Path) -> str:
    """A URL naming a fresh, empty store of the given backend."""
    if backend == "memory":
        return "memory://"
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    base = service_url(backend)
    isolate = f"t{uuid.uuid4().hex[:12]}"
    if backend == "postgres":
        separator = "&" if "?" in base else "?"
        return f"{base}{separator}schema={isolate}"
    separator = "&" if "?" in base else "?"
    return f"{base}{separator}prefix={isolate}"


@asynccontextmanager
async def open_test_store(backend: str, tmp_path: Path) -> AsyncIterator[Store]:
    """A fresh store of `backend`, dropped afterwards where that matters."""
    store = create_store(store_url(backend, tmp_path))
    try:
        yield store
    finally:
        drop = getattr(store, "drop", None)
        if drop is not None:
            await drop()
        await store.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def store(backend: str, tmp_path: Path) -> AsyncIterator[Store]:
    """A fresh store; postgres/redis skip unless RESUMABLE_TEST_<NAME>_URL is set."""
    async with open_test_store(backend, tmp_path) as store:
        yield store


def postgres_url(base: str, schema: str, **options: object) -> str:
    """`base` (a PostgreSQL URL) naming `schema` and the store's other URL options."""
    query = urlencode({"schema": schema, **options})
    return f"{base}{'&' if '?' in base else '?'}{query}"


@pytest.fixture
async def new_postgres_store() -> AsyncIterator[Callable[..., PostgresStore]]:
    """Makes PostgreSQL stores (a fresh schema unless named); all dropped and closed after."""
    base = service_url("postgres")
    made: list[PostgresStore] = []

    def make(schema: str | None = None, **options: object) -> PostgresStore:
        from resumable.stores.postgres import PostgresStore

        name = schema if schema is not None else f"t{uuid.uuid4().hex[:12]}"
        store = PostgresStore(postgres_url(base, name, **options))
        made.append(store)
        return store

    yield make
    for store in reversed(made):
        await store.drop()
        await store.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def engine(store: Store) -> Engine:
    """An engine on a fresh store of every backend, with fast store-failure timeouts."""
    return Engine(store, store_retry_s=0.2)


def until(condition: Callable[[], bool], *, timeout_s: float = 10) -> None:
    """Block (polling every ms) until `condition()` holds; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def registry_for(*values: object) -> TypeRegistry:
    """A registry allowing the types of the registrable objects inside `values`.

    Encoding registers nothing, so a test that round-trips its own classes names
    them first, as a program does through annotations or `resumable.register()`.
    """
    registry = TypeRegistry()
    seen: set[int] = set()

    def walk(value: object) -> None:
        if id(value) in seen:
            return
        seen.add(id(value))
        if isinstance(value, dict):
            for key, item in value.items():
                walk(key)
                walk(item)
        elif isinstance(value, list | tuple | set | frozenset) and (
            type(value) in (list, tuple, set, frozenset)
        ):
            for item in value:
                walk(item)
        elif registry.info(type(value)) is not None:
            registry.register(type(value))
            if not isinstance(value, enum.Enum):
                for name in registry.info(type(value)).fields:  # type: ignore[union-attr]  # just checked
                    walk(getattr(value, name, None))
                walk(getattr(value, "__pydantic_extra__", None) or {})

    for value in values:
        walk(value)
    return registry


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line per distinct skip (and xfail) reason with its count.

    `-ra` printed one line per skipped test and place (hundreds without the
    services); addopts now asks for `-rfE`, so failures and errors keep their
    full report and the rest is counted here.
    """
    for kind, title in (("skipped", "skipped"), ("xfailed", "expected failures")):
        reasons = Counter(
            _reason(report) for report in terminalreporter.stats.get(kind, [])
        )
        if not reasons:
            continue
        terminalreporter.section(f"{title}, by reason", sep="-")
        for reason, count in reasons.most_common():
            terminalreporter.write_line(f"{count:5d}  {reason}")


def _reason(report: pytest.TestReport) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        message = str(report.longrepr[2])
        return message.removeprefix("Skipped: ")
    return str(getattr(report, "wasxfail", "")) or "(no reason given)"
