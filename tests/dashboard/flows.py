"""Workflows the dashboard tests run, in this process and in a child that crashes."""

from __future__ import annotations

import asyncio
import os
import sys

from resumable import Engine, Retry, sleep, step, wait_for, workflow

LEASE_TTL_S = 0.3
HOSTILE = "<script>window.__pwned = 1</script><img src=x onerror='window.__pwned=2'>"


@step
async def fetch(n: int) -> dict[str, object]:
    return {"n": n, "text": f"doc {n}"}


@step
async def summarize(n: int) -> str:
    if os.environ.get("CRASH_AT_SUMMARY") == "1":
        os._exit(137)  # dies mid-step, as a SIGKILL or OOM would: nothing committed
    return f"summary {n}"


@workflow
async def pipeline(n: int) -> str:
    await fetch(n)
    await fetch(n + 1)
    return await summarize(n)


@step
async def hostile_step() -> str:
    return HOSTILE


@step
async def explode(reason: str) -> None:
    raise ValueError(reason)


@workflow
async def failing(reason: str) -> str:
    await hostile_step()
    await explode(reason)
    return "never"


@workflow
async def approval(doc: str) -> str:
    await fetch(1)
    answer = await wait_for("approval")
    return f"{doc}: {answer}"


def crash_in_child(url: str, run_id: str) -> None:
    """Entry point of the child process: run `pipeline` until it dies in step 3."""
    os.environ["CRASH_AT_SUMMARY"] = "1"

    async def main() -> None:
        async with Engine(url, lease_ttl_s=LEASE_TTL_S) as engine:
            await engine.run(pipeline, 7, run_id=run_id)

    asyncio.run(main())
    sys.exit("the step should have killed the process")


@step
async def middle(url: str, run_id: str) -> str:
    """In the crashing child: dies once the steps gathered beside it are committed."""
    if os.environ.get("CRASH_AT_SUMMARY") == "1":
        async with Engine(url) as reader:
            while len(await reader.history(run_id)) < 2:
                await asyncio.sleep(0.01)
        os._exit(137)
    return "middle"


@workflow
async def fan_out(url: str, run_id: str) -> list[object]:
    """Three steps at once: the middle one (seq 2) may die after 1 and 3 commit."""
    return list(await asyncio.gather(fetch(1), middle(url, run_id), fetch(3)))


def crash_fan_out_in_child(url: str, run_id: str) -> None:
    """Entry point of the child process: run `fan_out` until its middle step dies."""
    os.environ["CRASH_AT_SUMMARY"] = "1"

    async def main() -> None:
        async with Engine(url, lease_ttl_s=LEASE_TTL_S) as engine:
            await engine.run(fan_out, url, run_id, run_id=run_id)

    asyncio.run(main())
    sys.exit("the step should have killed the process")


@workflow
async def replay_then_wait(doc: str) -> str:
    await fetch(1)
    await fetch(2)
    first = await wait_for("first")
    second = await wait_for("second")
    return f"{doc}: {await summarize(len(first + second))}"


FLAKY_FAILURES: dict[str, int] = {}


@step(retry=Retry(attempts=3, initial_delay=0.05, jitter=0.0, on=(ConnectionError,)))
async def flaky(name: str, failures: int) -> str:
    """Fails `failures` times per name, then succeeds."""
    seen = FLAKY_FAILURES.get(name, 0)
    FLAKY_FAILURES[name] = seen + 1
    if seen < failures:
        raise ConnectionError(f"attempt {seen + 1} of {name} refused")
    return f"{name} ok"


@workflow
async def patient(name: str) -> str:
    """Retries a step, sleeps durably, then waits for an input."""
    await flaky(name, 2)
    await sleep(0.05)
    answer = await wait_for("approval")
    return f"{name}: {answer}"


@step(
    retry=Retry(
        attempts=2,
        initial_delay=3600,
        max_delay=3600,
        jitter=0.0,
        on=(ConnectionError,),
    )
)
async def refused() -> str:
    raise ConnectionError("the provider is down")


@workflow
async def backing_off() -> str:
    return await refused()


@workflow
async def agent(topic: str) -> str:
    return str((await fetch(len(topic)))["text"])


@workflow
async def team(topic: str) -> str:
    await fetch(0)
    return await agent(topic)
