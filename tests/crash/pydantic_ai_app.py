"""A Pydantic AI agent with two tools, run in a workflow that crash tests kill.

The simulated provider's address comes from $SIM_URL (the test starts it), so
every child process of `crash_test` talks to the same provider and its request
log counts every model call of every process.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from resumable import Engine, workflow
from resumable.integrations.pydantic_ai import ResumableAgent
from resumable.testing import record_effect

INSTRUCTIONS = "First call lookup_city, then call get_weather, then answer."


def lookup_city(name: str) -> str:
    """The city a place name means."""
    record_effect("lookup_city")
    return "Oslo"


def get_weather(city: str) -> str:
    """The weather in a city."""
    record_effect("get_weather")
    return f"sunny in {city}"


@functools.cache
def agent() -> ResumableAgent[None, str]:
    model = OpenAIChatModel(
        "gpt-4o-mini",
        provider=OpenAIProvider(base_url=os.environ["SIM_URL"], api_key="sk-test"),
    )
    return ResumableAgent(
        Agent(
            model,
            name="weather",
            instructions=INSTRUCTIONS,
            tools=[lookup_city, get_weather],
        )
    )


@workflow(name="pydantic_ai_app.forecast")
async def forecast(question: str) -> str:
    result = await agent().run(question)
    return result.output


def issue_refund(order: str) -> str:
    """Refund an order (needs a person's approval)."""
    with open(os.environ["EFFECTS_LOG"], "a", encoding="utf-8") as log:
        log.write("refund\n")
    return f"refunded {order}"


@functools.cache
def refunds() -> ResumableAgent[None, str]:
    model = OpenAIChatModel(
        "gpt-4o-mini",
        provider=OpenAIProvider(base_url=os.environ["SIM_URL"], api_key="sk-test"),
    )
    agent = Agent(model, name="refunds", instructions="Call issue_refund, then answer.")
    agent.tool_plain(requires_approval=True)(issue_refund)
    return ResumableAgent(agent)


@workflow(name="pydantic_ai_app.refund")
async def refund(order: str) -> str:
    result = await refunds().run(f"Refund order {order}")
    return result.output


if __name__ == "__main__":  # start a refund run, leave once it waits for approval
    store_url, run_id = sys.argv[1], sys.argv[2]

    async def until_waiting() -> None:
        engine = Engine(store_url)
        await engine.start(refund, "A-17", run_id=run_id)
        while (await engine.get(run_id)).status != "waiting":
            await asyncio.sleep(0.01)
        await engine.close()

    asyncio.run(until_waiting())  # then the process exits, holding nothing
