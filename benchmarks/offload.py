"""Payload offload: steps returning 5 MB each, with and without an S3 object store.

A workflow of STEPS steps, each returning 5 MB of text (words drawn from real
English prose, which zstd shrinks about as it shrinks LLM output), runs on a
fresh SQLite file and a fresh PostgreSQL schema, once with every payload in the
row and once with `blobs=s3://...` (moto's S3 server in a subprocess on
127.0.0.1; the default 256 KiB threshold, so every result is offloaded). Figures:
median ms per step over ROUNDS runs (the step itself costs nothing: its result is
made beforehand, so this is the commit: encode, compress, upload, row), and the
primary store's size after the runs. PostgreSQL is skipped when
RESUMABLE_TEST_POSTGRES_URL's server does not answer.

    python benchmarks/offload.py
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import sys
import time
import uuid
from pathlib import Path
from tempfile import TemporaryDirectory

sys.path.insert(0, str(Path(__file__).parent))

from _common import PROSE, table
from s3_clients import create_bucket, moto_server

from resumable import Engine, step, workflow
from resumable.stores.blobs import S3Blobs

SIZE = 5_000_000
STEPS = 8
ROUNDS = 3
PG_URL = os.environ.get(
    "RESUMABLE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
PAYLOADS: list[str] = []


def make_payloads() -> None:
    rng = random.Random(7)
    words = PROSE.split()
    for _ in range(STEPS):
        text = " ".join(rng.choices(words, k=SIZE // 6))
        PAYLOADS.append(text[:SIZE])


@step(name="bench.produce")
async def produce(i: int, run: str) -> str:
    return run + PAYLOADS[i]  # the run id first: no two runs store equal objects


@workflow(name="bench.offload")
async def big_steps(run: str) -> int:
    return sum([len(await produce(i, run)) for i in range(STEPS)])


async def sqlite_size(url: str) -> int:
    path = Path(url.removeprefix("sqlite:///"))
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


async def postgres_size(url: str) -> int:
    import psycopg

    schema = url.rsplit("schema=", 1)[1]
    async with await psycopg.AsyncConnection.connect(PG_URL.split("?")[0]) as conn:
        cursor = await conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        )
        row = await cursor.fetchone()
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        return int(row[0]) if row else 0


async def postgres_up() -> bool:
    try:
        import psycopg

        conn = await psycopg.AsyncConnection.connect(
            PG_URL.split("?")[0], connect_timeout=2
        )
    except Exception:  # noqa: BLE001 - any failure means: skip PostgreSQL
        return False
    await conn.close()
    return True


async def one_config(url: str, blobs: S3Blobs | None) -> tuple[float, int]:
    """(median ms per step, primary store bytes after ROUNDS runs)."""
    per_step = []
    async with Engine(url, blobs=blobs) as engine:
        await engine.run(big_steps, "warm", run_id="warm")
        for r in range(ROUNDS):
            start = time.perf_counter()
            await engine.run(big_steps, f"r{r}", run_id=f"r{r}")
            per_step.append((time.perf_counter() - start) / STEPS * 1000)
    size = await (sqlite_size(url) if url.startswith("sqlite") else postgres_size(url))
    return statistics.median(per_step), size


async def main() -> None:
    make_payloads()
    backends = ["sqlite"] + (["postgres"] if await postgres_up() else [])
    rows = [["store", "offload", "ms/step", "primary store MB", "objects"]]
    ratios = []
    with moto_server() as endpoint, TemporaryDirectory() as folder:
        config = {
            "endpoint": endpoint,
            "region": "us-east-1",
            "access_key_id": "testing",
            "secret_access_key": "testing",
        }
        for backend in backends:
            figures = {}
            for offload in (False, True):
                if backend == "sqlite":
                    url = f"sqlite:///{folder}/{uuid.uuid4().hex}.db"
                else:
                    url = f"{PG_URL}?schema=bench_{uuid.uuid4().hex[:10]}"
                blobs = None
                if offload:
                    blobs = S3Blobs(f"s3://{create_bucket(endpoint)}/p", config=config)
                ms, size = await one_config(url, blobs)
                objects = len(await blobs.listing()) if blobs is not None else 0
                figures[offload] = (ms, size)
                rows.append(
                    [
                        backend,
                        "s3" if offload else "none",
                        f"{ms:.1f}",
                        f"{size / 1e6:.2f}",
                        str(objects),
                    ]
                )
            ratios.append(
                f"{backend}: offload/none step time {figures[True][0] / figures[False][0]:.2f}x, "
                f"primary store size {figures[True][1] / figures[False][1]:.3f}x"
            )
    print(
        f"{STEPS} steps of {SIZE / 1e6:.0f} MB text per run, {ROUNDS} runs after a warm-up "
        f"run (medians); objects to moto on 127.0.0.1"
    )
    print(table(rows))
    print("\n".join(ratios))


if __name__ == "__main__":
    asyncio.run(main())
