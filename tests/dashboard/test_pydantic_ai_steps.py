"""A Pydantic AI agent's run on the dashboard: model and tool steps, values readable."""

from __future__ import annotations

import openai
from playwright.sync_api import Page, expect
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from dashboard.conftest import Dashboard, call
from resumable import Engine, workflow
from resumable.integrations.pydantic_ai import ResumableAgent
from resumable.simulator import SimulatedProvider


def lookup_city(name: str) -> str:
    """The city a place name means."""
    return "Oslo"


async def run_agent(store_url: str, base_url: str) -> None:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-test")
    agent = ResumableAgent(
        Agent(
            OpenAIChatModel(
                "gpt-4o-mini", provider=OpenAIProvider(openai_client=client)
            ),
            name="finder",
            instructions="Call lookup_city.",
            tools=[lookup_city],
        )
    )

    @workflow(name="dashboard.pydantic_ai")
    async def find(question: str) -> str:
        return (await agent.run(question)).output

    engine = Engine(store_url)
    try:
        await engine.run(find, "Where?", run_id="finder-1")
    finally:
        await client.close()
        await engine.close()


def test_model_and_tool_steps_show_their_names_and_json_values(
    dashboard: Dashboard, page: Page
) -> None:
    with SimulatedProvider() as provider:
        call(run_agent(dashboard.store_url, provider.openai_base_url))
    page.goto(f"{dashboard.url}/run?id=finder-1")
    steps = page.locator("table.steps")
    expect(steps).to_contain_text("finder__model.request")
    expect(steps).to_contain_text(
        "finder__function_toolset__<agent>.call_tool:lookup_city"
    )
    expect(steps).to_contain_text('"tool_name": "lookup_city"')  # the model's call
    expect(steps).to_contain_text('"result": "Oslo"')  # the tool's return
