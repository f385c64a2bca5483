"""What a durable step costs on PostgreSQL, next to the write it cannot avoid.

1000 sequential steps, each returning ~1 KB, through `resumable.Engine` on a
postgresql:// store, against raw psycopg writing the same journal row with
INSERT + COMMIT on one connection. Median of 5 runs; target: at most 1.3x raw.
The µs per step and the bytes a run and a step take (tables, TOAST and indexes)
are written to resumable/data/overhead.json for `resumable cost-model`.

    RESUMABLE_TEST_POSTGRES_URL=postgresql://... python benchmarks/pg_step_overhead.py
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid

import psycopg
from _overhead import save, storage_figures
from psycopg import sql

from resumable import Engine, step, workflow
from resumable.stores.postgres import PostgresStore

URL = os.environ.get(
    "RESUMABLE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
STEPS = 1000
ROUNDS = 5
PAYLOAD = (
    "x" * 1000
)  # stored as-is: under the 1 KiB compression threshold, like the raw row


@step
async def produce(i: int) -> str:
    return PAYLOAD


@workflow
async def loop(n: int) -> int:
    for i in range(n):
        await produce(i)
    return n


async def engine_round(url: str, run_id: str) -> float:
    """Microseconds per step through the engine (the store is already migrated)."""
    engine = Engine(url)
    try:
        await engine.run(loop, 1, run_id=f"{run_id}-warm")  # connect and warm the pool
        started = time.perf_counter()
        await engine.run(loop, STEPS, run_id=run_id)
        return (time.perf_counter() - started) / STEPS * 1e6
    finally:
        await engine.close()


async def raw_round(conninfo: str, schema: str, row: tuple[object, ...]) -> float:
    """Microseconds per INSERT + COMMIT of the same journal row, on one connection."""
    insert = sql.SQL(
        "INSERT INTO {}.raw_steps (run_id, seq, name, fingerprint, status, output, "
        "attempts, started_at_ms, finished_at_ms, usage) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    ).format(sql.Identifier(schema))
    async with await psycopg.AsyncConnection.connect(conninfo) as conn:
        await conn.execute(
            sql.SQL("TRUNCATE {}.raw_steps").format(sql.Identifier(schema))
        )
        await conn.commit()
        started = time.perf_counter()
        for seq in range(1, STEPS + 1):
            await conn.execute(insert, (row[0], seq, *row[2:]))
            await conn.commit()
        return (time.perf_counter() - started) / STEPS * 1e6


async def main() -> None:
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    url = f"{URL}{'&' if '?' in URL else '?'}schema={schema}"
    store = PostgresStore(url)
    await store.open()
    conninfo = store._options.conninfo  # the URL without our own options
    try:
        # the row the engine wrote for one step, so raw writes exactly the same bytes
        await Engine(store).run(loop, 1, run_id="sample")
        (record,) = await store.load_journal("sample")
        row = (
            record.run_id,
            record.seq,
            record.name,
            record.fingerprint,
            record.status,
            record.output,
            record.attempts,
            record.started_at_ms,
            record.finished_at_ms,
            record.usage,
        )
        async with await psycopg.AsyncConnection.connect(conninfo) as conn:
            await conn.execute(
                sql.SQL(
                    "CREATE TABLE {0}.raw_steps (LIKE {0}.resumable_steps INCLUDING ALL)"
                ).format(sql.Identifier(schema))
            )
        engine_us: list[float] = []
        raw_us: list[float] = []
        for i in range(ROUNDS):
            raw_us.append(await raw_round(conninfo, schema, row))
            engine_us.append(await engine_round(url, f"bench-{i}"))
        engine_median = statistics.median(engine_us)
        raw_median = statistics.median(raw_us)
        print(f"payload: {len(record.output or b'')} bytes per step, {STEPS} steps")
        print(f"engine : {engine_median:8.1f} us/step   runs: {_fmt(engine_us)}")
        print(f"raw    : {raw_median:8.1f} us/step   runs: {_fmt(raw_us)}")
        print(f"ratio  : {engine_median / raw_median:8.2f}x (target <= 1.30x)")
        await save_figures(url, conninfo, schema, engine_median)
    finally:
        await store.drop()
        await store.close()


async def save_figures(
    url: str, conninfo: str, schema: str, us_per_step: float
) -> None:
    """The bytes of a run and a step in PostgreSQL, with the µs per step, for cost-model."""
    size = sql.SQL(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind = 'r' AND c.relname LIKE 'resumable%%'"
    )

    async def used_bytes() -> float:
        async with await psycopg.AsyncConnection.connect(conninfo) as conn:
            cursor = await conn.execute(size, (schema,))
            row = await cursor.fetchone()
            return float(row[0]) if row else 0.0

    engine = Engine(url)
    try:
        per_run, per_step = await storage_figures(engine, used_bytes)
    finally:
        await engine.close()
    await save(
        "postgres",
        us_per_step=us_per_step,
        bytes_per_run=per_run,
        bytes_per_step=per_step,
        source=f"benchmarks/pg_step_overhead.py, median of {ROUNDS} runs of {STEPS} steps",
    )


def _fmt(values: list[float]) -> str:
    return ", ".join(f"{v:.0f}" for v in values)


if __name__ == "__main__":
    asyncio.run(main())
