"""@workflow(version=): recorded per run, listed by, claimed by; kept by forks; and
shown by the CLI's runs, show, fork and resume."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from resumable import Engine, step, workflow
from resumable.cli import main
from resumable.stores.protocol import Store

ran: list[str] = []


@step(name="ver.tests.work")
async def work(n: int) -> int:
    ran.append(f"work {n}")
    return n * 10


@workflow(name="ver.tests.job", version="1")
async def job_v1(n: int) -> int:
    return await work(n)


@workflow(name="ver.tests.job", version="2")
async def job_v2(n: int) -> int:
    return await work(n) + 1


@workflow(name="ver.tests.unversioned")
async def unversioned(n: int) -> int:
    return await work(n)


async def test_each_run_records_the_version_it_started_on(engine: Engine) -> None:
    assert await engine.run(job_v2, 1, run_id="two") == 11
    await engine.enqueue(job_v1, 2, run_id="one")
    await engine.run(unversioned, 3, run_id="none")

    assert (await engine.get("two")).version == "2"
    assert (await engine.get("one")).version == "1"
    assert (await engine.get("none")).version is None
    assert [r.run_id for r in await engine.runs(version="1")] == ["one"]
    fork = await engine.fork("two", at_step=1)
    assert (await engine.get(fork)).version == "2"  # replays a version-2 run's steps


async def test_a_worker_claims_only_the_versions_it_is_given(store: Store) -> None:
    engine = Engine(store)
    for n in range(4):
        await engine.enqueue(job_v1 if n % 2 else job_v2, n, run_id=f"r{n}")
    await engine.enqueue(unversioned, 9, run_id="plain")
    worker = engine.worker(versions=["2"], poll_s=0.05)
    stop = asyncio.Event()

    async def until_two_done() -> None:
        while {(await engine.get(f"r{n}")).status for n in (0, 2)} != {"succeeded"}:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)  # room to (wrongly) claim more
        stop.set()

    await asyncio.wait_for(asyncio.gather(worker.run(stop=stop), until_two_done()), 30)
    statuses = {r.run_id: r.status for r in await engine.runs()}
    assert statuses == {
        "r0": "succeeded",
        "r1": "queued",
        "r2": "succeeded",
        "r3": "queued",
        "plain": "queued",
    }


def test_the_cli_lists_by_version_and_resume_and_fork_report_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"

    async def make() -> None:
        async with Engine(url) as engine:
            await engine.run(job_v2, 1, run_id="v2-run")
            await engine.enqueue(job_v1, 2, run_id="v1-run")

    asyncio.run(make())
    assert main(["runs", "--version", "1", "--store", url]) == 0
    out = capsys.readouterr().out
    assert "v1-run" in out
    assert "v2-run" not in out
    assert main(["show", "v2-run", "--store", url]) == 0
    assert "version   2 (the code version it started on)" in capsys.readouterr().out
    assert (
        main(["fork", "v2-run", "--at-step", "1", "--new-id", "f", "--store", url]) == 0
    )
    assert "v2-run started on workflow version 2" in capsys.readouterr().out

    (tmp_path / "ver_cli_app.py").write_text(
        "from resumable import step, workflow\n"
        "@step(name='ver.tests.work')\n"
        "async def work(n: int) -> int:\n"
        "    return n * 10\n"
        "@workflow(name='ver.tests.job', version='2')\n"
        "async def job(n: int) -> int:\n"
        "    return await work(n) + 1\n"
    )
    monkeypatch.chdir(tmp_path)
    assert main(["resume", "v1-run", "--app", "ver_cli_app", "--store", url]) == 0
    out = capsys.readouterr().out
    assert "run v1-run started on workflow version 1" in out
    assert "succeeded: 21" in out  # the registered (version 2) code ran it
    sys.modules.pop("ver_cli_app", None)
