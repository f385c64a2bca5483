"""One workflow, `ver.flow`, in code v1 and its v2 variants (chosen by $FLOWS_VARIANT).

Every step appends `<step> <args>` to $FLOWS_LOG (one write per line), so a test
can prove what executed. Used in-process by the tests and as `--app flows` by
subprocesses (`python flows.py seed|resume|start DB ...`).

v1, per `mode` (the second argument):
    [wait_for("start") if mode == "early"]
    fetch(doc) · clean(text) · summarize(text, prompt=LONG)
    gather(score(s, "x"), score(s, "y"))
    [wait_for("approval") if mode == "wait"] [sleep(1.5) if mode == "sleep"]
    publish(s)

Variants: prompt (step 3's prompt is SHORT), insert (audit() after the gather),
remove (no clean()), reorder (gather y before x), rename (summarize is recorded
as "summarise"), patched (SHORT behind `patched("short-prompt")`), deprecated
(the patch deprecated: always SHORT).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from resumable import (
    Engine,
    WorkflowFailed,
    deprecate_patch,
    patched,
    sleep,
    step,
    wait_for,
    workflow,
)

VARIANT = os.environ.get("FLOWS_VARIANT", "v1")
LOG = os.environ.get("FLOWS_LOG", os.devnull)
HANG = os.environ.get("FLOWS_HANG") == "1"  # score("x") of mode "hang" never ends
FAIL = os.environ.get("FLOWS_FAIL") == "1"  # score("y") of mode "fail" raises
LONG = "Summarize the text in detail."
SHORT = "Summarize in one line."
WORKFLOW = "ver.flow"
MODES = ("done", "early", "wait", "sleep", "fail", "hang", "queued")


def note(line: str) -> None:
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


@step(name="fetch")
async def fetch(doc: str) -> str:
    note(f"fetch {doc}")
    return f"text of {doc}"


@step(name="clean")
async def clean(text: str) -> str:
    note("clean")
    return text.upper()


@step(name="summarise" if VARIANT == "rename" else "summarize")
async def summarize(text: str, prompt: str) -> str:
    note(f"summarize {prompt}")
    return f"{prompt} -> {text[:20]}"


@step(name="score")
async def score(summary: str, axis: str, mode: str) -> int:
    note(f"score {axis}")
    if mode == "hang" and HANG and axis == "x":
        await asyncio.sleep(3600)
    if mode == "fail" and FAIL and axis == "y":
        raise ValueError("the scorer is down")
    return len(summary) + len(axis)


@step(name="audit")
async def audit(summary: str) -> str:
    note("audit")
    return "audited"


@step(name="publish")
async def publish(summary: str) -> str:
    note("publish")
    return f"published: {summary}"


async def _summary(text: str) -> str:
    if VARIANT in ("prompt", "deprecated"):
        if VARIANT == "deprecated":
            deprecate_patch("short-prompt")
        return await summarize(text, prompt=SHORT)
    if VARIANT == "patched":
        if await patched("short-prompt"):
            return await summarize(text, prompt=SHORT)
        return await summarize(text, prompt=LONG)
    return await summarize(text, prompt=LONG)


@workflow(name=WORKFLOW)
async def flow(doc: str, mode: str) -> str:
    if mode == "early":
        await wait_for("start")
    text = await fetch(doc)
    if VARIANT != "remove":
        text = await clean(text)
    summary = await _summary(text)
    if VARIANT == "reorder":
        await asyncio.gather(score(summary, "y", mode), score(summary, "x", mode))
    else:
        await asyncio.gather(score(summary, "x", mode), score(summary, "y", mode))
    if VARIANT == "insert":
        await audit(summary)
    if mode == "wait":
        await wait_for("approval")
    elif mode == "sleep":
        await sleep(1.5)
    return await publish(summary)


# --- subprocess entry points -----------------------------------------------------
async def seed(db: str) -> None:
    """Leave one v1 run in every state; the process kills itself mid-gather last."""
    engine = Engine(f"sqlite:///{db}")
    await engine.run(flow, "doc-done", "done", run_id="done")
    await engine.enqueue(flow, "doc-queued", "queued", run_id="queued")
    for mode, status in (
        ("early", "waiting"),
        ("wait", "waiting"),
        ("sleep", "sleeping"),
    ):
        await engine.start(flow, f"doc-{mode}", mode, run_id=mode)
        await _until(engine, mode, lambda run, s=status: run.status == s)
    with contextlib.suppress(WorkflowFailed):  # the failed run is what we want
        await engine.run(flow, "doc-fail", "fail", run_id="fail")
    await engine.start(flow, "doc-hang", "hang", run_id="hang")
    await _until_journal(engine, "hang", 5)  # score("y") committed, score("x") hangs
    os.kill(os.getpid(), signal.SIGKILL)


async def _until(engine: Engine, run_id: str, ok: Any) -> None:
    for _ in range(2000):
        if ok(await engine.get(run_id)):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id} never got there")


async def _until_journal(engine: Engine, run_id: str, seq: int) -> None:
    for _ in range(2000):
        if any(s.seq == seq for s in await engine.history(run_id)):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id} never recorded seq {seq}")


async def resume(db: str, run_ids: list[str]) -> dict[str, str]:
    """Resume each run on this process's code; `ok: <result>` or `<Error>: <msg>`."""
    engine = Engine(f"sqlite:///{db}")
    outcomes: dict[str, str] = {}
    for run_id in run_ids:
        if run_id == "early":
            await engine.send(run_id, "start", True)
        if run_id == "wait":
            await engine.send(run_id, "approval", True)
        try:
            outcomes[run_id] = "ok: " + str(
                await asyncio.wait_for(engine.resume(run_id), 30)
            )
        except Exception as exc:  # noqa: BLE001 - the outcome is the report
            outcomes[run_id] = f"{type(exc).__name__}: {exc}"
    await engine.close()
    return outcomes


def main() -> None:
    command, db = sys.argv[1], sys.argv[2]
    if command == "seed":
        asyncio.run(seed(db))
    elif command == "resume":
        sys.stdout.write(json.dumps(asyncio.run(resume(db, sys.argv[3:]))) + "\n")
    elif command == "run":  # run_id doc mode
        engine = Engine(f"sqlite:///{db}")
        run_id, doc, mode = sys.argv[3:6]
        result = engine.run_sync(flow, doc, mode, run_id=run_id)
        sys.stdout.write(json.dumps({"result": result}) + "\n")
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
