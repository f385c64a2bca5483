"""An agent loop on the real openai SDK, killed half-way and resumed.

The model asks for a tool, the program runs it, the model answers. Every LLM call
and every tool call is a @step: its result is committed to the store before the
loop goes on. Kill the process anywhere and run the same command again: finished
steps replay from the store (no LLM call, no tool call), the rest executes.

    python examples/agent_loop.py --crash   # killed right after the tool ran
    python examples/agent_loop.py           # the same run, resumed: one LLM call left

The model is resumable's simulated provider, started in this process: a real HTTP
server speaking the OpenAI API, so no key and no cost. Set OPENAI_BASE_URL and
OPENAI_API_KEY to use a real provider instead. The store is $RESUMABLE_STORE
(default: the SQLite file ./.resumable/state.db).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import signal
import sys
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from resumable import Engine, Retry, RunNotFound, step, workflow
from resumable.simulator import SimulatedProvider

STORE = os.environ.get("RESUMABLE_STORE", "sqlite:///.resumable/state.db")
RUN_ID = "agent-oslo"  # the same id on every run of this program: that is what resumes
QUESTION = "What is the weather in Oslo today?"
CRASH = "--crash" in sys.argv
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


@functools.cache
def llm() -> openai.AsyncOpenAI:
    # resumable retries the step (below), so the SDK's own retries are off
    return openai.AsyncOpenAI(max_retries=0)  # reads OPENAI_BASE_URL, OPENAI_API_KEY


# Retry rate limits, 5xx answers and dropped connections, honouring retry-after.
RETRY = Retry(
    attempts=5,
    initial_delay=0.5,
    on=(openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError),
)


@step(retry=RETRY)
async def call_llm(messages: list[dict[str, Any]]) -> ChatCompletion:
    """One model call; the whole response (text, tool calls, token usage) is journaled."""
    response = await llm().chat.completions.create(
        model="gpt-5-mini", messages=messages, tools=TOOLS
    )
    # A step's body runs only when the step executes, never when it replays,
    # so these lines show exactly what this process did.
    message = response.choices[0].message
    if message.tool_calls:
        asked = ", ".join(c.function.name for c in message.tool_calls)
        print(f"  executed  LLM call: the model asks for the tool {asked}")
    else:
        print("  executed  LLM call: the model answers")
    return response


@step
async def get_weather(city: str) -> str:
    """The tool. A real one would call a weather service; its answer is journaled too."""
    report = {"Oslo": "4 °C and light rain"}.get(city, "18 °C and sunny")
    print(f"  executed  tool get_weather({city!r}) -> {report!r}")
    return report


@workflow(name="examples.agent")
async def agent(question: str) -> str:
    """Call the model, run the tools it asks for, until it answers (at most 5 rounds)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    for _ in range(5):
        response = await call_llm(messages)
        message = response.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = await get_weather(**json.loads(call.function.arguments))
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": result}
            )
        if CRASH:  # stands in for an OOM kill, a deploy, a laptop lid closing
            print(
                "  CRASH     killed now (SIGKILL); run me again without --crash",
                flush=True,
            )
            os.kill(os.getpid(), signal.SIGKILL)
    raise RuntimeError("the model did not answer within 5 rounds")


async def main() -> None:
    async with Engine(STORE) as engine:
        finished_before = await has_finished(engine, RUN_ID)
        print(f"run {RUN_ID}: {QUESTION!r}")
        answer = await engine.run(agent, QUESTION, run_id=RUN_ID)
        print(f"answer: {answer}")
        if finished_before:
            print(
                "this process: nothing executed; the run had finished, this is its answer"
            )
            return
        # the ledger: what each process that worked on this run spent and reused
        spent = (await engine.ledger(RUN_ID)).executions[-1]
        print(
            f"this process: replayed {plural(spent.replayed_steps, 'finished step')} "
            f"from the store ({plural(spent.reused.calls, 'LLM call')} not paid again), "
            f"made {plural(spent.incurred.calls, 'new LLM call')}"
        )


async def has_finished(engine: Engine, run_id: str) -> bool:
    try:
        return (await engine.get(run_id)).status == "succeeded"
    except RunNotFound:
        return False


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


if __name__ == "__main__":
    with contextlib.ExitStack() as stack:
        if (
            "OPENAI_BASE_URL" not in os.environ
        ):  # no provider set: serve the simulated one
            provider = stack.enter_context(SimulatedProvider())
            os.environ["OPENAI_BASE_URL"] = provider.openai_base_url
            os.environ.setdefault("OPENAI_API_KEY", "sk-simulated")
        asyncio.run(main())
