"""Stores: where runs, journals, inputs and snapshots live, chosen by URL.

A URL's scheme names its store: the built-in schemes are in one table here, and
any installed package may add one under the entry-point group `resumable.stores`
(`ENTRY_POINT_GROUP`): `myscheme = "mypackage.store:MyStore"`, a callable taking
the URL. docs/stores.md, "Giving your store a URL scheme", says how.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib.metadata import EntryPoint, entry_points
from types import MappingProxyType
from typing import Final, NamedTuple, cast
from urllib.parse import parse_qsl, urlencode, urlsplit

from resumable.errors import StoreError
from resumable.stores.capabilities import Capabilities
from resumable.stores.memory import MemoryStore
from resumable.stores.protocol import Store
from resumable.stores.sqlite import DEFAULT_PATH, SQLiteStore
from resumable.stores.urls import redact

DEFAULT_URL = f"sqlite:///{DEFAULT_PATH}"
ENTRY_POINT_GROUP: Final = "resumable.stores"
"""The entry-point group where a package registers a URL scheme for its store."""

__all__ = [
    "DEFAULT_URL",
    "ENTRY_POINT_GROUP",
    "MemoryStore",
    "SQLiteStore",
    "Store",
    "create_store",
    "open_store",
    "redact",
]


class _Scheme(NamedTuple):
    """Where the store of a built-in scheme is made, and what it needs installed."""

    factory: str
    """`module:callable`, imported when the scheme is first used; called with the URL."""
    driver: str | None = None
    """The library the module imports, named when it is missing."""
    extra: str | None = None
    """The extra that installs the driver: `pip install 'resumable[extra]'`."""


_POSTGRES: Final = _Scheme(
    "resumable.stores.postgres:PostgresStore", driver="psycopg", extra="postgres"
)
_REDIS: Final = _Scheme(
    "resumable.stores.redis:RedisStore", driver="redis-py", extra="redis"
)
_SCHEMES: Final[Mapping[str, _Scheme]] = MappingProxyType(
    {
        "memory": _Scheme("resumable.stores.memory:MemoryStore"),
        "sqlite": _Scheme("resumable.stores.sqlite:SQLiteStore"),
        "postgresql": _POSTGRES,
        "postgres": _POSTGRES,
        "redis": _REDIS,
        "rediss": _REDIS,
    }
)
"""The built-in schemes. They come first: a package cannot take one over."""


def create_store(url: str = DEFAULT_URL) -> Store:
    """The store a URL names, not yet connected.

    It opens (creating or migrating its schema) on first use. Drivers are imported only when their scheme is used; a
    missing one is reported with the extra to install. `?blobs=s3://bucket/prefix`
    (or `file:///folder`) on any URL offloads large payloads to that object store,
    those over `&blobs_over=N` bytes (default 256 KiB): see `stores.offload`.
    """
    url, blobs, offload_over = _split_blobs(url)
    if blobs is not None:
        from resumable.stores.blobref import REFERENCE_SIZE
        from resumable.stores.blobs import open_blobs
        from resumable.stores.offload import OffloadStore

        if offload_over < REFERENCE_SIZE:
            raise StoreError(
                store=redact(url),
                detail=f"blobs_over={offload_over} is smaller than a reference "
                f"({REFERENCE_SIZE} bytes): offloading would grow the rows",
            )
        return OffloadStore(
            create_store(url), open_blobs(blobs), offload_over=offload_over
        )
    return _factory(urlsplit(url).scheme, url)(url)


def _factory(scheme: str, url: str) -> Callable[[str], Store]:
    """What makes the store of `scheme`: a built-in one, else a registered one.

    Raises:
        StoreError: The scheme's driver is missing (naming the extra to install),
            no one registers the scheme (listing those known), or its registration
            cannot be loaded.
    """
    builtin = _SCHEMES.get(scheme)
    if builtin is not None:
        try:
            return _load(EntryPoint(scheme, builtin.factory, ENTRY_POINT_GROUP))
        except ImportError as exc:
            if builtin.extra is None:
                raise  # our own module: a broken install, not a missing extra
            raise StoreError(
                store=redact(url),
                detail=f"needs {builtin.driver} ({exc}); "
                f"pip install 'resumable[{builtin.extra}]'",
            ) from exc
    registered = _registered()
    found = {point.value: point for point in registered.get(scheme, ())}
    if not found:
        known = ", ".join(f"{name}://" for name in sorted({*_SCHEMES, *registered}))
        raise StoreError(
            store=redact(url),
            detail=f"unknown scheme {scheme!r}; use memory://, sqlite:///path.db, "
            f"postgresql://... or redis://..., or install the package that registers "
            f"it (entry-point group {ENTRY_POINT_GROUP!r}); known: {known}",
        )
    if len(found) > 1:
        raise StoreError(
            store=redact(url),
            detail=f"scheme {scheme!r} is registered twice, as "
            f"{' and '.join(sorted(found))} (entry-point group "
            f"{ENTRY_POINT_GROUP!r}); uninstall one of the packages",
        )
    (point,) = found.values()
    try:
        return _load(point)
    except (ImportError, AttributeError) as exc:
        raise StoreError(
            store=redact(url),
            detail=f"cannot load {point.value}, the store registered for "
            f"{scheme}:// (entry-point group {ENTRY_POINT_GROUP!r}): {exc}",
        ) from exc


def _registered() -> dict[str, list[EntryPoint]]:
    """The schemes installed packages register, each with its entry points."""
    found: dict[str, list[EntryPoint]] = {}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(point.name, []).append(point)
    return found


def _load(point: EntryPoint) -> Callable[[str], Store]:
    return cast("Callable[[str], Store]", point.load())


def _split_blobs(url: str) -> tuple[str, str | None, int]:
    """The URL without its `blobs` and `blobs_over` options, and their values."""
    from resumable.stores.offload import DEFAULT_OFFLOAD_OVER

    parts = urlsplit(url)
    if "blobs" not in parts.query:
        return url, None, DEFAULT_OFFLOAD_OVER
    options = parse_qsl(parts.query, keep_blank_values=True)
    rest = [(k, v) for k, v in options if k not in ("blobs", "blobs_over")]
    found = dict(options)
    over = found.get("blobs_over", str(DEFAULT_OFFLOAD_OVER))
    if not over.isdigit():
        raise StoreError(
            store=redact(url), detail=f"blobs_over={over!r} is not a number of bytes"
        )
    base = url.split("?", 1)[0]  # not geturl(): it turns sqlite://// into sqlite://
    return (
        f"{base}?{urlencode(rest)}" if rest else base,
        found.get("blobs") or None,
        int(over),
    )


async def open_store(url: str = DEFAULT_URL) -> Store:
    """The store a URL names, connected and migrated (errors surface here)."""
    store = create_store(url)
    opener = Capabilities.of(store).opener
    if opener is not None:
        await opener.open()
    return store
