"""Multi-agent and human-in-the-loop workflows run in child processes by test_agents.py."""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass

from resumable import Engine, step, wait_for, workflow

HANG = os.environ.get("HANG_AGENT", "")


def note(line: str) -> None:
    fd = os.open(os.environ["EFFECTS_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


@step
async def research(agent: str, part: int) -> str:
    note(f"start {agent} {part}")
    if agent == HANG and part == 2:
        await asyncio.sleep(3600)  # killed here
    await asyncio.sleep(0.01)
    note(f"end {agent} {part}")
    return f"{agent}-{part}"


@dataclass
class Findings:
    """Named only by the agent's annotation: a resumed team decodes it all the same."""

    agent: str
    parts: list[str]


@workflow(name="crash.agent")
async def agent(name: str) -> Findings:
    return Findings(name, [await research(name, part) for part in range(3)])


@workflow(name="crash.team")
async def team() -> list[str]:
    found = await asyncio.gather(agent("fast"), agent("slow"), agent("other"))
    return ["+".join(findings.parts) for findings in found]


@step
async def draft() -> str:
    note("draft")
    return "draft"


@workflow(name="crash.review")
async def review() -> str:
    text = await draft()
    verdict = await wait_for("verdict")
    return f"{text}: {verdict}"


if __name__ == "__main__":
    mode, db = sys.argv[1], sys.argv[2]
    engine = Engine(f"sqlite:///{db}")
    if mode == "team":
        engine.run_sync(team, run_id="team")
    else:

        async def until_waiting() -> None:
            await engine.start(review, run_id="review")
            while (await engine.get("review")).status != "waiting":
                await asyncio.sleep(0.01)

        asyncio.run(until_waiting())  # then the process exits, holding nothing
