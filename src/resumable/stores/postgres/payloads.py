"""PostgreSQL: every stored payload, scanned page by page and swapped (`rekey`).

For each payload kind (`resumable.stores._sql.PAYLOAD_COLUMNS`: run inputs and
outputs, step outputs and usage, input values, snapshot manifests and metadata), a
first-page scan, a next-page scan keyed on the row's primary key, and a
compare-and-swap of one payload. Identifiers are composed, values are parameters.
"""

from __future__ import annotations

from psycopg import sql
from psycopg.rows import DictRow

from resumable.stores import _sql
from resumable.stores.protocol import Payload, PayloadKind


def payload_statements(schema: str) -> dict[str, tuple[bytes, bytes, bytes]]:
    """Each payload kind's first-page scan, next-page scan and compare-and-swap."""
    name = sql.Identifier(schema)
    return {
        kind: _statements(name, *columns)
        for kind, columns in _sql.PAYLOAD_COLUMNS.items()
    }


def _statements(
    name: sql.Identifier,
    table: str,
    ids: tuple[str, ...],
    extra: tuple[str, ...],
    column: str,
) -> tuple[bytes, bytes, bytes]:
    """A payload kind's first-page scan, next-page scan and compare-and-swap."""
    keys = sql.SQL(", ").join(map(sql.Identifier, ids))
    target = sql.SQL("{schema}.{table}").format(
        schema=name, table=sql.Identifier(table)
    )
    selected = sql.SQL("SELECT {cols} FROM {target} WHERE {col} IS NOT NULL").format(
        cols=sql.SQL(", ").join(map(sql.Identifier, (*ids, *extra, column))),
        target=target,
        col=sql.Identifier(column),
    )
    order = sql.SQL(" ORDER BY {keys} LIMIT %s").format(keys=keys)
    after = sql.SQL(" AND ({keys}) > ({marks})").format(
        keys=keys, marks=sql.SQL(", ").join(sql.Placeholder() * len(ids))
    )
    replace = sql.SQL(
        "UPDATE {target} SET {col} = %s WHERE {match} AND {col} = %s"
    ).format(
        target=target,
        col=sql.Identifier(column),
        match=sql.SQL(" AND ").join(
            sql.SQL("{} = %s").format(sql.Identifier(part)) for part in ids
        ),
    )
    return (
        sql.Composed([selected, order]).as_bytes(None),
        sql.Composed([selected, after, order]).as_bytes(None),
        replace.as_bytes(None),
    )


def payloads_from_rows(kind: PayloadKind, rows: list[DictRow]) -> list[Payload]:
    """The payloads of `kind` a scan read: key columns first, the payload last."""
    return [
        Payload(
            kind=kind,
            key=tuple(_sql.key_from_sql(value) for value in list(row.values())[:-1]),
            data=bytes(list(row.values())[-1]),
        )
        for row in rows
    ]
