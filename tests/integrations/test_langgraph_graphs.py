"""Real LangGraph graphs compiled with ResumableSaver, on every store."""

from __future__ import annotations

import asyncio
import dataclasses
import operator
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict
from uuid import uuid4

import pydantic
import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Send, interrupt

from conftest import store_url
from resumable._engine import packs
from resumable.integrations.langgraph import ResumableSaver


@pytest.fixture(autouse=True, params=["rows", "packed"])
def packing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every graph runs twice: as saved, and with its records packed at every save."""
    if request.param == "packed":
        for name, value in ("PACK_EVERY", 1), ("KEEP_LOOSE", 1), ("PACK_MIN", 1):
            monkeypatch.setattr(packs, name, value)
        monkeypatch.setattr(packs, "PACK_MAX", 3)


@asynccontextmanager
async def savers(backend: str, tmp_path: Path) -> AsyncIterator[list[ResumableSaver]]:
    """A list that `reopen` appends to: savers on one store, as after a restart."""
    first = ResumableSaver.from_url(store_url(backend, tmp_path))
    opened = [first]
    try:
        yield opened
    finally:
        for saver in opened[1:]:
            await saver.aclose()
        drop = getattr(first.engine.store, "drop", None)
        if drop is not None:
            await first.run_on_loop(drop())  # on the saver's loop, which owns the store
        await first.aclose()


def reopen(
    opened: list[ResumableSaver], backend: str, tmp_path: Path
) -> ResumableSaver:
    """A new saver on the same store (the same Engine for memory://)."""
    first = opened[0]
    if backend == "memory":
        saver = ResumableSaver(first.engine)
    else:
        saver = ResumableSaver.from_url(store_url_of(first))
    opened.append(saver)
    return saver


def store_url_of(saver: ResumableSaver) -> str:
    url: str = saver.engine.store.url
    return url


def thread(thread_id: str | None = None, **extra: Any) -> Any:
    return {"configurable": {"thread_id": thread_id or str(uuid4())}, **extra}


# --- a chat with add_messages ------------------------------------------------------
class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def chat_graph(saver: ResumableSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
    def reply(state: Chat) -> dict[str, list[AnyMessage]]:
        asked = state["messages"][-1].content
        return {"messages": [AIMessage(f"you said {asked}", id=f"ai-{uuid4()}")]}

    builder = StateGraph(Chat)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=saver)


async def test_invoke_stream_and_ainvoke_continue_one_conversation(
    backend: str, tmp_path: Path
) -> None:
    async with savers(backend, tmp_path) as opened:
        graph = chat_graph(opened[0])
        config = thread()
        await asyncio.to_thread(graph.invoke, {"messages": [HumanMessage("a")]}, config)
        chunks = await asyncio.to_thread(
            lambda: list(graph.stream({"messages": [HumanMessage("b")]}, config))
        )
        assert [list(chunk) for chunk in chunks] == [["reply"]]
        result = await graph.ainvoke({"messages": [HumanMessage("c")]}, config)

        texts = [m.content for m in result["messages"]]
        assert texts == ["a", "you said a", "b", "you said b", "c", "you said c"]
        later = chat_graph(reopen(opened, backend, tmp_path))
        state = await asyncio.to_thread(later.get_state, config)
        assert state.values == result
        assert isinstance(state.values["messages"][1], AIMessage)
        assert state.metadata is not None
        assert (state.metadata["source"], state.metadata["step"]) == ("loop", 7)


async def test_history_update_state_and_time_travel(
    backend: str, tmp_path: Path
) -> None:
    async with savers(backend, tmp_path) as opened:
        graph = chat_graph(opened[0])
        config = thread()
        for word in ("one", "two"):
            await graph.ainvoke({"messages": [HumanMessage(word)]}, config)
        history = [s async for s in graph.aget_state_history(config)]
        assert [s.metadata["source"] for s in history if s.metadata] == [
            "loop",
            "loop",
            "input",
        ] * 2
        assert all(s.parent_config for s in history[:-1])
        assert history[-1].parent_config is None

        updated = await graph.aupdate_state(
            config, {"messages": [AIMessage("edited", id="edit")]}, as_node="reply"
        )
        state = await graph.aget_state(config)
        assert state.values["messages"][-1].content == "edited"
        assert state.config == updated

        # fork from the end of the first turn and take another path
        first_turn = history[3].config
        forked = await graph.ainvoke({"messages": [HumanMessage("three")]}, first_turn)
        assert [m.content for m in forked["messages"]] == [
            "one",
            "you said one",
            "three",
            "you said three",
        ]
        past = await graph.aget_state(first_turn)
        assert [m.content for m in past.values["messages"]] == ["one", "you said one"]
        # as InMemorySaver: 2 turns of 3, the update, the fork's 3 (from turn one)
        after = [s async for s in graph.aget_state_history(config)]
        assert [(s.metadata or {}).get("source") for s in after][:4] == [
            "loop",
            "loop",
            "input",
            "update",
        ]
        assert len(after) == 10
        assert after[2].parent_config == first_turn


# --- interrupts ---------------------------------------------------------------------
class Approval(TypedDict):
    request: str
    decision: str


def approval_graph(saver: ResumableSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
    def ask(state: Approval) -> dict[str, str]:
        answer = interrupt({"question": f"approve {state['request']}?"})
        return {"decision": str(answer)}

    builder = StateGraph(Approval)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=saver)


async def test_interrupt_then_resume_after_a_restart(
    backend: str, tmp_path: Path
) -> None:
    async with savers(backend, tmp_path) as opened:
        config = thread()
        paused = await asyncio.to_thread(
            approval_graph(opened[0]).invoke, {"request": "deploy"}, config
        )
        (pending,) = paused["__interrupt__"]
        assert pending.value == {"question": "approve deploy?"}

        graph = approval_graph(reopen(opened, backend, tmp_path))
        state = await graph.aget_state(config)
        assert state.next == ("ask",)
        assert state.tasks[0].interrupts[0].id == pending.id
        done = await graph.ainvoke(Command(resume="yes"), config)
        assert done == {"request": "deploy", "decision": "yes"}
        assert (await graph.aget_state(config)).next == ()


# --- subgraphs ----------------------------------------------------------------------
class Outer(TypedDict):
    topic: str
    notes: Annotated[list[str], operator.add]


async def test_a_subgraph_interrupts_and_resumes_under_its_own_namespace(
    backend: str, tmp_path: Path
) -> None:
    def research(state: Outer) -> dict[str, list[str]]:
        hint = interrupt("need a hint")
        return {"notes": [f"{state['topic']}: {hint}"]}

    inner = StateGraph(Outer)
    inner.add_node("research", research)
    inner.add_edge(START, "research")
    outer = StateGraph(Outer)
    outer.add_node("inner", inner.compile())
    outer.add_node("write", lambda state: {"notes": ["written"]})
    outer.add_edge(START, "inner")
    outer.add_edge("inner", "write")
    async with savers(backend, tmp_path) as opened:
        graph = outer.compile(checkpointer=opened[0])
        config = thread()
        await graph.ainvoke({"topic": "tides", "notes": []}, config)

        state = await graph.aget_state(config, subgraphs=True)
        sub = state.tasks[0].state
        assert sub is not None
        assert not isinstance(sub, dict)
        namespace = sub.config["configurable"]["checkpoint_ns"]
        assert namespace.startswith("inner:")
        assert sub.next == ("research",)
        inner_history = [
            t
            async for t in opened[0].alist(
                {"configurable": {**config["configurable"], "checkpoint_ns": namespace}}
            )
        ]
        assert inner_history
        assert all(
            t.config["configurable"]["checkpoint_ns"] == namespace
            for t in inner_history
        )

        done = await graph.ainvoke(Command(resume="moon"), config)
        assert done["notes"] == ["tides: moon", "written"]


# --- Send, errors and pending writes ---------------------------------------------------
class Fan(TypedDict):
    subjects: list[str]
    jokes: Annotated[list[str], operator.add]


async def test_pending_sends_survive_a_restart_between_supersteps(
    backend: str, tmp_path: Path
) -> None:
    def fan_out(state: Fan) -> list[Send]:
        return [Send("joke", {"subjects": [s], "jokes": []}) for s in state["subjects"]]

    builder = StateGraph(Fan)
    builder.add_node("plan", lambda state: {})
    builder.add_node("joke", lambda state: {"jokes": [f"{state['subjects'][0]}!"]})
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", fan_out)
    builder.add_edge("joke", END)
    async with savers(backend, tmp_path) as opened:
        config = thread()
        first = builder.compile(checkpointer=opened[0], interrupt_before=["joke"])
        await first.ainvoke({"subjects": ["cats", "dogs"], "jokes": []}, config)
        state = await first.aget_state(config)
        assert state.next == ("joke", "joke")

        later = reopen(opened, backend, tmp_path)
        graph = builder.compile(checkpointer=later, interrupt_before=["joke"])
        tasks = (await graph.aget_state(config)).tasks
        assert [t.name for t in tasks] == ["joke", "joke"]
        done = await graph.ainvoke(None, config)
        assert sorted(done["jokes"]) == ["cats!", "dogs!"]


class Pair(TypedDict):
    done: Annotated[list[str], operator.add]


async def test_a_failed_task_is_retried_without_rerunning_its_finished_sibling(
    backend: str, tmp_path: Path
) -> None:
    runs: list[str] = []
    broken = True
    steady_done = asyncio.Event()

    async def steady(state: Pair) -> dict[str, list[str]]:
        runs.append("steady")
        steady_done.set()
        return {"done": ["steady"]}

    async def flaky(state: Pair) -> dict[str, list[str]]:
        runs.append("flaky")
        await steady_done.wait()  # fail only once the sibling has finished
        if broken:
            raise RuntimeError("flaky failed")
        return {"done": ["flaky"]}

    builder = StateGraph(Pair)
    builder.add_node("steady", steady)
    builder.add_node("flaky", flaky)
    builder.add_edge(START, "steady")
    builder.add_edge(START, "flaky")
    async with savers(backend, tmp_path) as opened:
        config = thread()
        graph = builder.compile(checkpointer=opened[0])
        with pytest.raises(RuntimeError, match="flaky failed"):
            await graph.ainvoke({"done": []}, config, durability="sync")
        state = await graph.aget_state(config)
        # stored as its repr, as LangGraph's own serializer does
        errors: dict[str, object] = {t.name: t.error for t in state.tasks}
        assert errors == {"steady": None, "flaky": "RuntimeError('flaky failed')"}

        broken = False
        later = builder.compile(checkpointer=reopen(opened, backend, tmp_path))
        done = await later.ainvoke(None, config)
        assert sorted(done["done"]) == ["flaky", "steady"]
        assert sorted(runs) == ["flaky", "flaky", "steady"]


# --- typed state, copy, prune, delete_for_runs -------------------------------------------
@dataclasses.dataclass(frozen=True)
class Source:
    url: str


class Finding(pydantic.BaseModel):
    claim: str
    sources: list[Source]


class Research(TypedDict):
    findings: Annotated[list[Finding], operator.add]


def research_graph(saver: ResumableSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
    def find(state: Research) -> dict[str, list[Finding]]:
        n = len(state["findings"])
        return {"findings": [Finding(claim=f"c{n}", sources=[Source(f"https://{n}")])]}

    builder = StateGraph(Research)
    builder.add_node("find", find)
    builder.add_edge(START, "find")
    return builder.compile(checkpointer=saver)


async def test_declared_types_copy_prune_and_delete_for_runs(
    backend: str, tmp_path: Path
) -> None:
    async with savers(backend, tmp_path) as opened:
        saver = opened[0]
        saver.register(Research)
        graph = research_graph(saver)
        first_run, second_run = str(uuid4()), str(uuid4())
        config = thread()
        # LangGraph copies config metadata (where its server puts run_id) into
        # each checkpoint's metadata
        for run_id in (first_run, second_run):
            run_config: Any = {**config, "metadata": {"run_id": run_id}}
            await graph.ainvoke({"findings": []}, run_config)
        expected = (await graph.aget_state(config)).values
        assert expected["findings"][1].sources == [Source("https://1")]

        copy = thread()
        await saver.acopy_thread(
            config["configurable"]["thread_id"], copy["configurable"]["thread_id"]
        )
        assert (await graph.aget_state(copy)).values == expected
        history = [s async for s in graph.aget_state_history(copy)]
        assert len(history) == 6

        await saver.adelete_for_runs([first_run])
        left = [s async for s in graph.aget_state_history(config)]
        assert {s.metadata["run_id"] for s in left if s.metadata} == {second_run}
        assert (await graph.aget_state(config)).values == expected

        await saver.aprune([copy["configurable"]["thread_id"]])
        pruned = [s async for s in graph.aget_state_history(copy)]
        assert len(pruned) == 1
        assert pruned[0].values == expected
        more = await graph.ainvoke({"findings": []}, copy)
        assert [f.claim for f in more["findings"]] == ["c0", "c1", "c2"]
