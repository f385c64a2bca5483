"""Workflows that publish and stream, run in a child process by the feed tests.

`python feeds_app.py URL RUN_ID publish N`: publishes 0..N-1 under "progress",
pausing between values so a reader in another process follows them live.
`python feeds_app.py URL RUN_ID stream N`: a streaming step yields N chunks from
the simulated provider (LLM_BASE_URL); with PAUSE_FILE set, after PAUSE_AT chunks
it creates that file and blocks, to be killed mid-stream; CHUNK_SLEEP_S paces it.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import openai

import resumable
from resumable import Engine, step, workflow


@workflow
async def progress(n: int) -> int:
    for i in range(n):
        await resumable.publish("progress", i)
        await asyncio.sleep(0.02)
    return n


@step
async def answer(question: str, words: int) -> AsyncIterator[str]:
    client = openai.AsyncOpenAI(
        base_url=os.environ["LLM_BASE_URL"] + "/v1", api_key="sk-test", max_retries=0
    )
    pause_file = os.environ.get("PAUSE_FILE")
    pause_at = int(os.environ.get("PAUSE_AT", "0"))
    sent = 0
    async for text in resumable.stream_chat(
        client,
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": question}],
        max_tokens=words,
    ):
        yield text
        sent += 1
        if pause_file and sent == pause_at:
            Path(pause_file).write_text("paused")
            await asyncio.sleep(3600)  # killed here, mid-stream
        await asyncio.sleep(float(os.environ.get("CHUNK_SLEEP_S", "0.005")))


@workflow
async def chat(question: str, words: int) -> str:
    return await answer(question, words)


async def main() -> None:
    url, run_id, mode, count = sys.argv[1:5]
    engine = Engine(url)
    try:
        if mode == "publish":
            await engine.run(progress, int(count), run_id=run_id)
        else:
            text = await engine.run(
                chat, "tell me about rivers", int(count), run_id=run_id
            )
            sys.stdout.write(f"{len(text)}\n")
    finally:
        await engine.close()


if __name__ == "__main__":
    asyncio.run(main())
