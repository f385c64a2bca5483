"""An OpenAI Agents SDK support desk, killed half-way and resumed.

A triage agent hands a refund request off to a billing agent, which looks the
invoice up and issues the refund (two function tools), then answers. The only
change to an ordinary Agents SDK program is the import of `Runner`: inside a
@workflow, every model response and every tool call is a step, committed to the
store before the agent goes on. Kill the process anywhere and run it again: what
finished replays from the store (no model call, no tool call), the rest executes.

    python examples/openai_agents.py --crash   # killed right after the refund
    python examples/openai_agents.py           # resumed: one model call left

Needs `pip install 'resumable[openai-agents]'`. The model is resumable's simulated
provider, started in this process: a real HTTP
server speaking the OpenAI API, so no key and no cost. Set OPENAI_BASE_URL and
OPENAI_API_KEY to use a real provider instead. The store is $RESUMABLE_STORE
(default: the SQLite file ./.resumable/state.db).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from typing import Any

try:  # the framework is an extra: say which, rather than a traceback
    from agents import Agent, RunHooks, Tool, function_tool, set_tracing_disabled
except ImportError:
    sys.exit(
        "this example needs the OpenAI Agents SDK: pip install 'resumable[openai-agents]'"
    )

from resumable import Engine, RunNotFound, workflow

# the one-line change; it was: from agents import Runner
from resumable.integrations.openai_agents import Runner
from resumable.simulator import SimulatedProvider

STORE = os.environ.get("RESUMABLE_STORE", "sqlite:///.resumable/state.db")
RUN_ID = "refund-ada"  # the same id on every run of this program: that is what resumes
QUESTION = "Ada here: please refund my last invoice."
CRASH = "--crash" in sys.argv


@function_tool
def lookup_invoice(customer: str) -> str:
    """Find the customer's latest invoice."""
    print(f"  executed  tool lookup_invoice({customer!r})")
    return "INV-7, $30"


@function_tool
def issue_refund(invoice: str) -> str:
    """Refund an invoice. The side effect that must not happen twice."""
    print(f"  executed  tool issue_refund({invoice!r})")
    return "refunded INV-7"


class CrashAfterRefund(RunHooks[Any]):
    """--crash: kill the process once the refund's result is committed."""

    async def on_tool_end(
        self, context: Any, agent: Agent[Any], tool: Tool, result: object
    ) -> None:
        """After the tool's step committed: the refund is in the store."""
        # stands in for an OOM kill, a deploy, a laptop lid closing
        if CRASH and tool.name == "issue_refund":
            print(
                "  CRASH     killed now (SIGKILL); run me again without --crash",
                flush=True,
            )
            os.kill(os.getpid(), signal.SIGKILL)


billing = Agent(
    name="billing",
    instructions="First call lookup_invoice, then call issue_refund.",
    tools=[lookup_invoice, issue_refund],
    model="gpt-5-mini",
)
triage = Agent(
    name="triage",
    instructions="For refunds call transfer_to_billing.",
    handoffs=[billing],
    model="gpt-5-mini",
)


@workflow(name="examples.openai_agents")
async def support(question: str) -> str:
    """The agents, run durably: the one-line change is the Runner import."""
    result = await Runner.run(triage, question, hooks=CrashAfterRefund())
    return str(result.final_output)


async def main() -> None:
    async with Engine(STORE) as engine:
        finished_before = await has_finished(engine, RUN_ID)
        print(f"run {RUN_ID}: {QUESTION!r}")
        answer = await engine.run(support, QUESTION, run_id=RUN_ID)
        print(f"answer: {answer}")
        if finished_before:
            print(
                "this process: nothing executed; the run had finished, this is its answer"
            )
            return
        steps = ", ".join(s.name for s in await engine.history(RUN_ID))
        print(f"steps: {steps}")
        spent = (await engine.ledger(RUN_ID)).executions[-1]
        print(
            f"this process: replayed {plural(spent.replayed_steps, 'finished step')} "
            f"from the store ({plural(spent.reused.calls, 'model call')} not paid again), "
            f"made {plural(spent.incurred.calls, 'new model call')}"
        )


async def has_finished(engine: Engine, run_id: str) -> bool:
    try:
        return (await engine.get(run_id)).status == "succeeded"
    except RunNotFound:
        return False


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


if __name__ == "__main__":
    set_tracing_disabled(True)  # the SDK's tracing would post spans to OpenAI
    with contextlib.ExitStack() as stack:
        if (
            "OPENAI_BASE_URL" not in os.environ
        ):  # no provider set: serve the simulated one
            provider = stack.enter_context(SimulatedProvider())
            os.environ["OPENAI_BASE_URL"] = provider.openai_base_url
            os.environ.setdefault("OPENAI_API_KEY", "sk-simulated")
        asyncio.run(main())
