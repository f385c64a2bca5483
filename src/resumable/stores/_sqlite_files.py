"""SQLite: how a URL's `mode` opens the file (see `resumable.stores.sqlite`).

`rwc` creates the file and its folder; `rw` and `ro` open an existing file only, and
say which absolute path they looked at when there is none. `ro` never writes: where
the file and its folder could be written and no WAL is beside it, it opens them
with writes refused by SQLite (`query_only`), so the WAL files SQLite makes
meanwhile are removed when it closes; elsewhere (a live writer's WAL is there, or
nothing may be written) with SQLite's `mode=ro`, falling back to `immutable` where no WAL index can be shared (a read-only
filesystem with no `-shm` file beside the database: nothing can write it there).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import NamedTuple

from resumable.errors import SchemaVersionError, StoreError
from resumable.stores import _sql
from resumable.stores._records import schema_version_of

__all__ = ["Target", "check_schema", "connect", "target"]


class Target(NamedTuple):
    """What `sqlite3.connect` is given for a mode, and what to set once connected."""

    database: str | Path
    uri: bool
    query_only: bool


def target(url: str, path: Path, mode: str) -> Target:
    """Where to connect for `mode`; creates the folder for `rwc`.

    Raises:
        StoreError: `rw` or `ro` and no file at `path` (named absolute).
    """
    if mode == "rwc":
        path.parent.mkdir(parents=True, exist_ok=True)
        return Target(path, uri=False, query_only=False)
    absolute = path.absolute()
    if not absolute.is_file():
        raise StoreError(
            store=url,
            detail=f"no database at {absolute} (mode={mode} opens an existing file "
            f"and creates none); check --store or $RESUMABLE_STORE: "
            f"sqlite:///relative/path.db is from the current folder, "
            f"sqlite:////absolute/path.db from the root",
        )
    if mode == "rw":
        return Target(f"{absolute.as_uri()}?mode=rw", uri=True, query_only=False)
    writable = os.access(absolute, os.W_OK) and os.access(absolute.parent, os.W_OK)
    # with no WAL beside it, closing a query_only connection writes nothing to the
    # file and removes the WAL files it made; with one (a live writer's, or left
    # by a crash) it could checkpoint it: mode=ro shares it instead
    if writable and not Path(f"{absolute}-wal").exists():
        return Target(f"{absolute.as_uri()}?mode=rw", uri=True, query_only=True)
    return Target(f"{absolute.as_uri()}?mode=ro", uri=True, query_only=False)


def connect(
    found: Target, *, timeout_s: float, check_same_thread: bool
) -> tuple[sqlite3.Connection, Target]:
    """A connection to `found`, and the target it really used.

    A read-only file whose WAL index cannot be shared (no `-shm` beside it, and
    none can be made) is opened `immutable`: SQLite refuses it otherwise.
    """
    conn = sqlite3.connect(
        found.database,
        uri=found.uri,
        isolation_level=None,
        timeout=timeout_s,
        check_same_thread=check_same_thread,
    )
    if not str(found.database).endswith("?mode=ro"):
        return conn, found
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as exc:
        conn.close()
        if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_CANTOPEN:
            raise  # busy, damaged...: reported as it is, not read as immutable
        immutable = Target(f"{found.database}&immutable=1", uri=True, query_only=False)
        return connect(
            immutable, timeout_s=timeout_s, check_same_thread=check_same_thread
        )
    return conn, found


def check_schema(conn: sqlite3.Connection, url: str, path: Path) -> None:
    """Refuse a read-only open of a file this version cannot read as it is.

    Raises:
        StoreError: Not a resumable store, or one an older version wrote (it
            needs the migration a read-only open does not run).
        SchemaVersionError: A newer version wrote it.
    """
    try:
        row = conn.execute(
            "SELECT value FROM resumable_meta WHERE key = 'schema_version'"
        ).fetchone()
    except sqlite3.DatabaseError as exc:
        raise StoreError(
            store=url, detail=f"{path.absolute()} is not a resumable store ({exc})"
        ) from None
    current = schema_version_of(row[0] if row else None, store=url)
    supported = _sql.latest_version("sqlite")
    if current > supported:
        raise SchemaVersionError(store=url, found=current, supported=supported)
    if current < supported:
        raise StoreError(
            store=url,
            detail=f"{path.absolute()} has schema version {current}, this version "
            f"reads {supported}: it needs a migration, which a read-only open does "
            f"not make; open it once with a command that writes (e.g. `resumable gc "
            f"--dry-run`) to migrate it",
        )
