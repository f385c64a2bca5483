"""Stores written by an earlier resumable open, replay and resume with today's code.

`stored_data/<commit>/` holds a SQLite file, a pg_dump and a Redis key dump that
`stored_data/make.py` wrote with the resumable of that commit (the workload is in
`stored_data/flows.py`). Each is loaded afresh, then driven through the public API:
finished runs replay without running a step, a waiting run takes its input and
finishes, a failed run retries only its failed step, the ledger and the saved states read back, and
a fork of a stored run runs with today's code.
"""

from __future__ import annotations

import base64
import json
import shutil
import uuid
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from stored_data.flows import CALLS, DOCS, STAMP, failing, finished

from conftest import service_url
from resumable import Engine, WorkflowFailed

STORED = Path(__file__).parent / "stored_data"
WRITTEN_BY = sorted(p.name for p in STORED.iterdir() if (p / "version.txt").exists())
BACKENDS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]


def load_sqlite(written: Path, tmp_path: Path) -> str:
    shutil.copy(written / "sqlite.db", tmp_path / "state.db")
    return f"sqlite:///{tmp_path / 'state.db'}"


def load_postgres(written: Path, schema: str) -> str:
    import psycopg

    url = service_url("postgres")
    # the dump's psql meta-commands (\restrict) are not SQL
    script = "\n".join(
        line
        for line in (written / "postgres.sql").read_text().splitlines()
        if not line.startswith("\\")
    ).replace("resumable_stored", schema)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(script.encode())
    return f"{url}?schema={schema}"


def raw(text: str) -> bytes:
    return base64.b64decode(text)


def load_redis(written: Path, prefix: str) -> str:
    import redis

    url = service_url("redis")
    old = b"{resumable_stored:}"
    with redis.Redis.from_url(url) as client:
        for key_text, entry in json.loads((written / "redis.json").read_text()).items():
            key = raw(key_text)
            assert key.startswith(old), key
            key = b"{" + prefix.encode() + b"}" + key[len(old) :]
            value: Any = entry["value"]
            if entry["type"] == "string":
                client.set(key, raw(value))
            elif entry["type"] == "hash":
                client.hset(key, mapping={raw(k): raw(v) for k, v in value.items()})
            elif entry["type"] == "zset":
                client.zadd(key, {raw(member): score for member, score in value})
            elif entry["type"] == "set":
                client.sadd(key, *(raw(member) for member in value))
            else:
                client.rpush(key, *(raw(member) for member in value))
    return f"{url}?prefix={prefix}"


async def drop(url: str) -> None:
    async with Engine(url) as engine:
        dropping = getattr(engine.store, "drop", None)
        if dropping is not None:
            await dropping()


@pytest.fixture(params=WRITTEN_BY)
def written(request: pytest.FixtureRequest) -> Path:
    return STORED / str(request.param)


@pytest.fixture(params=BACKENDS)
async def engine(
    request: pytest.FixtureRequest, written: Path, tmp_path: Path
) -> AsyncIterator[Engine]:
    isolate = f"t{uuid.uuid4().hex[:12]}"
    if request.param == "sqlite":
        url = load_sqlite(written, tmp_path)
    elif request.param == "postgres":
        url = load_postgres(written, isolate)
    else:
        url = load_redis(written, f"{isolate}:")
    CALLS.clear()
    try:
        async with Engine(url) as opened:
            yield opened
    finally:
        if request.param != "sqlite":
            await drop(url)


def test_there_is_data_written_by_an_earlier_version() -> None:
    assert WRITTEN_BY, "stored_data/ holds no store; run stored_data/make.py"


async def test_runs_listed_as_they_were_left(engine: Engine) -> None:
    statuses = {run.run_id: run.status for run in await engine.runs()}
    assert statuses == {
        "finished-1": "succeeded",
        "waiting-1": "waiting",
        "failed-1": "failed",
    }


async def test_a_finished_run_replays_its_result_without_running_a_step(
    engine: Engine,
) -> None:
    result = await engine.run(finished, DOCS, run_id="finished-1")
    assert result == {
        "items": [
            {"doc": doc, "at": STAMP, "score": Decimal("1.5"), "raw": doc.encode()}
            for doc in DOCS
        ],
        "shouted": [doc.upper() for doc in DOCS],
    }
    assert CALLS == {}
    history = await engine.history("finished-1")
    assert [view.name for view in history].count("fetch") == 3
    ledger = await engine.ledger("finished-1")
    assert (ledger.incurred.input_tokens, ledger.incurred.output_tokens) == (300, 60)


async def test_a_waiting_run_takes_its_input_and_finishes(engine: Engine) -> None:
    await engine.send("waiting-1", "approval", True)
    assert await engine.resume("waiting-1") == ["delta", True]
    assert CALLS == {}


async def test_a_failed_run_retries_only_its_failed_step(engine: Engine) -> None:
    with pytest.raises(WorkflowFailed):
        await engine.run(failing, "omega", run_id="failed-1")
    assert CALLS == {"explode": 1}  # a fresh retry budget; `fetch` replays


async def test_saved_states_read_back_with_their_history(engine: Engine) -> None:
    assert await engine.load_state("thread-1") == {"turn": 2}
    history = await engine.state_history("thread-1")
    assert len(history) == 3


async def test_a_fork_of_a_stored_run_runs_with_todays_code(engine: Engine) -> None:
    fork = await engine.fork("finished-1", at_step=1)
    result = await engine.resume(fork)
    assert result["shouted"] == [doc.upper() for doc in DOCS]
    assert CALLS == {"fetch": 2, "shout": 3}
