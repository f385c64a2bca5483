"""User-style Pydantic AI code that mypy and pyright check and that never runs."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage

from resumable import Engine, workflow
from resumable.integrations.pydantic_ai import (
    ResumableAgent,
    ResumableDurability,
    load_history,
    save_history,
)

agent: ResumableAgent[None, str] = ResumableAgent(Agent("test", name="typed"))
attached = Agent("test", name="attached", capabilities=[ResumableDurability()])


@workflow
async def chat(thread_id: str, question: str) -> str:
    result = await agent.run(question)
    answer: str = result.output
    async with agent.run_stream(question) as streamed:
        async for text in streamed.stream_text(delta=True):
            answer += text
    async with agent.iter(question) as run:
        async for _node in run:
            pass
    return answer


async def remember(engine: Engine, thread_id: str) -> None:
    history: list[ModelMessage] = await load_history(engine, thread_id)
    result = await agent.run("Next?", message_history=history)
    await save_history(engine, thread_id, result.all_messages(), label="turn")
