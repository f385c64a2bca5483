"""ResumableSaver: safe decoding, writes semantics, filters, both faces, storage."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import pickle
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, closing, contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict
from uuid import uuid4

import pydantic
import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP, Checkpoint, empty_checkpoint
from langgraph.checkpoint.serde.types import ERROR, INTERRUPT
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from conftest import store_url
from resumable import Engine, ResumableError, SerializationError
from resumable._engine import packs
from resumable._engine.shapes import chunk_place
from resumable.integrations.langgraph import STAGING_SUFFIX, ResumableSaver
from resumable.integrations.langgraph_threads import SPECIAL_WRITES, known_threads
from resumable.stores.protocol import Store
from resumable.stores.sqlite import SQLiteStore

SRC = Path(__file__).resolve().parents[2] / "src"


@asynccontextmanager
async def open_saver(
    backend: str, tmp_path: Path, **kwargs: Any
) -> AsyncIterator[ResumableSaver]:
    saver = ResumableSaver.from_url(store_url(backend, tmp_path), **kwargs)
    try:
        yield saver
    finally:
        drop = getattr(saver.engine.store, "drop", None)
        if drop is not None:
            await saver.run_on_loop(drop())  # on the saver's loop, which owns the store
        await saver.aclose()


@contextmanager
def sync_saver(tmp_path: Path) -> Iterator[ResumableSaver]:
    with ResumableSaver.from_url(f"sqlite:///{tmp_path / 'sync.db'}") as saver:
        yield saver


def config(thread_id: str, checkpoint_id: str | None = None, ns: str = "") -> Any:
    configurable = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def checkpoint(**values: Any) -> Checkpoint:
    new = empty_checkpoint()
    new["channel_values"] = values
    new["channel_versions"] = dict.fromkeys(values, 1)
    return new


async def put(
    saver: ResumableSaver, thread_id: str, parent: str | None = None, **metadata: Any
) -> RunnableConfig:
    stored_metadata: Any = {"source": "loop", "step": 0, "parents": {}, **metadata}
    return await saver.aput(
        config(thread_id, parent),
        checkpoint(x="a value long enough to be a content-addressed chunk, not inline"),
        stored_metadata,
        {},
    )


# --- safe data -----------------------------------------------------------------
async def forge_chunk(
    saver: ResumableSaver, thread_id: str, tag: str, checkpoint_id: str
) -> None:
    """Point a checkpoint at a stored payload naming `tag`.

    The saver must not have saved it last: that one it knows without a read.
    """
    store, serde = saver.engine.store, saver.engine.serde
    assert isinstance(store, Store)
    record = await store.load_snapshot(thread_id, checkpoint_id=checkpoint_id)
    assert record is not None
    manifest = serde.loads(record.manifest, place="test")
    (legit,) = record.chunk_refs
    forged = "f" * 24
    body = json.dumps({"~": tag, "v": {"command": "touch pwned"}}).encode()
    await store.put_chunks(
        {forged: serde.envelope.seal(body, place=chunk_place(forged))}
    )
    text = json.dumps(manifest).replace(legit, forged)
    await store.save_snapshot(
        dataclasses.replace(
            record,
            manifest=serde.dumps(json.loads(text), place="test"),
            chunk_refs=(forged,),
        )
    )


@pytest.mark.parametrize(
    "tag", ["os:system", "resumable_test_never_imported:Payload", "builtins:eval"]
)
async def test_a_stored_payload_naming_an_unregistered_class_is_refused(
    backend: str, tmp_path: Path, tag: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(os, "system", calls.append)
    async with open_saver(backend, tmp_path) as saver:
        stored = await put(saver, "forged")
        forged = stored["configurable"]["checkpoint_id"]
        await put(saver, "forged", forged)  # a newer one: the saver holds that one
        await saver.run_on_loop(forge_chunk(saver, "forged", tag, forged))

        with pytest.raises(SerializationError, match="is not registered") as caught:
            await saver.aget_tuple(stored)
        assert "saver.register" in str(caught.value)
        with pytest.raises(SerializationError):
            await asyncio.to_thread(saver.get_tuple, stored)
    assert calls == []
    assert "resumable_test_never_imported" not in sys.modules


def test_the_saver_serde_never_unpickles(tmp_path: Path) -> None:
    with sync_saver(tmp_path) as saver:
        message = AIMessage("hi", id="m1")
        assert saver.serde.loads_typed(saver.serde.dumps_typed(message)) == message
        with pytest.raises(SerializationError, match="never decodes pickle"):
            saver.serde.loads_typed(("pickle", pickle.dumps(message)))


def test_source_has_no_pickle_or_dynamic_import() -> None:
    for name in ("langgraph.py", "langgraph_threads.py"):
        text = (SRC / "resumable" / "integrations" / name).read_text()
        for banned in ("import pickle", "importlib", "__import__", "eval(", "exec("):
            assert banned not in text, (name, banned)


# --- types -----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Citation:
    url: str


class Answer(pydantic.BaseModel):
    text: str
    citations: list[Citation]


class Plan(TypedDict):
    steps: list[Answer]


class DeclaredState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    plan: Plan | None


def test_types_registers_what_a_typeddict_state_declares(tmp_path: Path) -> None:
    with ResumableSaver.from_url(
        f"sqlite:///{tmp_path / 'x.db'}", types=[DeclaredState]
    ) as saver:
        registry = saver.engine.serde.registry
        for tp in (Answer, Citation, AIMessage, HumanMessage):
            assert registry.lookup(registry.tag_for(tp)) is tp
        with pytest.raises(TypeError, match="cannot be registered"):
            saver.register(type("Plain", (), {}))


@dataclasses.dataclass
class Note:
    body: str


class Notebook(TypedDict):
    notes: list[Note]


def test_register_accepts_a_graph_and_with_allowlist_imports_nothing(
    tmp_path: Path,
) -> None:
    builder = StateGraph(Notebook)
    builder.add_node("n", lambda state: {})
    builder.add_edge(START, "n")
    with sync_saver(tmp_path) as saver:
        registry = saver.engine.serde.registry
        saver.register(builder.compile(checkpointer=saver))
        assert registry.lookup(registry.tag_for(Note)) is Note

        assert saver.with_allowlist({("os", "system"), ("no_such_mod", "X")}) is saver
        assert "no_such_mod" not in sys.modules
        assert registry.lookup("os:system") is None


def test_special_write_indexes_match_langgraph() -> None:
    assert SPECIAL_WRITES == WRITES_IDX_MAP


# --- pending writes --------------------------------------------------------------
async def test_regular_writes_keep_the_first_value_and_special_ones_the_last(
    backend: str, tmp_path: Path
) -> None:
    async with open_saver(backend, tmp_path) as saver:
        stored = await put(saver, "w")
        await saver.aput_writes(stored, [("a", 1), (ERROR, "first")], "task-2", "p:b")
        await saver.aput_writes(stored, [("a", 2), (ERROR, "second")], "task-2", "p:b")
        await saver.aput_writes(stored, [(INTERRUPT, "i")], "task-1", "p:a")
        await saver.aput_writes(stored, [("z", 0), ("y", 1)], "task-3", "")

        found = await saver.aget_tuple(stored)

    assert found is not None
    # ordered as LangGraph replays them: (task_path, task_id, index)
    assert found.pending_writes == [
        ("task-3", "z", 0),
        ("task-3", "y", 1),
        ("task-1", INTERRUPT, "i"),
        ("task-2", ERROR, "second"),
        ("task-2", "a", 1),
    ]


async def test_concurrent_put_writes_for_different_tasks_lose_nothing(
    backend: str, tmp_path: Path
) -> None:
    async with open_saver(backend, tmp_path) as saver:
        stored = await put(saver, "c")
        await asyncio.gather(
            *(saver.aput_writes(stored, [("ch", i)], f"a{i:02d}") for i in range(20))
        )
        with ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    lambda i: saver.put_writes(stored, [("ch", i)], f"s{i:02d}"),
                    range(20),
                )
            )
        found = await saver.aget_tuple(stored)

    assert found is not None
    assert sorted(found.pending_writes or []) == sorted(
        [(f"a{i:02d}", "ch", i) for i in range(20)]
        + [(f"s{i:02d}", "ch", i) for i in range(20)]
    )


async def test_each_checkpoint_gets_its_own_writes_however_many_its_neighbours_have(
    backend: str, tmp_path: Path
) -> None:
    """Writes are found a page at a time, from one record up: a checkpoint with none
    (the latest), one, or more than a page, beside others that have them."""
    counts = [3, 0, 1, 2, 17, 0]
    async with open_saver(backend, tmp_path) as saver:
        stored: list[RunnableConfig] = []
        for count in counts:
            parent = stored[-1]["configurable"]["checkpoint_id"] if stored else None
            stored.append(await put(saver, "pages", parent))
            for i in range(count):
                await saver.aput_writes(stored[-1], [("ch", i)], f"t{i:02d}")
        found = [await saver.aget_tuple(each) for each in stored]

    for count, each in zip(counts, found, strict=True):
        assert each is not None
        assert sorted(each.pending_writes or []) == [
            (f"t{i:02d}", "ch", i) for i in range(count)
        ]


async def test_exceptions_are_stored_as_their_repr(tmp_path: Path) -> None:
    async with open_saver("sqlite", tmp_path) as saver:
        stored = await put(saver, "e")
        await saver.aput_writes(stored, [(ERROR, ValueError("boom"))], "t")
        found = await saver.aget_tuple(stored)
    assert found is not None
    assert found.pending_writes == [("t", ERROR, "ValueError('boom')")]


# --- list --------------------------------------------------------------------------
HOSTILE_KEYS = [
    "'; DROP TABLE resumable_snapshots; --",
    'a"b',
    "$.source",
    "source') OR 1=1 --",
    "metadata->>'x'",
    "{}",
]


@pytest.mark.parametrize("key", HOSTILE_KEYS)
async def test_filter_keys_are_data_never_query_text(
    backend: str, tmp_path: Path, key: str
) -> None:
    async with open_saver(backend, tmp_path) as saver:
        first = await put(saver, "f", **{key: "yes"})
        await put(saver, "f", first["configurable"]["checkpoint_id"], **{key: "no"})
        await put(saver, "other", **{key: "yes"})

        found = [t async for t in saver.alist(config("f"), filter={key: "yes"})]
        assert [t.config for t in found] == [first]
        assert [t.metadata[key] for t in found] == ["yes"]  # type: ignore[literal-required]  # a custom metadata key
        assert [t async for t in saver.alist(config("f"), filter={key: "'"})] == []
        assert len([t async for t in saver.alist(config("f"))]) == 2
        everywhere = [t async for t in saver.alist(None, filter={key: "yes"})]
        assert {t.config["configurable"]["thread_id"] for t in everywhere} == {
            "f",
            "other",
        }


async def test_list_across_namespaces_honours_before_and_limit(
    backend: str, tmp_path: Path
) -> None:
    async with open_saver(backend, tmp_path) as saver:
        ids = []
        for ns in ("", "child:1", "", "child:1"):
            stored = await saver.aput(
                config("t", ns=ns), checkpoint(), {"source": "loop", "step": 1}, {}
            )
            ids.append(stored["configurable"]["checkpoint_id"])
        every: RunnableConfig = {"configurable": {"thread_id": "t"}}

        found = [t.checkpoint["id"] async for t in saver.alist(every)]
        assert found == ids[::-1]
        found = [
            t.checkpoint["id"]
            async for t in saver.alist(every, before=config("t", ids[3]), limit=2)
        ]
        assert found == [ids[2], ids[1]]
        assert [t.checkpoint["id"] for t in saver.list(every, limit=1)] == [ids[3]]
        only = [t async for t in saver.alist(config("t", ids[1], "child:1"))]
        assert [t.checkpoint["id"] for t in only] == [ids[1]]


# --- the two faces -----------------------------------------------------------------
async def test_a_sync_method_on_the_saver_loop_raises_instead_of_deadlocking(
    tmp_path: Path,
) -> None:
    async with open_saver("sqlite", tmp_path) as saver:

        async def call_sync() -> object:
            return saver.get_tuple(config("t"))

        with pytest.raises(RuntimeError, match="would deadlock"):
            await saver.run_on_loop(call_sync())  # runs on the saver's own loop


def test_each_sync_call_returns_once_its_own_writes_are_on_disk(tmp_path: Path) -> None:
    events: list[str] = []

    def sync_file(fd: int) -> None:
        os.fsync(fd)
        events.append("synced")

    store = SQLiteStore(f"sqlite:///{tmp_path / 'sync.db'}", sync_file=sync_file)
    engine = Engine(store)
    with ResumableSaver(engine) as saver:
        first = saver.put(config("t"), checkpoint(), {"step": -1}, {})  # indexes "t"
        events.clear()
        value = "a value long enough to be a content-addressed chunk, not inline"
        stored = saver.put(first, checkpoint(x=value), {"step": 0}, {})
        events.append("put returned")
        saver.put_writes(stored, [("x", value + "!")], "task")
        events.append("put_writes returned")
        assert saver.get_tuple(stored) is not None
    asyncio.run(engine.close())  # the saver closes only an engine it opened
    assert events == [
        "synced",
        "put returned",
        "synced",  # once, for the writes record and its chunk
        "put_writes returned",
    ]


def test_a_sync_call_waits_for_its_fsync_after_its_turn_and_returns_only_after_it(
    tmp_path: Path,
) -> None:
    """put_writes commits in its turn and fsyncs after it: a put called meanwhile
    commits during that fsync, and returns on an fsync of its own while put_writes'
    is still held. Each returns only after an fsync that began once its own
    commit was made."""
    path = tmp_path / "sync.db"
    first_started, release = threading.Event(), threading.Event()
    seen: list[set[str]] = []  # the records committed when each fsync began
    events: list[str] = []
    lock = threading.Lock()

    def committed() -> set[str]:
        with closing(sqlite3.connect(path)) as conn:
            rows = conn.execute("SELECT checkpoint_id FROM resumable_snapshots")
            return {str(row[0]) for row in rows}

    armed = threading.Event()  # set once the thread and its first checkpoint exist

    def sync_file(fd: int) -> None:
        if not armed.is_set():
            os.fsync(fd)
            return
        with lock:
            seen.append(committed())
            index = len(seen) - 1
        if index == 0:
            first_started.set()
            assert release.wait(30)
        os.fsync(fd)
        with lock:
            events.append(f"sync {index} ended")

    store = SQLiteStore(f"sqlite:///{path}", sync_file=sync_file)
    engine = Engine(store)
    with ResumableSaver(engine) as saver:
        value = "a value long enough to be a content-addressed chunk, not inline"
        first = saver.put(config("t"), checkpoint(x=value), {"step": -1}, {})
        before = committed()
        armed.set()

        def put_writes() -> None:
            saver.put_writes(first, [("x", value + "!")], "task")
            with lock:
                events.append("put_writes returned")

        def put() -> None:
            saver.put(first, checkpoint(x=value + "?"), {"step": 0}, {})
            with lock:
                events.append("put returned")

        with ThreadPoolExecutor(2) as pool:
            writes = pool.submit(put_writes)
            assert first_started.wait(30)  # put_writes committed; its fsync holds
            pool.submit(put).result(30)  # its turn is free, its fsync its own
            assert not writes.done()
            assert "put_writes returned" not in events
            release.set()
            writes.result(30)
        writes_record, put_record = sorted(
            committed() - before, key=lambda record: "." not in record
        )
    asyncio.run(engine.close())
    assert writes_record in seen[0]
    assert put_record not in seen[0]  # committed during the first fsync
    assert put_record in seen[1]
    assert events.index("put_writes returned") > events.index("sync 0 ended")
    assert events.index("put returned") > events.index("sync 1 ended")


def test_a_sync_call_that_raises_after_a_write_still_waits_for_its_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []

    def sync_file(fd: int) -> None:
        os.fsync(fd)
        events.append("synced")

    store = SQLiteStore(f"sqlite:///{tmp_path / 'sync.db'}", sync_file=sync_file)
    engine = Engine(store)
    save_snapshot = store.save_snapshot

    async def save_then_fail(*args: Any, **kwargs: Any) -> None:
        await save_snapshot(*args, **kwargs)
        events.append("saved")
        raise ValueError("after the write")

    monkeypatch.setattr(store, "save_snapshot", save_then_fail)
    with ResumableSaver(engine) as saver:
        with pytest.raises(ValueError, match="after"):
            saver.put(config("t"), checkpoint(x=1), {"step": -1}, {})
        events.append("call ended")
    asyncio.run(engine.close())
    assert events == ["saved", "synced", "call ended"]


async def test_sync_calls_run_on_the_callers_thread_where_the_store_allows_taking_turns(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite and memory stores run on any loop: a sync call runs on its caller's
    # thread, with no crossing to the saver's loop, and calls take turns, from
    # threads and from async callers alike. PostgreSQL's and Redis's clients belong
    # to one loop: every call runs there, interleaved at its awaits.
    async with open_saver(backend, tmp_path) as saver:
        stored = await put(saver, "turns")
        threads: set[str] = set()
        running, most = 0, 0
        store = saver.engine.store
        assert isinstance(store, Store)
        save_snapshot = store.save_snapshot  # each put_writes saves one

        async def watched(*args: Any, **kwargs: Any) -> Any:
            nonlocal running, most
            threads.add(threading.current_thread().name)
            running += 1
            most = max(most, running)
            try:
                await asyncio.sleep(0.002)  # a window for another call to enter
                return await save_snapshot(*args, **kwargs)
            finally:
                running -= 1

        monkeypatch.setattr(saver.engine.store, "save_snapshot", watched)

        def sync_writes(i: int) -> None:
            saver.put_writes(stored, [("ch", i)], f"s{i:02d}")

        with ThreadPoolExecutor(6, thread_name_prefix="caller") as pool:
            calls = [
                asyncio.wrap_future(pool.submit(sync_writes, i)) for i in range(12)
            ]
            await asyncio.gather(
                *calls,
                *(
                    saver.aput_writes(stored, [("ch", i)], f"a{i:02d}")
                    for i in range(12)
                ),
            )
        found = await saver.aget_tuple(stored)

    if backend in ("memory", "sqlite"):
        assert most == 1
        assert "resumable-bridge" in threads  # the async calls ran there
        callers = threads - {"resumable-bridge"}
        assert callers
        assert all(name.startswith("caller_") for name in callers)
    else:
        assert most > 1
        assert threads == {"resumable-bridge"}
    assert found is not None
    assert sorted(found.pending_writes or []) == sorted(
        [(f"a{i:02d}", "ch", i) for i in range(12)]
        + [(f"s{i:02d}", "ch", i) for i in range(12)]
    )


async def test_a_sync_call_from_a_thread_running_a_loop_crosses_to_the_saver_loop(
    tmp_path: Path,
) -> None:
    async with open_saver("sqlite", tmp_path) as saver:
        stored = await put(saver, "t")
        # this thread runs the test's loop: the call cannot run here, and blocks it
        found = saver.get_tuple(stored)
        assert found == await saver.aget_tuple(stored)
        assert found is not None


async def test_sync_and_async_calls_share_one_store(tmp_path: Path) -> None:
    async with open_saver("sqlite", tmp_path) as saver:
        stored = await asyncio.to_thread(
            saver.put, config("t"), checkpoint(a=1), {"source": "input"}, {}
        )
        found = await saver.aget_tuple(stored)
        assert found is not None
        assert found.checkpoint["channel_values"] == {"a": 1}
        assert await asyncio.to_thread(saver.get_tuple, stored) == found


def test_constructor_takes_an_engine_or_a_store_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = Engine(f"sqlite:///{tmp_path / 'e.db'}")
    with pytest.raises(TypeError, match="not both"):
        ResumableSaver(engine, store="memory://")
    with ResumableSaver(engine) as shared:
        shared.put(config("t"), checkpoint(a=1), {"source": "input"}, {})
    # the saver did not close an engine it was given
    assert engine.run_sync is not None
    monkeypatch.chdir(tmp_path)
    with ResumableSaver() as default:
        assert default.get_tuple(config("t")) is None
        assert "state.db" in repr(default)
    assert (tmp_path / ".resumable" / "state.db").exists()


def test_importing_resumable_without_langgraph_works_and_the_adapter_names_the_extra(
    tmp_path: Path,
) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        for name in ("langgraph", "langchain_core"):
            sys.modules[name] = None  # as if not installed
        import argparse, asyncio
        import resumable
        from resumable.cli import threads
        parser = argparse.ArgumentParser()
        store = argparse.ArgumentParser(add_help=False)
        store.add_argument("--store")
        threads.register(parser.add_subparsers(), store)
        args = parser.parse_args(["threads", "--store", {f"sqlite:///{tmp_path / 'n.db'}"!r}])
        print("cli", asyncio.run(args.handler(args)))
        try:
            import resumable.integrations.langgraph
        except ImportError as exc:
            print("error", exc)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        timeout=60,
    ).stdout
    assert "no threads\ncli 0" in out
    assert "pip install 'resumable[langgraph]'" in out


# --- storage -----------------------------------------------------------------------
class Conversation(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


async def stored_bytes(saver: ResumableSaver, thread_id: str) -> int:
    store = saver.engine.store
    assert isinstance(store, Store)
    records = await store.list_snapshots(thread_id, namespace=None)
    chunks = await store.get_chunks({ref for r in records for ref in r.chunk_refs})
    return sum(
        len(r.manifest) + len(r.metadata or b"") + len(r.checkpoint_id) for r in records
    ) + sum(len(data) for data in chunks.values())


async def test_packing_shrinks_what_a_long_thread_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def reply(state: Conversation) -> dict[str, list[AnyMessage]]:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"reply {n} " + "lorem " * 80, id=f"m{n}")]}

    builder = StateGraph(Conversation)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    sizes = {}
    for every in (10**9, packs.PACK_EVERY):  # rows only, then packed as by default
        monkeypatch.setattr(packs, "PACK_EVERY", every)
        async with open_saver("memory", tmp_path) as saver:
            graph = builder.compile(checkpointer=saver)
            for _ in range(100):
                await graph.ainvoke({"messages": []}, config("chat"))
            sizes[every] = await saver.run_on_loop(stored_bytes(saver, "chat"))
            history = [s async for s in graph.aget_state_history(config("chat"))]
            assert len(history) == 300
            assert len(history[-2].values["messages"]) == 0
            assert len(history[0].values["messages"]) == 100
    rows, packed = sizes.values()
    # the messages themselves (~100 x 200 compressed bytes) stay as they were
    assert packed < 0.6 * rows


async def test_an_appending_messages_channel_costs_the_same_at_every_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # rows alone, the way they are written: packing them (tested on its own) would
    # make the growth depend on where the measures fall between two packs
    monkeypatch.setattr(packs, "PACK_EVERY", 10**9)

    def reply(state: Conversation) -> dict[str, list[AnyMessage]]:
        n = len(state["messages"])
        return {
            "messages": [AIMessage(f"reply {n} " + "lorem ipsum " * 40, id=f"m{n}")]
        }

    builder = StateGraph(Conversation)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    async with open_saver("memory", tmp_path) as saver:
        graph = builder.compile(checkpointer=saver)
        sizes = []
        for turn in range(1, 121):
            await graph.ainvoke({"messages": []}, config("chat"))
            if turn % 40 == 0:
                sizes.append(await saver.run_on_loop(stored_bytes(saver, "chat")))
        state = await graph.aget_state(config("chat"))
    assert len(state.values["messages"]) == 120
    first, second = sizes[1] - sizes[0], sizes[2] - sizes[1]
    # a saver rewriting the channel would grow by ~40 more messages each time
    assert abs(second - first) < 0.1 * first
    # per turn: a 480-byte message (compressed) and 3 checkpoints of bookkeeping
    assert first / 40 < 2500


async def test_deleted_threads_leave_the_index_but_not_the_listing(
    tmp_path: Path,
) -> None:
    async with open_saver("sqlite", tmp_path) as saver:
        await put(saver, "gone")
        await put(saver, "kept")
        await saver.adelete_thread("gone")
        assert await saver.run_on_loop(known_threads(saver.engine)) == ["gone", "kept"]
        listed = {
            t.config["configurable"]["thread_id"] async for t in saver.alist(None)
        }
        assert listed == {"kept"}


async def test_a_thread_continues_after_its_parent_checkpoint_was_deleted(
    backend: str, tmp_path: Path
) -> None:
    async with open_saver(backend, tmp_path) as saver:
        first = await put(saver, "t")
        second = await put(saver, "t", first["configurable"]["checkpoint_id"])
        await saver.aget_tuple(second)  # its shape is now cached by the Engine
        await saver.adelete_thread("t")
        # a run still holding the deleted checkpoint's config saves the next one
        third = await put(saver, "t", second["configurable"]["checkpoint_id"])

        found = await saver.aget_tuple(third)
        assert found is not None
        assert found.parent_config == second  # LangGraph's own parent, kept
        assert len([c async for c in saver.alist(config("t"))]) == 1
        fresh = ResumableSaver(saver.engine) if backend == "memory" else None
        reader = fresh or ResumableSaver.from_url(saver.engine.store.url)
        try:
            assert await reader.aget_tuple(third) == found
        finally:
            await reader.aclose()


async def test_prune_deletes_exactly_the_doomed_checkpoints_and_their_writes(
    backend: str, tmp_path: Path
) -> None:
    async with open_saver(backend, tmp_path) as saver:
        first = await put(saver, "t", run_id="r1")
        await saver.aput_writes(first, [("ch", "old write")], "task-1")
        second = await put(saver, "t", first["configurable"]["checkpoint_id"])
        await saver.aput_writes(second, [("ch", "kept write")], "task-2")
        other = await put(saver, "other", run_id="r1")
        await saver.adelete_for_runs(["r1"])
        assert [c.config async for c in saver.alist(config("t"))] == [second]
        assert await saver.aget_tuple(other) is None
        await saver.aprune(["t"])
        found = await saver.aget_tuple(config("t"))
        assert found is not None
        assert found.config == second
        assert found.pending_writes == [("task-2", "ch", "kept write")]
        # nothing staged: no thread but the two (and the saver's index) was written
        store = saver.engine.store
        assert isinstance(store, Store)
        threads = await saver.run_on_loop(store.list_threads())
        assert all(not t.thread_id.endswith(STAGING_SUFFIX) for t in threads), threads


async def test_a_staged_copy_an_older_version_left_is_reported_never_deleted(
    tmp_path: Path,
) -> None:
    async with open_saver("sqlite", tmp_path) as saver:
        first = await put(saver, "t")
        await put(saver, "t", first["configurable"]["checkpoint_id"])
        await saver.acopy_thread("t", "t" + STAGING_SUFFIX)  # as a crash leaves it
        with pytest.raises(ResumableError, match="did not finish"):
            await saver.aprune(["t"])
        assert len([c async for c in saver.alist(config("t" + STAGING_SUFFIX))]) == 2
        await saver.adelete_thread("t" + STAGING_SUFFIX)
        await saver.aprune(["t"])
        assert len([c async for c in saver.alist(config("t"))]) == 1


async def test_prune_rejects_an_unknown_strategy(tmp_path: Path) -> None:
    async with open_saver("memory", tmp_path) as saver:
        with pytest.raises(ValueError, match="unknown prune strategy"):
            await saver.aprune(["t"], strategy="keep_some")
        thread = str(uuid4())
        await put(saver, thread)
        await saver.aprune([thread], strategy="delete")
        assert await saver.aget_tuple(config(thread)) is None


# --- a second process -------------------------------------------------------------
APP = """
import dataclasses, operator, sys
from typing import Annotated, TypedDict
import pydantic
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send, interrupt
from resumable.integrations.langgraph import STAGING_SUFFIX, ResumableSaver

@dataclasses.dataclass(frozen=True)
class Source:
    url: str

class Finding(pydantic.BaseModel):
    claim: str
    sources: list[Source]

class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    findings: Annotated[list[Finding], operator.add]
    topics: list[str]

def ask(state):
    answer = interrupt({"question": "which topics?"})
    return {"topics": answer, "messages": [AIMessage("on it", id="ai-1")]}

def fan_out(state):
    return [Send("research", {**state, "topics": [t]}) for t in state["topics"]]

def research(state):
    topic = state["topics"][0]
    return {"findings": [Finding(claim=topic, sources=[Source(f"https://{topic}")])]}

builder = StateGraph(State)
builder.add_node("ask", ask)
builder.add_node("research", research)
builder.add_edge(START, "ask")
builder.add_conditional_edges("ask", fan_out)
builder.add_edge("research", END)
config = {"configurable": {"thread_id": "t"}}
step, url = sys.argv[1], sys.argv[2]
types = [] if step == "unregistered" else [State]
with ResumableSaver.from_url(url, types=types) as saver:
    graph = builder.compile(checkpointer=saver, interrupt_before=["research"])
    if step == "write":
        graph.invoke({"messages": [HumanMessage("hi", id="h-1")], "findings": [], "topics": []}, config)
        graph.invoke(Command(resume=["tides", "moon"]), config)
        print("next", graph.get_state(config).next)
    elif step == "unregistered":
        graph.get_state(config)
    else:
        state = graph.get_state(config)
        assert [m.content for m in state.values["messages"]] == ["hi", "on it"], state
        assert state.tasks[0].interrupts == (), state.tasks
        done = graph.invoke(None, config)
        print("findings", sorted((f.claim, f.sources[0].url) for f in done["findings"]))
"""


def test_a_fresh_process_reads_and_resumes_what_another_wrote(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text(APP)
    url = f"sqlite:///{tmp_path / 'shared.db'}"

    def run(step: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(app), step, url],
            capture_output=True,
            text=True,
            check=check,
            env={**os.environ, "PYTHONPATH": str(SRC)},
            timeout=60,
        )

    assert "next ('research', 'research')" in run("write").stdout
    assert (
        "findings [('moon', 'https://moon'), ('tides', 'https://tides')]"
        in run("read").stdout
    )
    refused = run("unregistered", check=False)
    assert refused.returncode != 0
    assert "type '__main__:Source' is not registered" in refused.stderr
    assert "saver.register" in refused.stderr
