"""`resumable threads` and `resumable show-thread` on threads ResumableSaver wrote."""

from __future__ import annotations

import argparse
import asyncio
import json
import operator
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt

from resumable.cli import threads
from resumable.errors import ResumableError
from resumable.integrations.langgraph import ResumableSaver


def run_cli(argv: list[str]) -> int:
    """Parse and run one of this group's commands as `resumable.cli.main` does."""
    parser = argparse.ArgumentParser(prog="resumable")
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument("--store")
    threads.register(parser.add_subparsers(dest="command", required=True), store)
    args = parser.parse_args(argv)
    return int(asyncio.run(args.handler(args)))


class Steps(TypedDict):
    log: Annotated[list[str], operator.add]


def graph(saver: ResumableSaver) -> Any:
    def ask(state: Steps) -> dict[str, list[str]]:
        return {"log": [str(interrupt("go?"))]}

    inner = StateGraph(Steps)
    inner.add_node("ask", ask)
    inner.add_edge(START, "ask")
    outer = StateGraph(Steps)
    outer.add_node("inner", inner.compile())
    outer.add_node("start", lambda state: {"log": ["start"]})
    outer.add_edge(START, "start")
    outer.add_edge("start", "inner")
    return outer.compile(checkpointer=saver)


@pytest.fixture
def url(tmp_path: Path) -> str:
    store = f"sqlite:///{tmp_path / 'cli.db'}"
    with ResumableSaver.from_url(store) as saver:
        chat = graph(saver)
        for thread_id in ("older", "newer", "gone"):
            chat.invoke({"log": []}, {"configurable": {"thread_id": thread_id}})
        chat.invoke(Command(resume="yes"), {"configurable": {"thread_id": "newer"}})
        saver.delete_thread("gone")
    return store


def test_threads_lists_langgraph_threads_newest_first(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["threads", "--store", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "THREAD",
        "KIND",
        "LATEST",
        "CHECKPOINT",
        "STEP",
        "SOURCE",
        "UPDATED",
        "(UTC)",
    ]
    assert [line.split()[0] for line in lines[2:]] == ["newer", "older"]
    assert lines[2].split()[1] == "langgraph"
    assert lines[2].split()[3:5] == ["2", "loop"]  # input -1, start 0, inner 1, done 2

    assert run_cli(["threads", "--store", url, "--limit", "1"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[2:]] == [
        "newer"
    ]


def test_show_thread_prints_every_namespace_with_writes(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["show-thread", "older", "--store", url]) == 0
    out = capsys.readouterr().out
    assert out.startswith("thread  older  (")
    values_at = out.splitlines()[2].index("VALUES")  # the last column: free text
    rows = [line[:values_at].split() for line in out.splitlines()[4:]]
    sources = [(row[1] == "(root)", row[-5], row[-4]) for row in rows]
    # newest first: the root's input, start and inner steps; the subgraph's own
    assert (True, "-1", "input") in sources
    assert (False, "-1", "input") in sources
    assert any(not root for root, _, _ in sources)
    interrupted = next(row for row in rows if row[1] != "(root)")
    assert int(interrupted[-3]) >= 1  # the pending INTERRUPT write


def test_empty_stores_and_unknown_threads_say_so(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    assert run_cli(["threads", "--store", empty]) == 0
    assert capsys.readouterr().out == "no threads\n"
    with pytest.raises(ResumableError, match="no saved states"):
        run_cli(["show-thread", "gone", "--store", url])
    with pytest.raises(ResumableError, match="--limit"):
        run_cli(["threads", "--store", url, "--limit", "0"])


def test_show_thread_shows_values_without_the_graphs_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.graph import MessagesState

    def reply(state: MessagesState) -> dict[str, list[AIMessage]]:
        return {"messages": [AIMessage(content="hello back")]}

    store = f"sqlite:///{tmp_path / 'chat.db'}"
    with ResumableSaver.from_url(store) as saver:
        chat = StateGraph(MessagesState)
        chat.add_node("reply", reply)
        chat.add_edge(START, "reply")
        chat.compile(checkpointer=saver).invoke(
            {"messages": [HumanMessage(content="hi there")]},
            {"configurable": {"thread_id": "c"}},
        )
    # a process that never imports langgraph or langchain reads the values
    script = (
        "import sys; from resumable.cli import main; code = main(sys.argv[1:]); "
        "assert not {'langchain_core', 'langgraph'} & set(sys.modules), 'imported'; "
        "sys.exit(code)"
    )

    def show(*extra: str) -> str:
        argv = [sys.executable, "-c", script, "show-thread", "c", "--store", store]
        return subprocess.run(
            [*argv, *extra], capture_output=True, text=True, check=True
        ).stdout

    table = show()
    latest = table.splitlines()[4]  # newest first: the reply is in
    assert 'HumanMessage(content="hi there"' in latest
    assert "unreadable" not in table
    latest_id = latest.split()[0]
    whole = show("--full", "--checkpoint", latest_id)
    assert "(1 checkpoint)" in whole
    messages = json.loads(whole[whole.index("{") :])["messages"]
    assert [(m["$type"], m["content"]) for m in messages] == [
        ("langchain_core.messages.human:HumanMessage", "hi there"),
        ("langchain_core.messages.ai:AIMessage", "hello back"),
    ]
