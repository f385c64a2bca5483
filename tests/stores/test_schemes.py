"""URL schemes: the built-in table, and a package registering its own scheme.

A third-party package registers a scheme under the entry-point group
`resumable.stores`. Here that package is real as far as `importlib.metadata` is
concerned: a `*.dist-info` folder with an `entry_points.txt`, and a module beside
it, on `sys.path`.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from resumable import Engine, step, workflow
from resumable.errors import StoreError
from resumable.stores import ENTRY_POINT_GROUP, MemoryStore, SQLiteStore, create_store
from resumable.stores.offload import OffloadStore

Install = Callable[..., None]
"""`install(*entry_point_lines, name=distribution)`."""
MODULE = "resumable_test_planet_store"  # the third-party package's module
STORE_SOURCE = '''
from resumable.stores.memory import MemoryStore


class PlanetStore(MemoryStore):
    """A third party's store (its rows in memory, for the test)."""


def open_planet(url: str) -> PlanetStore:
    return PlanetStore(url)
'''


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Install]:
    """Install a package registering `entry_points.txt` lines, as pip would."""

    def installer(*lines: str, name: str = "planet-store") -> None:
        site = tmp_path / f"site-{name}"
        info = site / f"{name.replace('-', '_')}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n", encoding="utf-8"
        )
        entry_points = "\n".join((f"[{ENTRY_POINT_GROUP}]", *lines, ""))
        (info / "entry_points.txt").write_text(entry_points, encoding="utf-8")
        (site / f"{MODULE}.py").write_text(STORE_SOURCE, encoding="utf-8")
        monkeypatch.syspath_prepend(str(site))

    yield installer
    sys.modules.pop(MODULE, None)


async def test_a_package_registers_a_scheme_and_its_url_makes_and_runs_its_store(
    install: Install,
) -> None:
    install(f"planet = {MODULE}:open_planet")
    store = create_store("planet://mars")
    assert type(store).__name__ == "PlanetStore"
    assert store.url == "planet://mars"

    @step
    async def greet(name: str) -> str:
        return f"hello {name}"

    @workflow
    async def hello(name: str) -> str:
        return await greet(name)

    engine = Engine("planet://mars")
    try:
        assert type(engine.store).__name__ == "PlanetStore"
        assert await engine.run(hello, "mars", run_id="r1") == "hello mars"
        journal = await engine.store.load_journal("r1")
        assert len(journal) == 1  # the step, committed in the registered store
    finally:
        await engine.close()


def test_a_registered_scheme_takes_the_blobs_option_like_a_built_in_one(
    install: Install, tmp_path: Path
) -> None:
    install(f"planet = {MODULE}:open_planet")
    store = create_store(f"planet://mars?blobs=file://{tmp_path / 'blobs'}&x=1")
    assert isinstance(store, OffloadStore)
    assert type(store.inner).__name__ == "PlanetStore"
    assert store.inner.url == "planet://mars?x=1"


def test_a_built_in_scheme_is_not_taken_over_by_a_registration(
    install: Install, tmp_path: Path
) -> None:
    install(f"sqlite = {MODULE}:open_planet", f"memory = {MODULE}:open_planet")
    assert type(create_store(f"sqlite:///{tmp_path / 'x.db'}")) is SQLiteStore
    assert type(create_store("memory://")) is MemoryStore


def test_an_unknown_scheme_is_refused_listing_the_known_ones(install: Install) -> None:
    install(f"planet = {MODULE}:open_planet")
    with pytest.raises(StoreError) as caught:
        create_store("ftp://user:secret@nowhere/x")
    message = str(caught.value)
    assert "unknown scheme 'ftp'" in message
    assert "memory://, sqlite:///path.db, postgresql://... or redis://..." in message
    known = message.rsplit("known: ", 1)[1]
    assert known.split(", ") == [
        "memory://",
        "planet://",
        "postgres://",
        "postgresql://",
        "redis://",
        "rediss://",
        "sqlite://",
    ]
    assert "secret" not in message  # the URL is redacted


def test_a_registration_that_cannot_load_is_a_store_error_naming_it(
    install: Install,
) -> None:
    install(f"planet = {MODULE}:no_such_factory")
    with pytest.raises(StoreError, match=rf"cannot load {MODULE}:no_such_factory"):
        create_store("planet://mars")


def test_a_scheme_two_packages_register_is_refused_naming_both(
    install: Install,
) -> None:
    install(f"planet = {MODULE}:open_planet")
    install(f"planet = {MODULE}:PlanetStore", name="other-planets")
    with pytest.raises(StoreError, match="registered twice") as caught:
        create_store("planet://mars")
    assert f"{MODULE}:PlanetStore and {MODULE}:open_planet" in str(caught.value)


@pytest.mark.parametrize(
    ("url", "store"),
    [
        ("memory://", "MemoryStore"),
        ("sqlite:///state.db", "SQLiteStore"),
        ("postgresql://u@127.0.0.1/db", "PostgresStore"),
        ("postgres://u@127.0.0.1/db", "PostgresStore"),
        ("redis://127.0.0.1:6379/0", "RedisStore"),
        ("rediss://127.0.0.1:6379/0", "RedisStore"),
    ],
)
def test_each_built_in_scheme_makes_its_store_without_connecting(
    url: str, store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert type(create_store(url)).__name__ == store


@pytest.mark.parametrize(
    ("url", "driver", "extra"),
    [
        ("postgresql://u:secret@127.0.0.1/db", "psycopg", "postgres"),
        ("redis://:secret@127.0.0.1:6379/0", "redis", "redis"),
    ],
)
def test_a_missing_driver_names_the_extra_to_install(
    url: str, driver: str, extra: str
) -> None:
    # a fresh interpreter where the driver cannot be imported, as when the extra
    # was not installed
    program = textwrap.dedent(f"""
        import sys
        sys.modules[{driver!r}] = None
        from resumable.errors import StoreError
        from resumable.stores import create_store
        try:
            create_store({url!r})
        except StoreError as exc:
            print(exc)
    """)
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert f"pip install 'resumable[{extra}]'" in done.stdout
    assert "secret" not in done.stdout
