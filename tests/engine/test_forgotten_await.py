"""A forgotten `await`: a coroutine where a value belongs is refused, naming the step."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from resumable import Engine, step, workflow
from resumable.errors import SerializationError

ran: list[str] = []


@step
async def fetch(doc: str) -> str:
    ran.append(f"fetch {doc}")
    return doc.upper()


@step
async def summarize(text: Any) -> str:
    ran.append("summarize")
    return str(text)


@step
async def forgets_inside() -> Any:
    return fetch("c")  # outside a run's workflow body: a plain coroutine


@workflow
async def passes_a_coroutine() -> str:
    return await summarize(fetch("a"))  # missing: await fetch("a")


@workflow
async def passes_a_list_of_them() -> str:
    return await summarize(text=[fetch("a"), fetch("b")])


@workflow
async def step_returns_one() -> Any:
    return await forgets_inside()


@workflow
async def returns_one() -> Any:
    return fetch("d")


@pytest.fixture(autouse=True)
def _no_step_ran_yet() -> None:
    ran.clear()


def refused(caught: pytest.ExceptionInfo[SerializationError]) -> str:
    gc.collect()  # a coroutine left unclosed would warn (an error here) now
    return str(caught.value)


async def test_a_coroutine_passed_to_a_step_names_the_step_and_the_missing_await(
    engine: Engine,
) -> None:
    with pytest.raises(SerializationError) as caught:
        await engine.run(passes_a_coroutine, run_id="r")
    message = refused(caught)
    assert "summarize" in (caught.value.step or "")
    assert caught.value.path == "args[0]"
    assert "a call to step" in message
    assert "fetch" in message
    assert "`await`" in message
    assert ran == []  # neither the step given a coroutine nor the one never awaited
    assert (await engine.get("r")).status == "failed"


async def test_a_list_of_coroutines_passed_to_a_step_is_refused(engine: Engine) -> None:
    with pytest.raises(SerializationError) as caught:
        await engine.run(passes_a_list_of_them, run_id="r")
    assert "`await`" in refused(caught)
    assert caught.value.path == "kwargs['text'][0]"
    assert ran == []


async def test_a_coroutine_returned_by_a_step_is_refused_not_recorded(
    engine: Engine,
) -> None:
    with pytest.raises(SerializationError) as caught:
        await engine.run(step_returns_one, run_id="r")
    assert "forgets_inside" in (caught.value.step or "")
    assert "`await`" in refused(caught)
    assert await engine.history("r") == []


async def test_a_coroutine_returned_by_the_workflow_is_refused(engine: Engine) -> None:
    with pytest.raises(SerializationError) as caught:
        await engine.run(returns_one, run_id="r")
    assert caught.value.path == "result"
    assert "`await`" in refused(caught)
    assert (await engine.get("r")).status == "failed"
