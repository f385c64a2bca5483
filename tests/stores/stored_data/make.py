"""Write the stores that test_stored_data.py opens with today's code.

Run it with the resumable whose data the test should carry forward, e.g. from a
checkout of a release: `PYTHONPATH=src:tests/stores python
tests/stores/stored_data/make.py OUT_DIR`. It writes, for SQLite, PostgreSQL and
Redis (the servers of RESUMABLE_TEST_POSTGRES_URL / RESUMABLE_TEST_REDIS_URL):
`sqlite.db`, `postgres.sql` (pg_dump of schema `resumable_stored`, as INSERTs) and
`redis.json` (every key under the prefix `resumable_stored:`, values in base64),
plus `version.txt` naming the commit that wrote them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from resumable import Engine, WorkflowFailed
from stored_data.flows import DOCS, failing, finished, waiting

SCHEMA = "resumable_stored"
PREFIX = "resumable_stored:"


async def write(url: str) -> None:
    """The workload: a finished, a waiting and a failed run, and a thread."""
    async with Engine(url) as engine:
        await engine.run(finished, DOCS, run_id="finished-1")
        await engine.start(waiting, "delta", run_id="waiting-1")
        while (await engine.get("waiting-1")).status != "waiting":
            await asyncio.sleep(0.01)
        with contextlib.suppress(WorkflowFailed):
            await engine.run(failing, "omega", run_id="failed-1")
        for turn in range(3):
            await engine.save_state("thread-1", {"turn": turn}, label=f"turn-{turn}")


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def dump_redis(url: str) -> dict[str, Any]:
    """Every key under PREFIX: its type and value, bytes in base64."""
    import redis

    client: Any = redis.Redis.from_url(url)
    keys: dict[str, Any] = {}
    for key in client.scan_iter(match=f"{{{PREFIX}}}*".encode()):
        kind = client.type(key).decode()
        if kind == "string":
            value: Any = b64(client.get(key))
        elif kind == "hash":
            value = {b64(k): b64(v) for k, v in client.hgetall(key).items()}
        elif kind == "zset":
            value = [[b64(m), s] for m, s in client.zrange(key, 0, -1, withscores=True)]
        elif kind == "set":
            value = sorted(b64(m) for m in client.smembers(key))
        elif kind == "list":
            value = [b64(m) for m in client.lrange(key, 0, -1)]
        else:
            raise SystemExit(f"key {key!r} is a {kind}: teach dump_redis that type")
        keys[b64(key)] = {"type": kind, "value": value}
    return keys


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    db = out / "sqlite.db"
    db.unlink(missing_ok=True)
    asyncio.run(write(f"sqlite:///{db}"))
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode=DELETE")
    pg = os.environ["RESUMABLE_TEST_POSTGRES_URL"]
    subprocess.run(
        ["psql", pg, "-qc", f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"], check=True
    )
    asyncio.run(write(f"{pg}?schema={SCHEMA}"))
    sql = subprocess.run(
        [
            "pg_dump",
            pg,
            f"--schema={SCHEMA}",
            "--inserts",
            "--no-owner",
            "--no-privileges",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    (out / "postgres.sql").write_text(sql)
    subprocess.run(["psql", pg, "-qc", f"DROP SCHEMA {SCHEMA} CASCADE"], check=True)
    rd = os.environ["RESUMABLE_TEST_REDIS_URL"]
    import redis

    client = redis.Redis.from_url(rd)
    for key in client.scan_iter(match=f"{{{PREFIX}}}*".encode()):
        client.delete(key)
    asyncio.run(write(f"{rd}?prefix={PREFIX}"))
    (out / "redis.json").write_text(
        json.dumps(dump_redis(rd), indent=1, sort_keys=True)
    )
    for key in client.scan_iter(match=f"{{{PREFIX}}}*".encode()):
        client.delete(key)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    (out / "version.txt").write_text(f"{commit}\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
