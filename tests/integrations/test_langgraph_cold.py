"""A LangGraph thread whose old checkpoints were archived reads back everywhere the same.

`ResumableSaver` on a store with `?blobs=`, on SQLite, PostgreSQL and Redis: after
`resumable archive` moved the thread's older checkpoints and writes into one
object (`stores.archive`), the saver's `get_tuple` and `list`, `resumable
threads`, `resumable show-thread` and the dashboard's thread pages show what they
showed before, the graph goes on, and `resumable archive --restore-thread` puts
the rows back.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, TypedDict

import httpx
import pytest
from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt

from conftest import store_url
from resumable import Engine
from resumable.cli import main
from resumable.integrations.langgraph import ResumableSaver
from resumable.stores import create_store
from resumable.stores.offload import OffloadStore
from resumable.stores.stubs import SupportsThreadArchive
from resumable.ui.app import create_app

BACKENDS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]
TURNS = 6


class Steps(TypedDict):
    log: Annotated[list[str], operator.add]


def _graph(saver: ResumableSaver) -> Any:
    def ask(state: Steps) -> dict[str, list[str]]:
        return {"log": [str(interrupt("go?"))]}

    inner = StateGraph(Steps)
    inner.add_node("ask", ask)
    inner.add_edge(START, "ask")
    outer = StateGraph(Steps)
    outer.add_node("inner", inner.compile())
    outer.add_node("start", lambda state: {"log": ["start " + "x" * 300]})
    outer.add_edge(START, "start")
    outer.add_edge("start", "inner")
    return outer.compile(checkpointer=saver)


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store URL with a file object store."""
    base = store_url(str(request.param), tmp_path)
    separator = "&" if "?" in base else "?"
    yield f"{base}{separator}blobs=file://{tmp_path / 'objects'}"
    if request.param != "sqlite":
        asyncio.run(_drop(base))


async def _drop(base: str) -> None:
    store = create_store(base)
    try:
        await store.drop()  # type: ignore[attr-defined]  # PostgresStore/RedisStore.drop, for tests
    finally:
        await store.close()


def _config(checkpoint_id: str | None = None, ns: str = "") -> Any:
    configurable = {"thread_id": "chat", "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _tuples(saver: ResumableSaver) -> list[tuple[object, ...]]:
    """Every checkpoint of "chat" in every namespace, as list and get_tuple see it."""
    seen: list[tuple[object, ...]] = []
    for listed in saver.list({"configurable": {"thread_id": "chat"}}):
        configurable = listed.config["configurable"]
        ns, cid = configurable["checkpoint_ns"], configurable["checkpoint_id"]
        got = saver.get_tuple(_config(cid, ns))
        assert got is not None, (ns, cid)
        seen.append(
            (
                ns,
                cid,
                listed.checkpoint,
                listed.metadata,
                listed.pending_writes,
                got.checkpoint,
                got.metadata,
                got.pending_writes,
                got.parent_config,
            )
        )
    return seen


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


async def _pages(url: str, old: str) -> list[str]:
    async with Engine(url) as engine:
        transport = httpx.ASGITransport(app=create_app(engine))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1"
        ) as client:
            pages = [
                await client.get("/threads"),
                await client.get("/thread", params={"id": "chat"}),
                await client.get("/thread", params={"id": "chat", "cp": old}),
            ]
    for page in pages:
        assert page.status_code == 200, page.text
    # the page's body (the head holds a fresh CSRF token per dashboard)
    return [page.text.partition("<main>")[2] for page in pages]


async def _archive(url: str) -> tuple[int, int]:
    """Archive everything; (live rows, archived records) of "chat" after."""
    async with Engine(url) as engine:
        await asyncio.sleep(0.005)  # saved strictly before "now"
        done = await engine.archive(older_than=timedelta(0))
        assert ("thread", "chat") in [(a.kind, a.name) for a in done]
        store = engine.store
        assert isinstance(store, OffloadStore)
        inner = store.inner
        assert isinstance(inner, SupportsThreadArchive)
        stub = await inner.load_thread_stub("chat")
        assert stub is not None
        rows = await inner.list_snapshots("chat", namespace=None)
        return len(rows), stub.snapshots


async def _live_rows(url: str) -> tuple[int, bool]:
    async with Engine(url) as engine:
        store = engine.store
        assert isinstance(store, OffloadStore)
        inner = store.inner
        assert isinstance(inner, SupportsThreadArchive)
        rows = await inner.list_snapshots("chat", namespace=None)
        return len(rows), await inner.load_thread_stub("chat") is not None


def test_an_archived_langgraph_thread_reads_back_through_saver_cli_and_dashboard(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with ResumableSaver.from_url(url) as saver:
        chat = _graph(saver)
        for turn in range(TURNS):
            chat.invoke({"log": []}, _config())
            chat.invoke(Command(resume=f"yes {turn}"), _config())
        chat.invoke({"log": []}, _config())  # waits at the interrupt: a pending write
        before = _tuples(saver)
    oldest = str([b for b in before if b[0] == ""][-1][1])  # the root's first
    listing = _cli(["threads", "--store", url], capsys)
    shown = _cli(["show-thread", "chat", "--store", url], capsys)
    shown_old = _cli(
        ["show-thread", "chat", "--checkpoint", oldest, "--store", url], capsys
    )
    pages = asyncio.run(_pages(url, oldest))
    rows_before, _ = asyncio.run(_live_rows(url))

    live, archived = asyncio.run(_archive(url))
    assert live < rows_before
    assert archived > 0

    with ResumableSaver.from_url(url) as saver:  # a fresh engine: nothing cached
        assert _tuples(saver) == before
        assert saver.get_tuple(_config(oldest)) is not None
    assert _cli(["threads", "--store", url], capsys) == listing
    assert _cli(["show-thread", "chat", "--store", url], capsys) == shown
    assert (
        _cli(["show-thread", "chat", "--checkpoint", oldest, "--store", url], capsys)
        == shown_old
    )
    assert asyncio.run(_pages(url, oldest)) == pages
    assert oldest in pages[2]

    # the graph goes on from its latest checkpoint, beside the stub
    with ResumableSaver.from_url(url) as saver:
        chat = _graph(saver)
        result = chat.invoke(Command(resume="after archive"), _config())
        assert result["log"][-1] == "after archive"
        after = _tuples(saver)
    assert len(after) > len(before)
    out = _cli(["archive", "--restore-thread", "chat", "--store", url], capsys)
    assert out == "thread 'chat': its archived saved states are back in the store\n"
    restored_rows, stubbed = asyncio.run(_live_rows(url))
    assert not stubbed
    assert restored_rows > live  # the archived rows (packed before) are back
    with ResumableSaver.from_url(url) as saver:
        assert _tuples(saver) == after
    out = _cli(["archive", "--restore-thread", "chat", "--store", url], capsys)
    assert out == "thread 'chat' was not archived; nothing changed\n"
