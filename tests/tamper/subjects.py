"""Raw access to the rows of resumable's own four stores, for the tamper suite.

Each subject reads and overwrites what its store wrote with the store's own
driver, never through the store: memory (the records it keeps), SQLite (every
table's columns by primary key), PostgreSQL (the same, in the store's schema)
and Redis (every field of every hash, member of every set and zset, and string
under the store's prefix). A third-party store's author can copy the one closest
to their store: `resumable.testing.TamperSuite` takes any `TamperSubject`.
"""

from __future__ import annotations

import copy
import dataclasses
import sqlite3
import uuid
from pathlib import Path
from typing import Any

from resumable.stores import create_store
from resumable.stores.memory import MemoryStore
from resumable.stores.protocol import Store
from resumable.testing.tamper import StoredField

__all__ = ["memory_subject", "postgres_subject", "redis_subject", "sqlite_subject"]


def _decoded(value: Any) -> Any:
    return bytes(value) if isinstance(value, memoryview | bytearray) else value


class _RawMemoryStore(MemoryStore):
    """A MemoryStore that hands its dicts to the subject: they are its rows.

    A memory store's rows live nowhere but in its containers, so its subject, like
    the SQL ones that open the file or schema with the driver, reaches past the
    Store methods; this subclass is the one place that does.
    """

    def __init__(self, url: str = "memory://", *, rows: tuple[Any, ...] = ()) -> None:
        super().__init__(url)
        if rows:
            (
                self._runs,
                self._steps,
                self._inputs,
                self._starts,
                self._chunks,
                self._snapshots,
            ) = rows

    def tables(self) -> dict[str, dict[Any, Any]]:
        """Each container of records, by a table-like name (`steps:<run id>`...)."""
        tables: dict[str, dict[Any, Any]] = {"runs": self._runs}
        for run_id, steps in self._steps.items():
            tables[f"steps:{run_id}"] = steps
        for run_id, inputs in self._inputs.items():
            tables[f"inputs:{run_id}"] = inputs
        for key, snapshots in self._snapshots.items():
            tables[f"snapshots:{key}"] = snapshots
        return tables

    def chunks(self) -> dict[str, bytes]:
        """The content-addressed chunks, by digest."""
        return self._chunks

    def copied(self) -> _RawMemoryStore:
        """A new store holding a deep copy of these rows."""
        rows = copy.deepcopy(
            (
                self._runs,
                self._steps,
                self._inputs,
                self._starts,
                self._chunks,
                self._snapshots,
            )
        )
        return _RawMemoryStore(self.url, rows=rows)


class _MemorySubject:
    """The records a MemoryStore keeps, replaced field by field."""

    url = None

    def __init__(self, store: _RawMemoryStore | None = None) -> None:
        self.store = store if store is not None else _RawMemoryStore()

    async def fields(self) -> list[StoredField]:
        found: list[StoredField] = []
        for table, rows in self.store.tables().items():
            family = table.split(":", 1)[0]
            for key, record in rows.items():
                run_id = getattr(record, "run_id", None)
                for field in dataclasses.fields(record):
                    found.append(
                        StoredField(
                            family,
                            (table, key),
                            field.name,
                            getattr(record, field.name),
                            run_id,
                        )
                    )
        for digest, data in self.store.chunks().items():
            found.append(StoredField("chunks", ("chunks", digest), "data", data))
        return found

    async def write(self, field: StoredField, value: Any) -> bool:
        table, key = field.row
        if table == "chunks":
            self.store.chunks()[key] = value
            return True
        rows = self.store.tables()[table]
        record = rows[key]
        fresh = object.__new__(type(record))
        for name in (f.name for f in dataclasses.fields(record)):
            object.__setattr__(
                fresh, name, value if name == field.column else getattr(record, name)
            )
        rows[key] = fresh
        return True

    async def reopen(self) -> Store:
        return self.store

    async def clone(self) -> _MemorySubject:
        return _MemorySubject(self.store.copied())

    async def drop(self) -> None:
        await self.store.close()


async def memory_subject() -> _MemorySubject:
    """A fresh MemoryStore and its records."""
    return _MemorySubject()


class _SQLiteSubject:
    """Every column of every table of a SQLite store's file, by primary key."""

    def __init__(self, path: Path) -> None:
        self.url = f"sqlite:///{path}"
        self.path = path
        self.store: Store = create_store(self.url)
        self._stores = [self.store]

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=10)
        connection.row_factory = sqlite3.Row
        return connection

    def _layout(self, db: sqlite3.Connection) -> dict[str, tuple[list[str], list[str]]]:
        """Table -> (its key columns, its columns)."""
        tables = [
            row["name"]
            for row in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name LIKE 'resumable%' ORDER BY name"
            )
        ]
        layout = {}
        for table in tables:
            info = db.execute("SELECT name, pk FROM pragma_table_info(?)", (table,))
            rows = list(info)
            keys = [r["name"] for r in sorted(rows, key=lambda r: r["pk"]) if r["pk"]]
            layout[table] = (keys or ["rowid"], [r["name"] for r in rows])
        return layout

    async def fields(self) -> list[StoredField]:
        found: list[StoredField] = []
        with self._connect() as db:
            for table, (keys, columns) in self._layout(db).items():
                names = ", ".join(f'"{c}"' for c in dict.fromkeys([*keys, *columns]))
                order = ", ".join(f'"{k}"' for k in keys)
                query = f'SELECT {names} FROM "{table}" ORDER BY {order}'  # noqa: S608 - names read from sqlite_master
                for row in db.execute(query):
                    key = tuple(row[k] for k in keys)
                    run_id = row["run_id"] if "run_id" in columns else None
                    found.extend(
                        StoredField(table, key, column, row[column], run_id)
                        for column in columns
                    )
        return found

    async def write(self, field: StoredField, value: Any) -> bool:
        with self._connect() as db:
            keys, _ = self._layout(db)[field.table]
            where = " AND ".join(f'"{k}" = ?' for k in keys)
            try:
                db.execute(
                    f'UPDATE "{field.table}" SET "{field.column}" = ? WHERE {where}',  # noqa: S608 - names read from sqlite_master
                    (value, *field.row),
                )
            except sqlite3.IntegrityError:
                return False  # a NOT NULL or key constraint refuses it
        return True

    async def reopen(self) -> Store:
        store = create_store(self.url)
        self._stores.append(store)
        return store

    async def clone(self) -> _SQLiteSubject:
        twin = sqlite_subject(self.path.parent)
        with self._connect() as source, sqlite3.connect(twin.path) as target:
            source.backup(target)
        return twin

    async def drop(self) -> None:
        for store in self._stores:
            await store.close()


def sqlite_subject(folder: Path) -> _SQLiteSubject:
    """A fresh SQLite store in `folder` and its tables."""
    return _SQLiteSubject(folder / f"tamper-{uuid.uuid4().hex[:8]}.db")


class _PostgresSubject:
    """Every column of every table in a PostgreSQL store's schema, by primary key."""

    def __init__(self, base_url: str, *, schema: str | None = None) -> None:
        self.schema = schema or f"tamper_{uuid.uuid4().hex[:10]}"
        self._scratch: _PostgresSubject | None = None
        self.is_scratch = False  # a clone on the shared scratch schema: never dropped
        separator = "&" if "?" in base_url else "?"
        self.url = f"{base_url}{separator}schema={self.schema}"
        self._base_url = base_url
        self._conninfo = base_url.split("?", 1)[0]
        self.store: Store = create_store(self.url)
        self._stores = [self.store]

    async def _connect(self) -> Any:
        from psycopg import AsyncConnection
        from psycopg.rows import DictRow, dict_row

        return await AsyncConnection[DictRow].connect(
            self._conninfo, autocommit=True, row_factory=dict_row
        )

    async def _layout(self, db: Any) -> dict[str, tuple[list[str], list[str]]]:
        columns = await db.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = %s ORDER BY table_name, ordinal_position",
            (self.schema,),
        )
        layout: dict[str, tuple[list[str], list[str]]] = {}
        for row in await columns.fetchall():
            layout.setdefault(row["table_name"], ([], []))[1].append(row["column_name"])
        keys = await db.execute(
            "SELECT c.relname AS table_name, a.attname AS column_name "
            "FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey) "
            "WHERE i.indisprimary AND n.nspname = %s",
            (self.schema,),
        )
        for row in await keys.fetchall():
            layout[row["table_name"]][0].append(row["column_name"])
        return {t: (k or ["ctid"], c) for t, (k, c) in layout.items()}

    def table_name(self, table: str) -> Any:
        from psycopg import sql

        return sql.Identifier(self.schema, table)

    async def fields(self) -> list[StoredField]:
        from psycopg import sql

        found: list[StoredField] = []
        db = await self._connect()
        async with db:
            for table, (keys, columns) in (await self._layout(db)).items():
                names = [sql.Identifier(c) for c in dict.fromkeys([*keys, *columns])]
                query = sql.SQL("SELECT {} FROM {} ORDER BY {}").format(
                    sql.SQL(", ").join(names),
                    self.table_name(table),
                    sql.SQL(", ").join(sql.Identifier(k) for k in keys),
                )
                for row in await (await db.execute(query)).fetchall():
                    key = tuple(str(row[k]) if k == "ctid" else row[k] for k in keys)
                    run_id = row["run_id"] if "run_id" in columns else None
                    found.extend(
                        StoredField(table, key, column, _decoded(row[column]), run_id)
                        for column in columns
                    )
        return found

    async def write(self, field: StoredField, value: Any) -> bool:
        import psycopg
        from psycopg import sql

        db = await self._connect()
        async with db:
            keys, _ = (await self._layout(db))[field.table]
            query = sql.SQL("UPDATE {} SET {} = %s WHERE {}").format(
                self.table_name(field.table),
                sql.Identifier(field.column),
                sql.SQL(" AND ").join(
                    sql.SQL("{} = %s").format(sql.Identifier(k)) for k in keys
                ),
            )
            try:
                await db.execute(query, (value, *field.row))
            except (
                psycopg.DataError,
                psycopg.IntegrityError,
                psycopg.ProgrammingError,
            ):
                return False  # the column's type refuses such a value
        return True

    async def reopen(self) -> Store:
        store = create_store(self.url)
        self._stores.append(store)
        return store

    async def clone(self) -> _PostgresSubject:
        """A subject on one scratch schema, its rows reset to these ones.

        Creating a schema per case (tables, functions, migrations) would take
        longer than the case; the scratch schema is made once and emptied.
        """
        from psycopg import sql

        if self._scratch is None:
            self._scratch = _PostgresSubject(self._base_url)
            await self._scratch.store.get_run("")  # creates its tables and functions
            await self._scratch.store.close()
        twin = _PostgresSubject(self._base_url, schema=self._scratch.schema)
        db = await self._connect()
        async with db, db.transaction():
            for table in await self._layout(db):
                await db.execute(
                    sql.SQL("DELETE FROM {}").format(twin.table_name(table))
                )
                await db.execute(
                    sql.SQL("INSERT INTO {} SELECT * FROM {}").format(
                        twin.table_name(table), self.table_name(table)
                    )
                )
        twin.is_scratch = True
        return twin

    async def drop(self) -> None:
        from psycopg import sql

        for store in self._stores:
            await store.close()
        if self.is_scratch:
            return  # emptied by the next clone; dropped with the template
        if self._scratch is not None:
            await self._scratch.drop()
        db = await self._connect()
        async with db:
            await db.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                    sql.Identifier(self.schema)
                )
            )


async def postgres_subject(base_url: str) -> _PostgresSubject:
    """A fresh PostgreSQL store in a schema of its own, and its tables."""
    return _PostgresSubject(base_url)


class _RedisSubject:
    """Every field, member and string under a Redis store's key prefix."""

    def __init__(self, base_url: str) -> None:
        self.prefix = f"tamper{uuid.uuid4().hex[:10]}:"
        separator = "&" if "?" in base_url else "?"
        self.url = f"{base_url}{separator}prefix={self.prefix}"
        self._base_url = base_url
        self.store: Store = create_store(self.url)
        self._stores = [self.store]

    def _client(self) -> Any:
        from redis.asyncio import Redis

        return Redis.from_url(self._base_url)

    async def fields(self) -> list[StoredField]:
        found: list[StoredField] = []
        head = b"{" + self.prefix.encode() + b"}"
        client = self._client()
        async with client:
            keys = sorted([key async for key in client.scan_iter(match=head + b"*")])
            for key in keys:
                family = key[len(head) :].split(b":", 1)[0].decode()
                run_id = _run_of(family, key[len(head) :])
                kind = (await client.type(key)).decode()
                # a run's or the meta hash's fields are columns; elsewhere a field,
                # member or string is one entry of the family
                named = family in ("run", "meta")
                for member, value in await _items(client, key, kind):
                    column = member if named else f"{kind} entry"
                    found.append(
                        StoredField(family, (key, kind, member), column, value, run_id)
                    )
        return found

    async def write(self, field: StoredField, value: Any) -> bool:
        key, kind, column = field.row
        stored = _redis_value(value)
        client = self._client()
        async with client:
            if kind == "zset" and _score(value) != _score(value):
                return False  # Redis refuses a score that is not a number
            if kind == "hash":
                await client.hset(key, _member(column), stored)
            elif kind == "zset":
                await client.zrem(key, _member(column))
                await client.zadd(key, {_member(column): _score(value)})
            elif kind == "set":
                await client.srem(key, _member(column))
                await client.sadd(key, stored)
            elif kind == "string":
                await client.set(key, stored)
            else:
                return False
        return True

    async def reopen(self) -> Store:
        store = create_store(self.url)
        self._stores.append(store)
        return store

    async def clone(self) -> _RedisSubject:
        twin = _RedisSubject(self._base_url)
        head = b"{" + self.prefix.encode() + b"}"
        twin_head = b"{" + twin.prefix.encode() + b"}"
        client = self._client()
        async with client:
            async for key in client.scan_iter(match=head + b"*"):
                dumped = await client.dump(key)
                if dumped is not None:
                    await client.restore(twin_head + key[len(head) :], 0, dumped)
        return twin

    async def drop(self) -> None:
        for store in self._stores:
            await store.close()
        head = b"{" + self.prefix.encode() + b"}"
        client = self._client()
        async with client:
            keys = [key async for key in client.scan_iter(match=head + b"*")]
            if keys:
                await client.delete(*keys)


def _run_of(family: str, rest: bytes) -> str | None:
    if family in ("run", "steps", "inputs"):
        return rest.split(b":", 1)[1].decode("utf-8", "replace")
    return None


async def _items(client: Any, key: bytes, kind: str) -> list[tuple[str, Any]]:
    if kind == "hash":
        items = await client.hgetall(key)
        return [(f.decode("latin-1"), v) for f, v in sorted(items.items())]
    if kind == "zset":
        members = await client.zrange(key, 0, -1, withscores=True)
        return [(m.decode("latin-1"), score) for m, score in members]
    if kind == "set":
        return [(m.decode("latin-1"), m) for m in sorted(await client.smembers(key))]
    if kind == "string":
        return [("value", await client.get(key))]
    return []


def _member(column: str) -> bytes:
    return column.encode("latin-1")


def _redis_value(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8", "surrogatepass")


def _score(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


async def redis_subject(base_url: str) -> _RedisSubject:
    """A fresh Redis store under a prefix of its own, and its keys."""
    return _RedisSubject(base_url)
