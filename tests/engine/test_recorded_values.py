"""`now()`, `uuid4()`, `random()`: recorded in the journal, replayed on resume."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

import resumable
from resumable import Engine, step, workflow

seen: list[tuple[Any, ...]] = []
crash = [True]


class Crash(BaseException):
    """Escapes the engine like the process dying: nothing is recorded for it."""


def draw() -> tuple[datetime, uuid.UUID, float]:
    return resumable.now(), resumable.uuid4(), resumable.random()


@step
async def crash_once(key: str) -> str:
    if crash[0]:
        raise Crash
    return key


@step
def crash_once_def(key: str) -> str:
    if crash[0]:
        raise Crash
    return key


@workflow
async def drawing() -> tuple[Any, ...]:
    values = draw()
    seen.append(values)
    await crash_once(str(values[1]))  # the UUID as an idempotency key
    return values


@workflow
def drawing_def() -> tuple[Any, ...]:
    values = draw()
    seen.append(values)
    crash_once_def(str(values[1]))
    return values


@step
async def draws_in_a_step() -> str:
    return str(resumable.uuid4())


@workflow
async def drawing_in_a_step() -> str:
    return await draws_in_a_step()


@pytest.fixture(autouse=True)
def _fresh() -> None:
    seen.clear()
    crash[0] = True


@pytest.mark.parametrize("wf", [drawing, drawing_def], ids=["async", "def"])
async def test_a_resumed_run_gets_the_values_its_first_execution_drew(
    engine: Engine, wf: Any
) -> None:
    with pytest.raises(Crash):
        await engine.run(wf, run_id="r")
    crash[0] = False
    result = await engine.run(wf, run_id="r")

    first, second = seen
    assert first == second == tuple(result)
    when, key, number = first
    assert when.tzinfo is UTC
    assert isinstance(key, uuid.UUID)
    assert 0 <= number < 1
    names = [view.name for view in await engine.history("r")]
    assert names[:3] == ["resumable.now", "resumable.uuid4", "resumable.random"]


async def test_two_runs_draw_their_own_values(engine: Engine) -> None:
    crash[0] = False
    one = await engine.run(drawing, run_id="one")
    two = await engine.run(drawing, run_id="two")
    assert one[1] != two[1]


async def test_outside_a_workflow_body_they_are_the_plain_functions(
    engine: Engine,
) -> None:
    assert resumable.now().tzinfo is UTC
    assert resumable.uuid4() != resumable.uuid4()
    assert 0 <= resumable.random() < 1
    await engine.run(drawing_in_a_step, run_id="r")  # a step's result is recorded
    assert [view.name for view in await engine.history("r")] != []
    assert all(
        not view.name.startswith("resumable.") for view in await engine.history("r")
    )
