"""The PostgreSQL store: many workers on many machines sharing one database.

`create_store("postgresql://user:password@host:5432/dbname?schema=resumable")`, or
`PostgresStore(url)`; the URL's own options are described in `connection`. One module
per concept, the same names as the other backends':

- `store`: `PostgresStore`, the Store protocol's facade over the modules below.
- `connection`: the URL's options, the pool (`Connections`: opened on first use,
  closed with its loop, driver errors as ours) and the LISTEN session of
  `wait_for_work`.
- `runs`: runs and their journal: the run, lease, journal and input statements, and
  the group commit of steps (`StepCommits`).
- `claims`: the worker queue: claiming runs in one transaction, and its statements.
- `snapshots`: state snapshots of threads, their chunks, and collecting unused chunks.
- `archive`: archiving and restoring runs and threads (their rows swapped for a stub).
- `payloads`: every stored payload scanned and swapped, for `rekey`.
- `migrations/`: the schema: the numbered .sql files, and applying them.
"""

from __future__ import annotations

from resumable.stores.postgres.connection import (
    CHANNEL,
    DEFAULT_SCHEMA,
    Options,
    parse_url,
)
from resumable.stores.postgres.store import PostgresStore

__all__ = ["CHANNEL", "DEFAULT_SCHEMA", "Options", "PostgresStore", "parse_url"]
