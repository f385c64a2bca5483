"""An OpenAI Agents SDK support desk run durably; killed by test_openai_agents_crash.py.

Two turns: a triage agent hands the customer off to billing, which calls two
tools (each counting its side effect); then the customer asks a follow-up.
The model is the simulator named by LLM_BASE_URL.
"""

from __future__ import annotations

import os

from agents import Agent, RunConfig, function_tool, set_tracing_disabled
from agents.models.openai_provider import OpenAIProvider
from openai import AsyncOpenAI

from resumable import workflow
from resumable.integrations.openai_agents import Runner
from resumable.testing import record_effect

set_tracing_disabled(True)


@function_tool
def lookup_invoice(customer: str) -> str:
    """Find the customer's latest invoice."""
    record_effect("lookup_invoice")
    return f"invoice INV-7 for {customer}: $30"


@function_tool
def issue_refund(invoice: str) -> str:
    """Refund an invoice."""
    record_effect("issue_refund")
    return f"refunded {invoice}"


billing_agent = Agent(
    name="billing",
    instructions="First call lookup_invoice, then call issue_refund.",
    tools=[lookup_invoice, issue_refund],
    model="gpt-4o-mini",
)
triage_agent = Agent(
    name="triage",
    instructions="Route refunds: call transfer_to_billing.",
    handoffs=[billing_agent],
    model="gpt-4o-mini",
)


def run_config() -> RunConfig:
    client = AsyncOpenAI(base_url=os.environ["LLM_BASE_URL"] + "/v1", api_key="sk-test")
    return RunConfig(model_provider=OpenAIProvider(openai_client=client))


@workflow(name="crash.openai_agents.support")
async def support(question: str, follow_up: str) -> list[str]:
    config = run_config()
    first = await Runner.run(triage_agent, question, run_config=config)
    history = first.to_input_list() + [{"role": "user", "content": follow_up}]
    second = await Runner.run(first.last_agent, history, run_config=config)
    return [str(first.final_output), str(second.final_output)]
