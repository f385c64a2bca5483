from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path

import pytest

from resumable import Engine, step, workflow
from resumable.cli import main


class Crash(BaseException):
    pass


@step
async def shout(word: str) -> str:
    return word.upper()


@workflow(name="tests.cli.greet")
async def greet(word: str) -> str:
    return await shout(word) + "!"


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cli.db'}"


async def test_runs_and_show_print_tables(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with Engine(url) as engine:
        await engine.run(greet, "hi", run_id="r-1")
    assert await main_async(["runs", "--store", url]) == 0
    out = capsys.readouterr().out
    assert "r-1" in out
    assert "tests.cli.greet" in out
    assert "succeeded" in out
    assert await main_async(["show", "r-1", "--store", url]) == 0
    out = capsys.readouterr().out
    assert "shout" in out
    assert '"HI"' in out  # the generic view: JSON text, no app code needed
    assert await main_async(["runs", "--status", "failed", "--store", url]) == 0
    assert "no runs" in capsys.readouterr().out


async def main_async(argv: list[str]) -> int:
    return await asyncio.to_thread(main, argv)


async def create_store_at(url: str) -> None:
    async with Engine(url) as engine:
        await engine.count_runs()


@pytest.mark.parametrize(
    ("argv", "message", "status"),
    [
        (["show", "missing"], "does not exist", 1),
        (["cancel", "missing"], "does not exist", 1),
        (["runs", "--store", "ftp://nowhere"], "unknown scheme", 1),
        (["resume", "x", "--app", "no_such_module_here"], "cannot import --app", 2),
    ],
)
def test_bad_input_is_one_line_and_a_nonzero_exit(
    argv: list[str],
    message: str,
    status: int,
    url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if "--store" not in argv:
        argv = [*argv, "--store", url]
    asyncio.run(create_store_at(url))  # `show` reads a store that is there
    assert main(argv) == status
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_an_unreadable_store_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    garbage = tmp_path / "not-a-db.db"
    garbage.write_bytes(b"this is not sqlite" * 100)
    assert main(["runs", "--store", f"sqlite:///{garbage}"]) == 1
    err = capsys.readouterr().err
    assert "cannot open" in err
    assert len(err.strip().splitlines()) == 1


def test_resume_imports_the_app_and_finishes_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    app = tmp_path / "cli_app_module.py"
    app.write_text(
        textwrap.dedent(
            """
            from resumable import step, workflow

            CRASH = [True]

            class Crash(BaseException):
                pass

            @step
            async def add(a: int, b: int) -> int:
                if CRASH[0]:
                    raise Crash
                return a + b

            @workflow(name="tests.cli.sum")
            async def total(a: int, b: int) -> int:
                return await add(a, b)
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    module = importlib.import_module("cli_app_module")
    url = f"sqlite:///{tmp_path / 'resume.db'}"
    engine = Engine(url)
    with pytest.raises(module.Crash):
        engine.run_sync(module.total, 2, 3, run_id="to-resume")
    module.CRASH[0] = False
    assert main(["resume", "to-resume", "--app", "cli_app_module", "--store", url]) == 0
    assert "succeeded: 5" in capsys.readouterr().out
    assert main(["cancel", "to-resume", "--store", url]) == 0
    assert "already ended: succeeded" in capsys.readouterr().out
    sys.modules.pop("cli_app_module", None)


def test_cancel_a_waiting_run(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    async def create() -> None:
        async with Engine(url) as engine:
            # a run recorded but never executed
            await engine.enqueue(greet, "x", run_id="queued-1")

    asyncio.run(create())
    assert main(["cancel", "queued-1", "--store", url]) == 0
    assert "cancelled" in capsys.readouterr().out


def test_send_fork_and_show_lineage(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    from resumable import wait_for

    @workflow(name="tests.cli.approve")
    async def approve() -> str:
        return f"approved={await wait_for('ok')}"

    async def start() -> None:
        async with Engine(url) as engine:
            await engine.start(approve, run_id="w-1")
            while (await engine.get("w-1")).status != "waiting":
                await asyncio.sleep(0.01)

    asyncio.run(start())
    assert main(["send", "w-1", "ok", "true", "--store", url]) == 0
    assert "sent 'ok'" in capsys.readouterr().out
    assert main(["send", "w-1", "ok", "not json", "--store", url]) == 2
    assert "must be JSON" in capsys.readouterr().err

    async def finish() -> str:
        async with Engine(url) as engine:
            return str(await engine.resume("w-1"))

    assert asyncio.run(finish()) == "approved=True"
    assert (
        main(["fork", "w-1", "--at-step", "0", "--new-id", "w-2", "--store", url]) == 0
    )
    assert "forked from w-1" in capsys.readouterr().out
    assert main(["show", "w-1", "--store", url]) == 0
    assert "fork      w-2 (at step 0)" in capsys.readouterr().out
    assert main(["show", "w-2", "--store", url]) == 0
    assert "forked    from w-1 at step 0" in capsys.readouterr().out


def test_gc_dry_run_and_delete(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    async def make() -> None:
        async with Engine(url) as engine:
            await engine.run(greet, "a", run_id="gc-1")

    asyncio.run(make())
    assert main(["gc", "--older-than", "0s", "--dry-run", "--store", url]) == 0
    assert "would delete 1 run\n" in capsys.readouterr().out
    assert main(["gc", "--older-than", "0s", "--store", url]) == 0
    assert "deleted 1 run, 1 step," in capsys.readouterr().out
    assert main(["gc", "--older-than", "soon", "--store", url]) == 2
    assert "use a number and a unit" in capsys.readouterr().err


def test_rekey_command(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio
    import base64

    async def make() -> None:
        async with Engine(url) as engine:
            await engine.run(greet, "x", run_id="k-1")

    asyncio.run(make())
    assert main(["rekey", "--store", url]) == 2
    assert "needs encryption keys" in capsys.readouterr().err
    monkeypatch.setenv(
        "RESUMABLE_ENCRYPTION_KEY", "k2:" + base64.b64encode(bytes(32)).decode()
    )
    assert main(["rekey", "--dry-run", "--store", url]) == 0
    assert "would re-encrypt" in capsys.readouterr().out
    assert main(["rekey", "--store", url]) == 0
    out = capsys.readouterr().out
    assert "re-encrypted" in out
    assert "step.output" in out
    assert main(["show", "k-1", "--store", url]) == 0  # readable under the new key
    assert '"X"' in capsys.readouterr().out
