"""Snapshot storage growth: a 200-turn conversation, one 500-byte message per turn,
saved after every turn. Prints the bytes written, the SQLite file's growth, the time
a save takes and the time to load the latest snapshot, next to a whole-state-per-save
baseline measured in the same run (what a checkpointer that rewrites the state each
time stores).
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _common import prose, table

from resumable import Engine
from resumable._engine.snapshots import Snapshots
from resumable.serde import Serde
from resumable.stores.protocol import NO_CHUNKS, Store
from resumable.stores.sqlite import SQLiteStore

TURNS = 200
MESSAGE_BYTES = 500


def message(turn: int, rng: random.Random) -> dict[str, str]:
    text = prose(rng, MESSAGE_BYTES)
    return {"role": "user" if turn % 2 == 0 else "assistant", "content": text}


class CountingStore(SQLiteStore):
    """SQLiteStore that counts the bytes handed to it for snapshots."""

    written = 0

    async def save_snapshot(
        self, snapshot: Any, *, chunks: Mapping[str, bytes] = NO_CHUNKS
    ) -> None:
        self.written += sum(len(k) + len(v) for k, v in chunks.items())
        self.written += (
            len(snapshot.manifest)
            + len(snapshot.thread_id)
            + len(snapshot.checkpoint_id)
            + len(snapshot.parent_id or "")
            + sum(len(ref) for ref in snapshot.chunk_refs)
            + 8
        )
        await super().save_snapshot(snapshot, chunks=chunks)


def file_bytes(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        (free,) = conn.execute("PRAGMA freelist_count").fetchone()
        (size,) = conn.execute("PRAGMA page_size").fetchone()
    return int((pages - free) * size)


async def resumable_run(
    directory: Path,
) -> tuple[int, int, int, list[float], list[float]]:
    path = directory / "snapshots.db"
    store = CountingStore(f"sqlite:///{path}")
    engine = Engine(store)
    await store.open()
    empty = file_bytes(path)
    rng = random.Random(7)
    messages: list[dict[str, str]] = []
    content = 0
    saves = []
    for turn in range(TURNS):
        messages.append(message(turn, rng))
        content += len(messages[-1]["content"])
        start = time.perf_counter()
        await engine.save_state("conversation", {"messages": messages})
        saves.append((time.perf_counter() - start) * 1000)
    loads = []
    for _ in range(15):
        fresh = Engine(store)  # no cached shapes: a cold load, as after a restart
        start = time.perf_counter()
        loaded = await fresh.load_state("conversation")
        loads.append((time.perf_counter() - start) * 1000)
        assert loaded == {"messages": messages}
    await engine.close()
    return content, store.written, file_bytes(path) - empty, saves, loads


async def memo_against_plain(directory: Path) -> dict[bool, list[float]]:
    """Save times (ms) of the conversation with the leaf memo on and off.

    The memo is a fast path (`SnapshotCodec(memo=True)`, what an Engine uses) beside
    the plain path that encodes every leaf at every save; it stays only while it
    wins. The two save the same turns in turn, each to its own SQLite file.
    """
    paths: dict[bool, Snapshots] = {}
    for memo in (True, False):
        store = SQLiteStore(f"sqlite:///{directory / f'memo-{memo}.db'}")
        await store.open()
        paths[memo] = Snapshots(store, Serde(), memo=memo)
    parents: dict[bool, str | None] = dict.fromkeys(paths)
    times: dict[bool, list[float]] = {memo: [] for memo in paths}
    rng = random.Random(7)
    messages: list[dict[str, str]] = []
    for turn in range(TURNS):
        messages.append(message(turn, rng))
        for memo, snapshots in paths.items():
            start = time.perf_counter()
            record = await snapshots.save(
                "conversation",
                {"messages": messages},
                now_ms=turn,
                parent_id=parents[memo],
            )
            times[memo].append((time.perf_counter() - start) * 1000)
            parents[memo] = record.checkpoint_id
    for snapshots in paths.values():
        assert isinstance(snapshots.store, Store)  # every built-in store is a full one
        await snapshots.store.close()
    return times


def whole_state_baseline(directory: Path) -> tuple[int, int]:
    """Rewrite the whole state as JSON at every save (one row per checkpoint)."""
    path = directory / "baseline.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE checkpoints (thread TEXT, id INTEGER, state BLOB)")
    empty = file_bytes(path)
    rng = random.Random(7)
    messages: list[dict[str, str]] = []
    written = 0
    for turn in range(TURNS):
        messages.append(message(turn, rng))
        blob = json.dumps({"messages": messages}).encode()
        written += len(blob)
        conn.execute(
            "INSERT INTO checkpoints VALUES (?, ?, ?)", ("conversation", turn, blob)
        )
    conn.close()
    return written, file_bytes(path) - empty


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        content, written, grown, saves, loads = await resumable_run(Path(tmp))
        base_written, base_grown = whole_state_baseline(Path(tmp))
        paths = await memo_against_plain(Path(tmp))
    kb = 1024
    rows: list[tuple[str, ...]] = [
        ("saver", "bytes written", "file growth", "x new content (written)"),
        (
            "resumable (content-addressed)",
            f"{written / kb:.0f} KB",
            f"{grown / kb:.0f} KB",
            f"{written / content:.2f}x",
        ),
        (
            "whole state per save",
            f"{base_written / kb:.0f} KB",
            f"{base_grown / kb:.0f} KB",
            f"{base_written / content:.2f}x",
        ),
    ]
    print(
        f"{TURNS} turns, one {MESSAGE_BYTES}-byte message per turn: {content / kb:.0f} KB of new content"
    )
    print(table(rows))
    print(
        f"save (warm engine): median {statistics.median(saves):.2f} ms, "
        f"last {TURNS // 10} saves median {statistics.median(saves[-TURNS // 10 :]):.2f} ms"
    )
    on, off = (statistics.median(paths[memo]) for memo in (True, False))
    print(
        f"save, leaf memo on / off (the plain path): median {on:.2f} / {off:.2f} ms, "
        f"off / on {off / on:.2f}x"
    )
    print(
        f"load latest (cold engine): median {statistics.median(loads):.2f} ms, "
        f"max {max(loads):.2f} ms over {len(loads)} loads (target < 5 ms)"
    )


if __name__ == "__main__":
    asyncio.run(main())
