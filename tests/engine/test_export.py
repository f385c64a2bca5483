"""Engine.export and `resumable export`: one record per step, checked against the ledger."""

from __future__ import annotations

import importlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletion

from resumable import Engine, Retry, map_steps, step, workflow
from resumable.cli import main
from resumable.cli.export import parse_since, write_jsonl, write_parquet
from resumable.errors import RunNotFound
from resumable.pricing import Price, PriceTable
from resumable.simulator import Fault, FaultPlan, SimulatedProvider
from resumable.stores.protocol import Payload, Store

PRICES = PriceTable({"sim-model": Price(input_per_mtok=1.0, output_per_mtok=4.0)})
TOKEN_FIELDS = (
    "calls",
    "input_tokens",
    "cached_input_tokens",
    "cache_write_tokens",
    "output_tokens",
    "unpriced_calls",
    "unmetered_calls",
)


class Crash(BaseException):
    pass


@dataclass(frozen=True)
class Receipt:
    doc: str
    raw: bytes
    at: datetime


CRASH = {"at": ""}
CLIENT: list[openai.AsyncOpenAI] = []


@step(
    name="tests.export.ask",
    retry=Retry(attempts=3, initial_delay=0.01, on=(openai.RateLimitError,)),
)
async def ask(doc: str) -> ChatCompletion:
    if doc == CRASH["at"]:
        raise Crash  # the process dies before this call
    return await CLIENT[0].chat.completions.create(
        model="sim-model", messages=[{"role": "user", "content": f"summarize {doc}"}]
    )


@step(name="tests.export.file")
async def file(doc: str) -> Receipt:
    return Receipt(doc, doc.encode() * 10, datetime(2026, 11, 25, tzinfo=UTC))


@step(name="tests.export.check")
async def check(doc: str) -> None:
    raise ValueError(f"{doc} is not allowed")


@workflow(name="tests.export.digest")
async def digest(docs: list[str]) -> int:
    answers = await map_steps(ask, docs, key=lambda d: d)
    for doc in docs:
        await file(doc)
    return len(answers)


@workflow(name="tests.export.strict")
async def strict(doc: str) -> None:
    await ask(doc)
    await check(doc)


@pytest.fixture
def provider() -> Iterator[SimulatedProvider]:
    # the first request is refused once (429): that step records two attempts
    plan = FaultPlan(schedule={1: Fault(kind="rate_limit", retry_after_ms=1)})
    with SimulatedProvider(faults=plan) as provider:
        yield provider


async def make_runs(engine: Engine, provider: SimulatedProvider) -> None:
    """A crashed-and-resumed run, a clean one, a failed one and a fork."""
    # the SDK's own retries are off: resumable's Retry is the one policy
    client = openai.AsyncOpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    )
    CLIENT[:] = [client]
    try:
        CRASH["at"] = "b"
        with pytest.raises(Crash):
            await engine.run(digest, ["a", "b", "c"], run_id="d-1")
        CRASH["at"] = ""
        assert await engine.run(digest, ["a", "b", "c"], run_id="d-1") == 3
        assert await engine.run(digest, ["x"], run_id="d-2") == 1
        with pytest.raises(Exception, match="not allowed"):
            await engine.run(strict, "z", run_id="s-1")
        await engine.fork("s-1", at_step=1, run_id="s-1-fork")
    finally:
        CLIENT.clear()
        await client.close()


async def collect(engine: Engine, *args: Any, **kwargs: Any) -> list[Any]:
    return [record async for record in engine.export(*args, **kwargs)]


async def test_export_has_one_record_per_step_and_the_ledgers_sums(
    store: Store, provider: SimulatedProvider
) -> None:
    engine = Engine(store, prices=PRICES)
    await make_runs(engine, provider)
    records = await collect(engine)
    runs = ["d-1", "d-2", "s-1", "s-1-fork"]  # oldest first
    assert list(dict.fromkeys(r.run_id for r in records)) == runs
    for run_id in runs:
        mine = [r for r in records if r.run_id == run_id]
        history = await engine.history(run_id)
        assert [(r.seq, r.step, r.status, r.attempts) for r in mine] == [
            (s.seq, s.name, s.status, s.attempts) for s in history
        ]
        assert [r.args_fingerprint for r in mine] == [s.fingerprint for s in history]
        ledger = await engine.ledger(run_id)
        own = [r for r in mine if r.inherited_from is None]
        for name in TOKEN_FIELDS:
            assert sum(getattr(r, name) for r in own) == getattr(ledger.incurred, name)
        assert sum(r.cost_usd for r in own) == pytest.approx(ledger.incurred.cost_usd)
    assert sum(r.calls for r in records if r.inherited_from is None) == len(
        [e for e in provider.requests() if e.status == 200]
    )

    by_step = {(r.run_id, r.step, r.item_key or str(r.seq)): r for r in records}
    first = next(r for r in records if r.run_id == "d-1" and r.attempts == 2)
    assert first.step == "tests.export.ask"  # the 429 was retried within the step
    # a map_steps item: its map call's number and the key the workflow gave it
    assert (first.seq, first.item_key) in {(1, "a"), (1, "b"), (1, "c")}
    answer = first.result
    assert answer["$type"] == "openai.types.chat.chat_completion:ChatCompletion"
    assert answer["choices"][0]["message"]["content"]
    assert first.models == ("sim-model",)
    assert first.cost_usd > 0
    receipt = next(
        r.result for k, r in by_step.items() if k[:2] == ("d-1", "tests.export.file")
    )
    assert receipt == {
        "$type": f"{__name__}:Receipt",
        "doc": "a",
        "raw": {"$type": "bytes", "$size": 10, "$head": (b"a" * 10).hex()},
        "at": "2026-11-25T00:00:00+00:00",
    }
    failed = by_step[("s-1", "tests.export.check", "2")]
    assert failed.status == "failed"
    assert failed.result is None
    assert "not allowed" in json.dumps(failed.error)
    # a fork's shared step is its parent's spend: marked, and not in its ledger
    inherited = [r for r in records if r.run_id == "s-1-fork"]
    assert [(r.inherited_from, r.calls) for r in inherited] == [("s-1", 1)]
    assert (await engine.ledger("s-1-fork")).incurred.calls == 0
    assert all(r.unreadable == () for r in records)


async def test_export_filters_by_run_workflow_status_and_time(
    store: Store, provider: SimulatedProvider
) -> None:
    engine = Engine(store, prices=PRICES)
    await make_runs(engine, provider)

    async def runs_of(*args: Any, **kwargs: Any) -> list[str]:
        return list(
            dict.fromkeys(r.run_id for r in await collect(engine, *args, **kwargs))
        )

    assert await runs_of(["s-1", "d-2"]) == ["s-1", "d-2"]
    assert await runs_of(workflow="tests.export.strict") == ["s-1", "s-1-fork"]
    assert await runs_of(status="failed") == ["s-1"]
    assert await runs_of(status=["succeeded", "failed"]) == ["d-1", "d-2", "s-1"]
    assert await runs_of(["d-1", "s-1"], status="failed") == ["s-1"]
    assert await runs_of(since=timedelta(hours=1)) == ["d-1", "d-2", "s-1", "s-1-fork"]
    assert await runs_of(since=datetime.now(UTC) + timedelta(hours=1)) == []
    with pytest.raises(RunNotFound):
        await collect(engine, ["nope"])
    with_input = await collect(engine, ["d-2"], run_input=True)
    assert with_input[0].run_input == {
        "$type": "tuple",
        "$items": [{"$type": "tuple", "$items": [["x"]]}, {}],
    }


async def test_jsonl_and_parquet_load_back_with_the_ledgers_counts_and_sums(
    store: Store, provider: SimulatedProvider, tmp_path: Path
) -> None:
    engine = Engine(store, prices=PRICES)
    await make_runs(engine, provider)
    buffer = io.BytesIO()
    written = await write_jsonl(engine.export(), buffer)
    lines = [
        json.loads(line) for line in buffer.getvalue().decode("utf-8").splitlines()
    ]
    assert (
        written
        == len(lines)
        == sum(
            [
                len(await engine.history(run))
                for run in ("d-1", "d-2", "s-1", "s-1-fork")
            ]
        )
    )

    pq = importlib.import_module("pyarrow.parquet")
    path = tmp_path / "steps.parquet"
    assert await write_parquet(engine.export(), path) == written
    table = pq.read_table(path)
    assert table.num_rows == written
    rows: list[dict[str, Any]] = table.to_pylist()
    for run_id in ("d-1", "d-2", "s-1"):
        ledger = await engine.ledger(run_id)
        for loaded in (lines, rows):
            own = [
                r for r in loaded if r["run_id"] == run_id and not r["inherited_from"]
            ]
            for name in TOKEN_FIELDS:
                assert sum(r[name] for r in own) == getattr(ledger.incurred, name)
            assert sum(r["cost_usd"] for r in own) == pytest.approx(
                ledger.incurred.cost_usd
            )
    # the same records in both, the views as JSON text in Parquet
    assert [json.loads(r["result"]) if r["result"] else None for r in rows] == [
        line["result"] for line in lines
    ]
    assert [r["started_at"] for r in rows] == [
        datetime.fromisoformat(line["started_at"]) for line in lines
    ]
    asked = [i for i, line in enumerate(lines) if line["step"] == "tests.export.ask"]
    assert asked
    assert all(rows[i]["models"] == lines[i]["models"] == ["sim-model"] for i in asked)
    assert all(rows[i]["calls"] == lines[i]["calls"] == 1 for i in asked)


async def test_a_damaged_value_is_marked_and_the_export_goes_on(
    store: Store, provider: SimulatedProvider
) -> None:
    engine = Engine(store, prices=PRICES)
    await make_runs(engine, provider)
    journal = await store.load_journal("d-1")
    victim = next(r for r in journal if r.name == "tests.export.file")
    assert victim.output is not None
    damaged = bytearray(victim.output)
    damaged[-1] ^= 0xFF  # a flipped bit, as a failing disk or an attacker leaves it
    payload = Payload(
        kind="step.output",
        key=(victim.run_id, victim.seq, victim.name),
        data=victim.output,
    )
    assert await store.replace_payload(payload, data=bytes(damaged))
    records = await collect(engine, ["d-1"])
    assert len(records) == len(await engine.history("d-1"))
    bad = next(r for r in records if r.step == "tests.export.file")
    assert bad.result is None
    assert "corrupt" in bad.unreadable[0]
    assert "tests.export.file" in bad.unreadable[0]
    good = next(r for r in records if r.step == "tests.export.ask")
    assert good.unreadable == ()
    assert good.result is not None
    assert sum(r.unreadable != () for r in records) == 1


def test_the_command_writes_jsonl_and_parquet(
    tmp_path: Path, provider: SimulatedProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    url = f"sqlite:///{tmp_path / 'export.db'}"

    async def make() -> None:
        async with Engine(url, prices=PRICES) as engine:
            await make_runs(engine, provider)

    asyncio.run(make())
    out = tmp_path / "steps.jsonl"
    assert (
        main(
            [
                "export",
                "--store",
                url,
                "--workflow",
                "tests.export.digest",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    lines = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    assert {line["run_id"] for line in lines} == {"d-1", "d-2"}
    assert f"exported {len(lines)} steps" in capsys.readouterr().err
    assert main(["export", "s-1", "--store", url]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["step"] for line in printed] == [
        "tests.export.ask",
        "tests.export.check",
    ]
    parquet = tmp_path / "steps.parquet"
    argv = [
        "export",
        "--store",
        url,
        "--since",
        "1d",
        "--format",
        "parquet",
        "-o",
        str(parquet),
    ]
    assert main(argv) == 0
    pq = importlib.import_module("pyarrow.parquet")
    assert pq.read_table(parquet).num_rows == sum(1 for _ in asyncio.run(_count(url)))
    assert main(["export", "--store", url, "--format", "parquet"]) == 2
    assert "--output" in capsys.readouterr().err
    assert main(["export", "nope", "--store", url]) == 1
    assert "does not exist" in capsys.readouterr().err


async def _count(url: str) -> list[Any]:
    async with Engine(url) as engine:
        return await collect(engine)


def test_since_takes_durations_and_dates() -> None:
    assert parse_since("7d") == timedelta(days=7)
    assert parse_since("12h") == timedelta(hours=12)
    assert parse_since("2w") == timedelta(weeks=2)
    assert parse_since("2026-11-01") == datetime(2026, 11, 1, tzinfo=UTC)
    with pytest.raises(Exception, match="neither a duration"):
        parse_since("last tuesday")
