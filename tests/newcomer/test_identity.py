"""A workflow in a script is found by `--app` however the script was started.

`python agent.py` runs the module as `__main__`; its runs must still resume from
`resumable resume RUN --app agent` and a `resumable worker --app agent`, and runs
an older version recorded as `__main__:research` must too.
"""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import subprocess
from pathlib import Path

from newcomer.as_a_user import (
    COMMAND,
    ok,
    poll,
    python,
    readme_block,
    resumable,
    user_env,
)

AGENT = """
import asyncio, os, signal, sys
from pathlib import Path
from resumable import Engine, step, workflow

LOG = Path("calls.log")

@step
async def search(topic: str) -> str:
    with LOG.open("a") as log:
        log.write(f"search {topic}\\n")
    return f"notes on {topic}"

@step
async def write(notes: str) -> str:
    with LOG.open("a") as log:
        log.write("write\\n")
    if os.environ.get("CRASH") == "1":
        os.kill(os.getpid(), signal.SIGKILL)
    return notes.upper()

@workflow
async def research(topic: str) -> str:
    return await write(await search(topic))

if __name__ == "__main__":
    print(asyncio.run(Engine().run(research, sys.argv[1], run_id=sys.argv[2])))
"""


def _crashed_script(folder: Path, run_id: str, *, how: str = "script") -> None:
    (folder / "agent.py").write_text(AGENT)
    argv = ["agent.py"]
    if how == "-c":  # how an older version saw it: workflows named `__main__:...`
        argv = ["-c", "exec(compile(open('agent.py').read(), 'agent.py', 'exec'))"]
    died = python(folder, *argv, "llm", run_id, env=user_env(CRASH="1"))
    assert died.returncode == -signal.SIGKILL, died.stderr


def _column(folder: Path, run_id: str, column: str) -> str | None:
    """A run's column, read straight from the default store (no process to start)."""
    assert column in {"status", "workflow"}
    with contextlib.closing(sqlite3.connect(folder / ".resumable" / "state.db")) as db:
        row = db.execute(
            f"SELECT {column} FROM resumable_runs WHERE run_id = ?",  # noqa: S608 - a pinned column
            (run_id,),
        ).fetchone()
    return None if row is None else str(row[0])


def test_a_script_killed_mid_run_resumes_from_the_cli_by_its_module_name(
    tmp_path: Path,
) -> None:
    _crashed_script(tmp_path, "r-1")
    assert _column(tmp_path, "r-1", "workflow") == "agent:research"
    out = ok(resumable(tmp_path, "resume", "r-1", "--app", "agent"))
    assert "succeeded: 'NOTES ON LLM'" in out
    # the finished step replayed; only the one in flight ran again
    assert (tmp_path / "calls.log").read_text().splitlines() == [
        "search llm",
        "write",
        "write",
    ]


def test_a_worker_given_the_script_as_app_finishes_its_crashed_run(
    tmp_path: Path,
) -> None:
    _crashed_script(tmp_path, "r-2")
    worker = subprocess.Popen(
        [str(COMMAND), "worker", "--app", "agent"],
        cwd=tmp_path,
        env=user_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        poll(
            lambda: _column(tmp_path, "r-2", "status") == "succeeded",
            what="r-2 succeeding",
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=30)
    assert "not registered" not in err


def test_a_run_recorded_as_main_by_an_older_version_still_resumes(
    tmp_path: Path,
) -> None:
    _crashed_script(tmp_path, "r-3", how="-c")
    assert _column(tmp_path, "r-3", "workflow") == "__main__:research"
    out = ok(resumable(tmp_path, "resume", "r-3", "--app", "agent"))
    assert "succeeded: 'NOTES ON LLM'" in out
    # and the script itself, now `agent:research`, takes it as its own run
    again = ok(python(tmp_path, "agent.py", "llm", "r-3"))
    assert again.strip() == "NOTES ON LLM"


def test_the_readme_example_run_as_a_script_is_resumable_from_the_cli(
    tmp_path: Path,
) -> None:
    (tmp_path / "analyze.py").write_text(readme_block(0))
    ok(python(tmp_path, "analyze.py"))
    assert _column(tmp_path, "batch-2026-11-22", "workflow") == "analyze:analyze"
    out = ok(resumable(tmp_path, "resume", "batch-2026-11-22", "--app", "analyze"))
    assert "succeeded: 'doc one\\ndoc two'" in out


TEAM = """
import asyncio, os, signal, sys
from pathlib import Path
from resumable import Engine, step, workflow

LOG = Path("calls.log")

@step
async def note(what: str) -> str:
    with LOG.open("a") as log:
        log.write(what + "\\n")
    if what == "publish" and os.environ.get("CRASH") == "1":
        os.kill(os.getpid(), signal.SIGKILL)
    return what

@workflow
async def researcher(topic: str) -> str:
    return await note(f"research {topic}")

@workflow
async def lead(topic: str) -> str:
    found = await researcher(topic)
    return await note("publish") + ": " + found

if __name__ == "__main__":
    print(asyncio.run(Engine().run(lead, sys.argv[1], run_id=sys.argv[2])))
"""


def test_a_child_run_recorded_as_main_by_an_older_version_replays_in_its_parent(
    tmp_path: Path,
) -> None:
    # the parent journaled its child as `child:__main__:researcher`, then died
    (tmp_path / "team.py").write_text(TEAM)
    older = ["-c", "exec(compile(open('team.py').read(), 'team.py', 'exec'))"]
    died = python(tmp_path, *older, "llm", "t-1", env=user_env(CRASH="1"))
    assert died.returncode == -signal.SIGKILL, died.stderr
    assert _column(tmp_path, "t-1", "workflow") == "__main__:lead"
    # `check` replays the same decision: the renamed child is no divergence
    assert "OK: no run would break" in ok(resumable(tmp_path, "check", "--app", "team"))
    out = ok(resumable(tmp_path, "resume", "t-1", "--app", "team"))
    assert "succeeded: 'publish: research llm'" in out
    # the child was not run again: only the step in flight at the crash was
    assert (tmp_path / "calls.log").read_text().splitlines() == [
        "research llm",
        "publish",
        "publish",
    ]
