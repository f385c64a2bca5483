"""`resumable show` and the dashboard say what happened to a run.

A failed run's error (a step's or the workflow's own), its input and result, and
when a sleeping or waiting run wakes, as a date: the "see `resumable show`" of an
error message leads somewhere.
"""

from __future__ import annotations

import re
from pathlib import Path

from newcomer.as_a_user import dashboard, fetch, ok, python, resumable

RUNS = """
import asyncio
from resumable import Engine, step, workflow, sleep, wait_for

@step
async def fetch(x: str) -> str:
    return x.upper()

@step
async def publish(x: str) -> str:
    raise ConnectionError("the wiki is down")

@workflow
async def own_bug(topic: str) -> str:
    text = await fetch(topic)
    raise ValueError(f"bad topic {text}")

@workflow
async def step_fails(topic: str) -> str:
    return await publish(await fetch(topic))

@workflow
async def fine(topic: str) -> str:
    return await fetch(topic) + "!"

@workflow
async def napper(topic: str) -> str:
    await fetch(topic)
    await sleep(300)
    return "woke"

@workflow
async def asker(topic: str) -> str:
    await fetch(topic)
    return await wait_for("approval", timeout=600)

async def main() -> None:
    async with Engine() as engine:
        for wf, run_id in ((own_bug, "bug-1"), (step_fails, "step-1")):
            try:
                await engine.run(wf, "llm", run_id=run_id)
            except Exception as exc:
                print(exc)
        await engine.run(fine, "llm", run_id="ok-1")
        await engine.start(napper, "llm", run_id="nap-1")
        await engine.start(asker, "llm", run_id="ask-1")
        while {(await engine.get(r)).status for r in ("nap-1", "ask-1")} != {"sleeping", "waiting"}:
            await asyncio.sleep(0.01)

asyncio.run(main())
"""

_RAW_MS = re.compile(r"\b1\d{12}\b")  # a millisecond timestamp shown as a number


def test_show_and_the_dashboard_say_why_a_run_failed_what_it_got_and_when_it_wakes(
    tmp_path: Path,
) -> None:
    (tmp_path / "runs.py").write_text(RUNS)
    said = ok(python(tmp_path, "runs.py"))
    assert "see `resumable show bug-1`" in said
    assert "see `resumable show step-1`" in said

    bug = ok(resumable(tmp_path, "show", "bug-1"))
    assert (
        "error     ValueError: bad topic LLM (raised by the workflow's own code)" in bug
    )
    assert 'raise ValueError(f"bad topic {text}")' in bug  # where, from the traceback
    assert 'input     ["llm"]' in bug

    failed_step = ok(resumable(tmp_path, "show", "step-1"))
    assert "error     ConnectionError: the wiki is down (in step #2 'publish'" in (
        failed_step
    )

    assert 'result    "LLM!"' in ok(resumable(tmp_path, "show", "ok-1"))

    napping = ok(resumable(tmp_path, "show", "nap-1"))
    assert re.search(
        r"wakes     \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(in [45] min\)", napping
    )
    assert re.search(r"sleep +waiting .* until \S+ \S+ UTC \(in [45] min\)", napping)
    assert not _RAW_MS.search(napping)

    asking = ok(resumable(tmp_path, "show", "ask-1"))
    assert re.search(r"timeout   \S+ \S+ UTC \(in (9|10) min\)", asking)
    assert not _RAW_MS.search(asking)

    with dashboard(tmp_path) as base:
        pages = {r: fetch(f"{base}/run?id={r}") for r in ("bug-1", "ok-1", "nap-1")}
    assert "bad topic LLM (raised by the workflow&#x27;s own code)" in pages["bug-1"]
    assert "Result" in pages["ok-1"]
    assert "&quot;LLM!&quot;" in pages["ok-1"] or '"LLM!"' in pages["ok-1"]
    assert re.search(r"Wakes</th><td>\S+ \S+ UTC \(in [45] min\)", pages["nap-1"])
    assert not _RAW_MS.search(pages["nap-1"])
