"""An OpenAI Agents SDK support desk run durably; killed by test_openai_agents_crash.py.

Two turns: a triage agent hands the customer off to billing, which calls two
tools (each counting its side effect); then the customer asks a follow-up, which
a closing agent answers from the whole history.
The model is the simulator named by LLM_BASE_URL.
"""

from __future__ import annotations

import asyncio
import os
import sys

from agents import Agent, RunConfig, function_tool, set_tracing_disabled
from agents.items import TResponseInputItem
from agents.models.openai_provider import OpenAIProvider
from openai import AsyncOpenAI

from resumable import Engine, workflow
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
closing_agent = Agent(
    name="closing",
    instructions="Confirm what was done, in one sentence.",
    model="gpt-4o-mini",
)
triage_agent = Agent(
    name="triage",
    instructions="Route refunds: call transfer_to_billing.",
    handoffs=[billing_agent],
    model="gpt-4o-mini",
)


def client() -> AsyncOpenAI:
    return AsyncOpenAI(base_url=os.environ["LLM_BASE_URL"] + "/v1", api_key="sk-test")


def run_config(openai: AsyncOpenAI) -> RunConfig:
    return RunConfig(model_provider=OpenAIProvider(openai_client=openai))


@workflow(name="crash.openai_agents.support")
async def support(question: str, follow_up: str) -> list[str]:
    async with client() as openai:
        config = run_config(openai)
        first = await Runner.run(triage_agent, question, run_config=config)
        question_2: TResponseInputItem = {"role": "user", "content": follow_up}
        history = [*first.to_input_list(), question_2]
        second = await Runner.run(closing_agent, history, run_config=config)
    return [str(first.final_output), str(second.final_output)]


def note(line: str) -> None:
    """Count a side effect in the file EFFECTS_LOG names (outside crash_test too)."""
    path = os.environ.get("EFFECTS_LOG")
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{line}\n".encode())
        finally:
            os.close(fd)


@function_tool(needs_approval=True)
def refund_with_approval(invoice: str) -> str:
    """Refund an invoice, once a person approved it."""
    note("refund")
    return f"refunded {invoice}"


approving_agent = Agent(
    name="refunds",
    instructions="Call refund_with_approval for the invoice the customer names.",
    tools=[refund_with_approval],
    model="gpt-4o-mini",
)


@workflow(name="crash.openai_agents.approval")
async def refund(question: str) -> str:
    async with client() as openai:
        result = await Runner.run(
            approving_agent, question, run_config=run_config(openai)
        )
    return str(result.final_output)


if __name__ == "__main__":
    db, run_id = sys.argv[1], sys.argv[2]

    async def until_waiting() -> None:
        engine = Engine(f"sqlite:///{db}")
        await engine.start(refund, "Please refund INV-7", run_id=run_id)
        while (await engine.get(run_id)).status != "waiting":
            await asyncio.sleep(0.01)
        await engine.close()

    asyncio.run(until_waiting())  # then the process exits, holding nothing
