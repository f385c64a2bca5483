"""A Pydantic AI agent made durable with one line, killed half-way and resumed.

`ResumableAgent(agent)` makes every model request and tool call of the agent a
step of the workflow it runs in: committed to the store before the agent goes
on, replayed from the store on resume.

    python examples/pydantic_ai_agent.py --crash   # killed right after a tool ran
    python examples/pydantic_ai_agent.py           # the same run, resumed

Needs `pip install 'resumable[pydantic-ai]'`. The model is resumable's simulated
provider, started in this process (no key, no cost); set OPENAI_BASE_URL and
OPENAI_API_KEY to use a real provider. The store is $RESUMABLE_STORE (default:
the SQLite file ./.resumable/state.db).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import sys

try:  # the framework is an extra: say which, rather than a traceback
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
except ImportError:
    sys.exit("this example needs Pydantic AI: pip install 'resumable[pydantic-ai]'")

from resumable import Engine, workflow
from resumable.integrations.pydantic_ai import ResumableAgent
from resumable.simulator import SimulatedProvider

STORE = os.environ.get("RESUMABLE_STORE", "sqlite:///.resumable/state.db")
RUN_ID = (
    "pydantic-ai-oslo"  # the same id on every run of this program: that is what resumes
)
CRASH = "--crash" in sys.argv


def find_city(place: str) -> str:
    """The city a place name means."""
    print(f"  executed  tool find_city({place!r})")
    return "Oslo"


def get_weather(city: str) -> str:
    """The current weather in a city."""
    print(f"  executed  tool get_weather({city!r})")
    if CRASH:  # stands in for an OOM kill, a deploy, a laptop lid closing
        print("  CRASH     killed now (SIGKILL); run me again without --crash")
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    return "4 °C and light rain"


@functools.cache
def forecaster() -> ResumableAgent[None, str]:
    agent = Agent(
        OpenAIChatModel("gpt-5-mini"),  # reads OPENAI_BASE_URL and OPENAI_API_KEY
        name="forecaster",
        instructions="First call find_city, then call get_weather, then answer.",
        tools=[find_city, get_weather],
    )
    return ResumableAgent(agent)  # the one-line change


@workflow(name="examples.pydantic_ai_forecast")
async def forecast(question: str) -> str:
    result = await forecaster().run(question)
    return result.output


async def main() -> None:
    engine = Engine(STORE)
    try:
        answer = await engine.run(
            forecast, "What is the weather in Oslo?", run_id=RUN_ID
        )
        ledger = await engine.ledger(RUN_ID)
    finally:
        await engine.close()
    print(f"answer: {answer}")
    print(f"model calls paid over every execution: {ledger.incurred.calls}")


if __name__ == "__main__":
    with contextlib.ExitStack() as stack:
        if (
            "OPENAI_BASE_URL" not in os.environ
        ):  # no provider set: serve the simulated one
            provider = stack.enter_context(SimulatedProvider())
            os.environ["OPENAI_BASE_URL"] = provider.openai_base_url
            os.environ.setdefault("OPENAI_API_KEY", "sk-simulated")
        asyncio.run(main())
