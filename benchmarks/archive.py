"""Cold history: primary-store size for finished runs before and after `archive`.

RUNS finished runs of a workflow of STEPS steps, each returning STEP_CHARS
characters of English prose with token usage recorded (what an LLM step
leaves), are written to a fresh SQLite file and a fresh PostgreSQL schema; then
`engine.archive(older_than=0)` moves every run's journal into one object per
run in a local folder (`blobs=file://`). Figures, medians of ROUNDS rounds (a
fresh store each):

- the primary store's size before and after, once space is given back
  (SQLite: the file's bytes after `VACUUM`; PostgreSQL: `pg_total_relation_size`
  of every table of the schema after `VACUUM FULL`). Without that, SQLite and
  PostgreSQL keep the freed pages for the rows written next: the store stops
  growing rather than shrinking;
- SQLite also without vacuum: pages in use (page_count - freelist_count);
- seconds to archive all runs, and the objects' bytes;
- ms to read one run's history (`engine.history`, READS runs once each, by a
  fresh engine) before archiving and after (fetch, hash check, inflate).

With `--threads N` it measures threads instead: N conversation threads, each
saved SAVES times (`engine.save_state`, a message of MESSAGE_CHARS characters of
prose appended per save; with `--workload draft` also a draft rewritten per
save), archived (`stores.archive`: all but each thread's
newest snapshot move into one object per thread). Figures as above, and the ms
to read a thread's history (`engine.state_history`), to load an old state
(`load_state(checkpoint_id=)`, the tenth save) and to load the latest, by a
fresh engine, live and archived.

PostgreSQL is skipped when RESUMABLE_TEST_POSTGRES_URL's server does not answer.

    python benchmarks/archive.py [--runs 1000] [--rounds 3]
    python benchmarks/archive.py --threads 200 [--saves 50] [--rounds 3]
        [--workload chat|draft]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import statistics
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from tempfile import TemporaryDirectory

sys.path.insert(0, str(Path(__file__).parent))

from _common import prose, table

from offload import PG_URL, postgres_up
from resumable import Engine, current_run, step, workflow
from resumable.stores.blobs import FileBlobs

STEPS = 10
STEP_CHARS = 1500
BATCH = 50
READS = 50
MESSAGE_CHARS = 600


@step(name="bench.answer")
async def answer(run: str, i: int) -> str:
    current_run().record_usage(model="gpt-5-mini", input_tokens=900, output_tokens=350)
    # a different passage per step of each run, the same on every round
    return prose(random.Random(f"{run}/{i}"), STEP_CHARS)


@workflow(name="bench.archive")
async def ten_steps(run: str) -> int:
    return sum([len(await answer(run, i)) for i in range(STEPS)])


def sqlite_sizes(url: str) -> tuple[int, int]:
    """(bytes in use, file bytes after VACUUM)."""
    path = url.removeprefix("sqlite:///")
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    files = Path(path).parent.glob(Path(path).name + "*")
    return (pages - free) * size, sum(p.stat().st_size for p in files)


async def postgres_size(schema: str) -> int:
    """pg_total_relation_size of every table of `schema`, after VACUUM FULL."""
    import psycopg
    from psycopg import sql

    conninfo = PG_URL.split("?")[0]
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        )
        for (table_name,) in await cursor.fetchall():
            await conn.execute(
                sql.SQL("VACUUM FULL {}.{}").format(
                    sql.Identifier(schema), sql.Identifier(table_name)
                )
            )
        cursor = await conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        )
        row = await cursor.fetchone()
        return int(row[0]) if row else 0


async def drop_schema(schema: str) -> None:
    import psycopg
    from psycopg import sql

    conninfo = PG_URL.split("?")[0]
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        await conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )


async def history_ms(engine: Engine, ids: list[str]) -> float:
    """Median ms to read one run's history, over READS runs read once each."""
    samples = []
    for run_id in ids[:: max(1, len(ids) // READS)][:READS]:
        began = time.perf_counter()
        await engine.history(run_id)
        samples.append((time.perf_counter() - began) * 1000)
    return statistics.median(samples)


async def measure(url: str, folder: Path, runs: int) -> dict[str, float]:
    """Fill, measure, archive, measure: one round on one fresh store."""
    blobs = FileBlobs(folder)
    is_sqlite = url.startswith("sqlite")
    schema = "" if is_sqlite else url.rsplit("schema=", 1)[1]
    async with Engine(url, blobs=blobs) as engine:
        ids = [f"run-{i:05d}" for i in range(runs)]
        for start in range(0, runs, BATCH):
            batch = ids[start : start + BATCH]
            await asyncio.gather(*(engine.run(ten_steps, r, run_id=r) for r in batch))
        await asyncio.sleep(0.01)
    figures: dict[str, float] = {}
    async with Engine(url, blobs=blobs) as engine:
        figures["read_live_ms"] = await history_ms(engine, ids)
    if is_sqlite:
        figures["used_before"], figures["before"] = sqlite_sizes(url)
    else:
        figures["before"] = await postgres_size(schema)
    async with Engine(url, blobs=blobs) as engine:
        began = time.perf_counter()
        done = await engine.archive(older_than=timedelta(0), limit=runs)
        figures["archive_s"] = time.perf_counter() - began
        assert len(done) == runs, len(done)
        figures["objects"] = sum(item.bytes_moved for item in done)
    async with Engine(url, blobs=blobs) as engine:
        figures["read_cold_ms"] = await history_ms(engine, ids)
    if is_sqlite:
        figures["used_after"], figures["after"] = sqlite_sizes(url)
    else:
        figures["after"] = await postgres_size(schema)
        await drop_schema(schema)
    return figures


async def fill_threads(
    engine: Engine, ids: list[str], saves: int, workload: str
) -> None:
    """Each thread saved `saves` times, a few threads at once.

    "chat": a message appended per save (every state holds the ones before);
    "draft": the same, and a draft of 4 messages' length rewritten per save.
    """

    async def conversation(thread_id: str) -> None:
        rng = random.Random(thread_id)
        messages: list[dict[str, str]] = []
        for i in range(saves):
            role = "user" if i % 2 == 0 else "assistant"
            messages.append({"role": role, "content": prose(rng, MESSAGE_CHARS)})
            state: dict[str, object] = {"messages": list(messages)}
            if workload == "draft":
                state["draft"] = prose(rng, 4 * MESSAGE_CHARS)
            await engine.save_state(thread_id, state)

    for start in range(0, len(ids), BATCH):
        await asyncio.gather(*(conversation(t) for t in ids[start : start + BATCH]))


async def thread_reads(engine: Engine, ids: list[str]) -> dict[str, float]:
    """Median ms per read, over READS threads read once each (the latest first)."""
    samples: dict[str, list[float]] = {"latest": [], "history": [], "old": []}
    for thread_id in ids[:: max(1, len(ids) // READS)][:READS]:
        began = time.perf_counter()
        await engine.load_state(thread_id)
        samples["latest"].append((time.perf_counter() - began) * 1000)
        began = time.perf_counter()
        history = await engine.state_history(thread_id)
        samples["history"].append((time.perf_counter() - began) * 1000)
        old = history[-10].checkpoint_id
        began = time.perf_counter()
        await engine.load_state(thread_id, checkpoint_id=old)
        samples["old"].append((time.perf_counter() - began) * 1000)
    return {kind: statistics.median(ms) for kind, ms in samples.items()}


async def measure_threads(
    url: str, folder: Path, args: argparse.Namespace
) -> dict[str, float]:
    """Fill, measure, archive, measure: one round of threads on one fresh store."""
    blobs = FileBlobs(folder)
    is_sqlite = url.startswith("sqlite")
    schema = "" if is_sqlite else url.rsplit("schema=", 1)[1]
    threads = args.threads
    ids = [f"thread-{i:05d}" for i in range(threads)]
    async with Engine(url, blobs=blobs) as engine:
        await fill_threads(engine, ids, args.saves, args.workload)
        await asyncio.sleep(0.01)
    figures: dict[str, float] = {}
    async with Engine(url, blobs=blobs) as engine:
        live = await thread_reads(engine, ids)
    figures |= {f"live_{kind}": ms for kind, ms in live.items()}
    if is_sqlite:
        figures["used_before"], figures["before"] = sqlite_sizes(url)
    else:
        figures["before"] = await postgres_size(schema)
    async with Engine(url, blobs=blobs) as engine:
        began = time.perf_counter()
        done = await engine.archive(older_than=timedelta(0), limit=threads)
        figures["archive_s"] = time.perf_counter() - began
        assert len(done) == threads, len(done)
        figures["objects"] = sum(item.bytes_moved for item in done)
    async with Engine(url, blobs=blobs) as engine:
        cold = await thread_reads(engine, ids)
    figures |= {f"cold_{kind}": ms for kind, ms in cold.items()}
    if is_sqlite:
        figures["used_after"], figures["after"] = sqlite_sizes(url)
    else:
        figures["after"] = await postgres_size(schema)
        await drop_schema(schema)
    return figures


def store_for(backend: str, tmp: str, r: int) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp}/{backend}-{r}.db"
    return f"{PG_URL}?schema=bench_{uuid.uuid4().hex[:10]}"


async def main_threads(args: argparse.Namespace, backends: list[str]) -> None:
    header = ["store", "before MB", "after MB", "after/before", "archive s"]
    rows = [[*header, "objects MB", "history ms", "old state ms", "latest ms"]]
    notes = []
    with TemporaryDirectory() as tmp:
        for backend in backends:
            rounds = []
            for r in range(args.rounds):
                url = store_for(backend, tmp, r)
                folder = Path(tmp) / f"objects-{backend}-{r}"
                rounds.append(await measure_threads(url, folder, args))
            med = {k: statistics.median(f[k] for f in rounds) for k in rounds[0]}
            rows.append(
                [
                    backend,
                    f"{med['before'] / 1e6:.2f}",
                    f"{med['after'] / 1e6:.2f}",
                    f"{med['after'] / med['before']:.3f}",
                    f"{med['archive_s']:.1f}",
                    f"{med['objects'] / 1e6:.2f}",
                    f"{med['live_history']:.2f} -> {med['cold_history']:.2f}",
                    f"{med['live_old']:.2f} -> {med['cold_old']:.2f}",
                    f"{med['live_latest']:.2f} -> {med['cold_latest']:.2f}",
                ]
            )
            if backend == "sqlite":
                notes.append(
                    f"sqlite without VACUUM: pages in use {med['used_before'] / 1e6:.2f}"
                    f" -> {med['used_after'] / 1e6:.2f} MB "
                    f"({med['used_after'] / med['used_before']:.3f}x)"
                )
    print(
        f"{args.threads} {args.workload} threads of {args.saves} saves (a "
        f"{MESSAGE_CHARS}-char message appended each"
        + (", a draft rewritten each" if args.workload == "draft" else "")
        + f"); medians of {args.rounds} rounds, a fresh store "
        f"each; objects in a local folder; reads live -> archived"
    )
    print(table(rows))
    print("\n".join(notes))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--saves", type=int, default=50)
    parser.add_argument("--workload", choices=["chat", "draft"], default="chat")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    backends = ["sqlite"] + (["postgres"] if await postgres_up() else [])
    if args.threads:
        await main_threads(args, backends)
        return
    header = ["store", "before MB", "after MB", "after/before", "archive s"]
    rows = [[*header, "objects MB", "history ms live", "archived"]]
    notes = []
    with TemporaryDirectory() as tmp:
        for backend in backends:
            rounds = []
            for r in range(args.rounds):
                if backend == "sqlite":
                    url = f"sqlite:///{tmp}/{backend}-{r}.db"
                else:
                    url = f"{PG_URL}?schema=bench_{uuid.uuid4().hex[:10]}"
                folder = Path(tmp) / f"objects-{backend}-{r}"
                rounds.append(await measure(url, folder, args.runs))
            med = {k: statistics.median(f[k] for f in rounds) for k in rounds[0]}
            rows.append(
                [
                    backend,
                    f"{med['before'] / 1e6:.2f}",
                    f"{med['after'] / 1e6:.2f}",
                    f"{med['after'] / med['before']:.3f}",
                    f"{med['archive_s']:.1f}",
                    f"{med['objects'] / 1e6:.2f}",
                    f"{med['read_live_ms']:.2f}",
                    f"{med['read_cold_ms']:.2f}",
                ]
            )
            if backend == "sqlite":
                notes.append(
                    f"sqlite without VACUUM: pages in use {med['used_before'] / 1e6:.2f}"
                    f" -> {med['used_after'] / 1e6:.2f} MB "
                    f"({med['used_after'] / med['used_before']:.3f}x)"
                )
    print(
        f"{args.runs} finished runs of {STEPS} steps ({STEP_CHARS} chars of prose and "
        f"token usage each); medians of {args.rounds} rounds, a fresh store each; "
        f"objects in a local folder"
    )
    print(table(rows))
    print("\n".join(notes))


if __name__ == "__main__":
    asyncio.run(main())
