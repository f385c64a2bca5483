"""Every program in examples/ runs as a user runs it, and says what it did.

Each example runs in subprocesses (killed with SIGKILL where it offers --crash,
then run again), in a fresh directory, on SQLite and on PostgreSQL and Redis
through RESUMABLE_STORE, the variable the examples and the `resumable` command read.
The assertions read the lines a user reads.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import store_url
from resumable.stores import create_store

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
KILLED = -signal.SIGKILL
BACKENDS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]


SCENARIOS: list[Callable[..., None]] = []


def scenario(fn: Callable[..., None]) -> Callable[..., None]:
    """One example's scenario: `fn(store_url, directory, full=...)`.

    `full` adds the runs that read a finished run back (and the Python send) on
    SQLite only: they check what the examples print, not the store.
    """
    SCENARIOS.append(fn)
    return fn


# The six examples at once: 13 processes (17 on SQLite), whose imports (openai,
# langgraph) take most of the time; about 19 s of CPU per backend.
@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_example_runs_is_killed_and_resumes_as_its_docstring_says(
    backend: str, tmp_path: Path
) -> None:
    places = {fn.__name__: tmp_path / fn.__name__ for fn in SCENARIOS}
    for directory in places.values():
        directory.mkdir()
    urls = {name: store_url(backend, directory) for name, directory in places.items()}
    try:
        with ThreadPoolExecutor(len(SCENARIOS)) as pool:
            done = {
                fn.__name__: pool.submit(
                    fn,
                    urls[fn.__name__],
                    places[fn.__name__],
                    full=backend == "sqlite",
                )
                for fn in SCENARIOS
            }
        for name, future in done.items():
            error = future.exception()
            if error is not None:
                error.add_note(f"in the scenario of examples/{name}.py")
                raise error
    finally:
        if backend != "sqlite":
            asyncio.run(_drop(list(urls.values())))


async def _drop(urls: list[str]) -> None:
    for url in urls:
        store = create_store(url)
        drop = getattr(store, "drop", None)
        if drop is not None:
            await drop()
        await store.close()


def run(command: list[str], *, store: str, cwd: Path, exit_code: int = 0) -> str:
    """Run `command` (an example and its arguments) as a user would; its output."""
    env = {**os.environ, "RESUMABLE_STORE": store}
    env.pop("OPENAI_BASE_URL", None)  # the examples serve the simulated provider
    if command[0].endswith(".py"):
        command = [sys.executable, str(EXAMPLES / command[0]), *command[1:]]
    else:  # the `resumable` command
        command = [sys.executable, "-m", "resumable.cli", *command]
    done = subprocess.run(
        command,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == exit_code, output
    # nothing on stderr but the Redis test server's "does not persist" warning
    assert [
        line for line in done.stderr.splitlines() if "does not persist" not in line
    ] == []
    return done.stdout


@scenario
def agent_loop(store: str, tmp_path: Path, *, full: bool) -> None:
    """Killed after its tool ran, it resumes with one LLM call left."""
    first = run(
        ["agent_loop.py", "--crash"], store=store, cwd=tmp_path, exit_code=KILLED
    )
    assert "executed  LLM call: the model asks for the tool get_weather" in first
    assert "executed  tool get_weather('Oslo') -> '4 °C and light rain'" in first
    assert "CRASH     killed now (SIGKILL)" in first

    second = run(["agent_loop.py"], store=store, cwd=tmp_path)
    assert "executed  tool" not in second  # the tool's answer came from the store
    assert second.count("executed  LLM call") == 1
    assert "answer: According to the tool: 4 °C and light rain." in second
    assert (
        "this process: replayed 2 finished steps from the store "
        "(1 LLM call not paid again), made 1 new LLM call"
    ) in second

    if full:
        third = run(["agent_loop.py"], store=store, cwd=tmp_path)
        assert "  executed  " not in third
        assert "nothing executed; the run had finished" in third


@scenario
def pydantic_ai_agent(store: str, tmp_path: Path, *, full: bool) -> None:
    """A Pydantic AI agent killed in its second tool resumes without redoing the first."""
    first = run(
        ["pydantic_ai_agent.py", "--crash"],
        store=store,
        cwd=tmp_path,
        exit_code=KILLED,
    )
    assert "executed  tool find_city" in first
    assert "CRASH     killed now (SIGKILL)" in first

    second = run(["pydantic_ai_agent.py"], store=store, cwd=tmp_path)
    assert "executed  tool find_city" not in second  # replayed from the store
    assert "executed  tool get_weather" in second  # in flight at the kill: runs again
    assert "answer: According to the tool: 4 °C and light rain." in second
    assert "model calls paid over every execution: 3" in second  # none paid twice

    if full:
        third = run(["pydantic_ai_agent.py"], store=store, cwd=tmp_path)
        assert "executed" not in third


@scenario
def approval(store: str, tmp_path: Path, *, full: bool) -> None:
    """It waits with no process up, and continues once a decision is sent."""
    first = run(["approval.py"], store=store, cwd=tmp_path)
    assert "executed  policy check of Dana's claim" in first
    assert (
        "run expense-42 waits for a manager's decision; this process exits now."
        in first
    )
    assert "resumable send expense-42 approval true" in first

    if full:  # from Python, as a web handler would
        sent = run(["approval.py", "--approve"], store=store, cwd=tmp_path)
        assert "sent the decision to run expense-42" in sent
    else:
        sent = run(
            ["send", "expense-42", "approval", "true"], store=store, cwd=tmp_path
        )
        assert "sent 'approval' to run expense-42" in sent

    second = run(["approval.py"], store=store, cwd=tmp_path)
    assert "policy check" not in second  # replayed, not executed again
    assert "executed  payment of 1250 EUR to Dana" in second
    assert "result: paid 1250 EUR to Dana" in second


@scenario
def chat_fork(store: str, tmp_path: Path, *, full: bool) -> None:
    """Both threads are kept, sharing the first turn, and read back as saved."""
    first = run(["chat_fork.py"], store=store, cwd=tmp_path)
    assert "its checkpoints, newest first: turn 2, turn 1" in first
    original, forked = threads(first)
    assert original[:2] == forked[:2]  # turn 1, shared
    assert original[2] == "user: Can I get a refund instead of a replacement?"
    assert forked[2] == "user: Can you send the replacement by express delivery?"
    assert len(original) == len(forked) == 4

    if full:
        second = run(["chat_fork.py"], store=store, cwd=tmp_path)
        assert "exists from an earlier run: reading it back" in second
        assert threads(second) == (original, forked)


def threads(output: str) -> tuple[list[str], list[str]]:
    """The messages the example printed for the original thread and for its fork."""
    sections = re.split(r"^thread '[\w-]+':$", output, flags=re.MULTILINE)[1:]
    assert len(sections) == 2, output
    original, forked = (
        [line.strip() for line in section.splitlines() if line.strip()]
        for section in sections
    )
    return original, forked


@scenario
def batch_map(store: str, tmp_path: Path, *, full: bool) -> None:
    """Killed mid-batch, it replays the finished tickets and calls for the rest."""
    first = run(
        ["batch_map.py", "--crash"], store=store, cwd=tmp_path, exit_code=KILLED
    )
    assert "CRASH      killed now (SIGKILL), 8 tickets sent" in first

    second = run(["batch_map.py"], store=store, cwd=tmp_path)
    summaries = re.findall(r"^  (ticket-\d\d)  [A-Z]", second, flags=re.MULTILINE)
    assert summaries == [f"ticket-{n:02d}" for n in range(1, 13)]
    found = re.search(
        r"replayed (\d+) finished tickets? from the store and made (\d+) LLM calls?",
        second,
    )
    assert found, second
    replayed, called = int(found.group(1)), int(found.group(2))
    assert replayed + called == 12
    assert replayed >= 8 - 4  # at most the 4 calls in flight were lost

    if full:
        third = run(["batch_map.py"], store=store, cwd=tmp_path)
        assert "nothing executed; the batch had finished" in third


@scenario
def openai_agents(store: str, tmp_path: Path, *, full: bool) -> None:
    """Killed after the refund committed, the agents resume with one model call left."""
    first = run(
        ["openai_agents.py", "--crash"], store=store, cwd=tmp_path, exit_code=KILLED
    )
    assert "executed  tool lookup_invoice('Ada')" in first
    assert "executed  tool issue_refund('Ada')" in first
    assert "CRASH     killed now (SIGKILL)" in first

    second = run(["openai_agents.py"], store=store, cwd=tmp_path)
    assert "executed  tool" not in second  # the refund is not issued twice
    assert "answer: According to the tool: refunded INV-7." in second
    assert (
        "steps: model:triage, model:billing, tool:lookup_invoice, model:billing, "
        "tool:issue_refund, model:billing"
    ) in second
    assert (
        "this process: replayed 5 finished steps from the store "
        "(3 model calls not paid again), made 1 new model call"
    ) in second

    if full:
        third = run(["openai_agents.py"], store=store, cwd=tmp_path)
        assert "  executed  " not in third
        assert "nothing executed; the run had finished" in third


@scenario
def langgraph_agent(store: str, tmp_path: Path, *, full: bool) -> None:
    """Killed in its last node, the thread resumes at that node."""
    first = run(
        ["langgraph_agent.py", "--crash"], store=store, cwd=tmp_path, exit_code=KILLED
    )
    assert "executed  node plan" in first
    assert "executed  node research" in first

    second = run(["langgraph_agent.py"], store=store, cwd=tmp_path)
    assert "resuming at node write" in second
    assert "node plan" not in second
    assert "node research" not in second
    assert "executed  node write" in second
    assert (
        "report: Report on heat pumps: questions about heat pumps; heat pumps" in second
    )
