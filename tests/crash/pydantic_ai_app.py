"""A Pydantic AI agent with two tools, run in a workflow that crash tests kill.

The simulated provider's address comes from $SIM_URL (the test starts it), so
every child process of `crash_test` talks to the same provider and its request
log counts every model call of every process.
"""

from __future__ import annotations

import functools
import os

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from resumable import workflow
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
