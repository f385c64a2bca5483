"""SQLite's schema: the numbered migrations (NNNN_name.sql, applied in order).

`migrate` brings a file to this version (the store thread's connection does it when
the store opens); `check_schema` refuses a read-only open of a file at another one.
"""

from __future__ import annotations

import sqlite3
from importlib import resources
from pathlib import Path

from resumable.errors import SchemaVersionError, StoreError
from resumable.stores import _sql
from resumable.stores._records import schema_version_of


def in_order() -> list[_sql.Migration]:
    """SQLite's migrations, in version order (the `.sql` files beside this module)."""
    return _sql.read_migrations(resources.files(__name__))


def latest_version() -> int:
    """The schema version this resumable writes to a SQLite file."""
    return in_order()[-1].version


def migrate(conn: sqlite3.Connection, url: str) -> None:
    """Apply the migrations the file lacks, in one transaction.

    Raises:
        SchemaVersionError: A newer version wrote the file.
    """
    supported = latest_version()
    conn.execute(
        "BEGIN IMMEDIATE"
    )  # one process migrates; the others wait, then see it done
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS resumable_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )
        row = conn.execute(
            "SELECT value FROM resumable_meta WHERE key = 'schema_version'"
        ).fetchone()
        current = schema_version_of(row[0] if row else None, store=url)
        if current > supported:
            raise SchemaVersionError(store=url, found=current, supported=supported)
        for migration in in_order():
            if migration.version > current:
                for statement in _sql.split_statements(migration.sql):
                    conn.execute(statement)
        conn.execute(
            "INSERT OR REPLACE INTO resumable_meta (key, value) VALUES ('schema_version', ?)",
            (str(max(current, supported)),),
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


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
    supported = latest_version()
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
