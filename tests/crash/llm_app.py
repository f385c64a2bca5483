"""A 200-item LLM batch over both SDKs, run in a child process by test_llm_batch.py."""

from __future__ import annotations

import os
import sys

import anthropic
import openai
from anthropic.types import Message
from openai.types.chat import ChatCompletion

from resumable import Engine, Retry, map_steps, step, workflow

TRANSIENT = (
    openai.RateLimitError,
    openai.InternalServerError,
    anthropic.RateLimitError,
    anthropic.InternalServerError,
)


@step(
    name="ask", retry=Retry(attempts=8, initial_delay=0.05, max_delay=0.5, on=TRANSIENT)
)
async def ask(item: dict[str, str]) -> ChatCompletion | Message:
    base = os.environ["LLM_BASE_URL"]
    prompt = f"Classify item {item['id']}: {item['text']}"
    if item["provider"] == "openai":
        async with openai.AsyncOpenAI(
            base_url=f"{base}/v1", api_key="sk-test", max_retries=0
        ) as client:
            return await client.chat.completions.create(
                model="gpt-5-mini", messages=[{"role": "user", "content": prompt}]
            )
    async with anthropic.AsyncAnthropic(
        base_url=base, api_key="x", max_retries=0
    ) as client:
        return await client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=64,
            messages=[{"role": "user", "content": prompt}],
        )


def items() -> list[dict[str, str]]:
    return [
        {
            "id": f"item-{n:03d}",
            "text": f"ticket {n} about invoices" * (1 + n % 3),
            "provider": "openai" if n % 2 else "anthropic",
        }
        for n in range(200)
    ]


@workflow(name="crash.llm-batch")
async def classify() -> int:
    results = await map_steps(
        ask, items(), key=lambda i: i["id"], concurrency=8, progress=False
    )
    return len(results)


if __name__ == "__main__":
    engine = Engine(f"sqlite:///{sys.argv[1]}")
    engine.run_sync(classify, run_id="batch")
