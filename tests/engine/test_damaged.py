"""A damaged checkpoint stops a resume with CorruptCheckpointError, never poisons the run."""

from __future__ import annotations

import sqlite3
import tracemalloc
from pathlib import Path

import pytest

from resumable import CorruptCheckpointError, Engine, WorkflowFailed, step, workflow
from resumable.testing import decompression_bomb, plain_frame

CALLS: list[str] = []


@step
async def fetch(i: int) -> str:
    CALLS.append(f"fetch {i}")
    return f"document {i} " * 200


@workflow
async def digest() -> int:
    total = 0
    for i in range(3):
        total += len(await fetch(i))
    return total


@pytest.mark.parametrize("declares_size", [True, False], ids=["declared", "unstated"])
async def test_a_bomb_in_a_step_is_corrupt_retryable_and_bounded(
    tmp_path: Path, declares_size: bool
) -> None:
    pytest.importorskip("zstandard")
    db = tmp_path / "state.db"
    url = f"sqlite:///{db}"
    async with Engine(url) as engine:
        expected = await engine.run(digest, run_id="d1")
    with sqlite3.connect(db) as conn:
        (original,) = conn.execute(
            "SELECT output FROM resumable_steps WHERE run_id = 'd1' AND seq = 2"
        ).fetchone()
        conn.execute(
            "UPDATE resumable_steps SET output = ? WHERE run_id = 'd1' AND seq = 2",
            (
                plain_frame(
                    decompression_bomb(declares_size=declares_size), compressed=True
                ),
            ),
        )
        # the run must replay its steps (not return its recorded result)
        conn.execute("UPDATE resumable_runs SET status = 'running' WHERE run_id = 'd1'")
    CALLS.clear()
    tracemalloc.start()
    try:
        async with Engine(url, max_payload_bytes=1 << 20) as engine:
            with pytest.raises(CorruptCheckpointError) as caught:
                await engine.run(digest, run_id="d1")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20  # the bomb holds 1 GiB
    assert "'d1'" in caught.value.place
    assert "#2" in caught.value.place
    assert not isinstance(caught.value, WorkflowFailed)
    assert CALLS == []  # nothing ran again
    # repaired, the same run continues: the damage was not recorded as its failure
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE resumable_steps SET output = ? WHERE run_id = 'd1' AND seq = 2",
            (original,),
        )
    async with Engine(url) as engine:
        assert await engine.run(digest, run_id="d1") == expected
    assert CALLS == []
