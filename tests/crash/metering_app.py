"""Steps that return text, a parsed object, a streamed text and nothing, through the
real SDKs; run in a child process by test_metering_sigkill.py.

`python metering_app.py DB SDK,SDK... RUN_ID`; with PAUSE_FILE set, the step between
the two rounds creates that file and blocks (no call in flight), to be killed.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import anthropic
import openai
from pydantic import BaseModel

from resumable import Engine, step, workflow


class Answer(BaseModel):
    summary: str
    confidence: int


def _openai(*, sync: bool = False) -> Any:
    url = os.environ["LLM_BASE_URL"] + "/v1"
    if sync:
        return openai.OpenAI(base_url=url, api_key="sk-test", max_retries=0)
    return openai.AsyncOpenAI(base_url=url, api_key="sk-test", max_retries=0)


def _messages(topic: str) -> Any:
    return [{"role": "user", "content": f"summarize the history of {topic}"}]


@step
async def openai_text(topic: str) -> str:
    async with _openai() as client:
        r = await client.chat.completions.create(
            model="gpt-4o-mini", messages=_messages(topic)
        )
    return str(r.choices[0].message.content)


@step
async def openai_parsed(topic: str) -> Answer:
    client = _openai(sync=True)
    r = await asyncio.to_thread(  # a sync client, in a thread of the step
        client.chat.completions.parse,
        model="gpt-4o-mini",
        messages=_messages(topic),
        response_format=Answer,
    )
    parsed = r.choices[0].message.parsed
    assert isinstance(parsed, Answer)
    return parsed


@step
async def openai_streamed(topic: str) -> str:
    client = _openai()
    stream = await client.chat.completions.create(
        model="gpt-4o-mini",
        messages=_messages(topic),
        stream=True,
        stream_options={"include_usage": True},
    )
    parts = [c.choices[0].delta.content or "" async for c in stream if c.choices]
    return "".join(parts)


@step
async def openai_nothing(topic: str) -> None:
    client = _openai()
    await client.responses.create(model="gpt-4o-mini", input=f"note {topic}")


def _anthropic_url() -> str:
    return os.environ["LLM_BASE_URL"]


@step
async def anthropic_text(topic: str) -> str:
    client: Any = anthropic.AsyncAnthropic(
        base_url=_anthropic_url(), api_key="x", max_retries=0
    )
    r = await client.messages.create(
        model="claude-haiku-4-5",
        max_tokens=200,
        messages=_messages(topic),
    )
    block = r.content[0]
    return block.text if block.type == "text" else ""


@step
async def anthropic_parsed(topic: str) -> Answer:
    client: Any = anthropic.Anthropic(
        base_url=_anthropic_url(), api_key="x", max_retries=0
    )
    r = await asyncio.to_thread(
        client.messages.create,
        model="claude-haiku-4-5",
        max_tokens=200,
        messages=_messages(topic),
    )
    block = r.content[0]
    text = block.text if block.type == "text" else ""
    return Answer(summary=text, confidence=len(text) % 10)


@step
async def anthropic_streamed(topic: str) -> str:
    client: Any = anthropic.AsyncAnthropic(
        base_url=_anthropic_url(), api_key="x", max_retries=0
    )
    async with client.messages.stream(
        model="claude-haiku-4-5",
        max_tokens=200,
        messages=_messages(topic),
    ) as stream:
        text: str = await stream.get_final_text()
    return text


@step
async def anthropic_nothing(topic: str) -> None:
    client: Any = anthropic.Anthropic(
        base_url=_anthropic_url(), api_key="x", max_retries=0
    )
    with client.messages.stream(
        model="claude-haiku-4-5",
        max_tokens=200,
        messages=_messages(topic),
    ) as stream:
        for _ in stream.text_stream:
            pass


def _chat_openai(**options: Any) -> Any:
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    return ChatOpenAI(
        model="gpt-4o-mini",
        base_url=os.environ["LLM_BASE_URL"] + "/v1",
        api_key=SecretStr("sk-test"),
        max_retries=0,
        **options,
    )


@step
async def langchain_text(topic: str) -> str:
    llm = _chat_openai()
    return str((await llm.ainvoke(_messages(topic)[0]["content"])).content)


@step
async def langchain_parsed(topic: str) -> Answer:
    llm = _chat_openai()
    structured = llm.with_structured_output(Answer, method="json_schema")
    result = await asyncio.to_thread(structured.invoke, _messages(topic)[0]["content"])
    assert isinstance(result, Answer)
    return result


@step
async def langchain_streamed(topic: str) -> str:
    llm = _chat_openai(stream_usage=True)
    parts = [str(c.content) async for c in llm.astream(_messages(topic)[0]["content"])]
    return "".join(parts)


@step
async def langchain_nothing(topic: str) -> None:
    llm = _chat_openai()
    await asyncio.to_thread(llm.invoke, f"note {topic}")


@step
async def pause() -> None:
    """Between the rounds: blocks (no call in flight) while PAUSE_FILE is set."""
    marker = os.environ.get("PAUSE_FILE")
    if marker:
        Path(marker).touch()
        while True:
            time.sleep(0.05)  # killed here


STEPS = {
    "openai": (openai_text, openai_parsed, openai_streamed, openai_nothing),
    "anthropic": (
        anthropic_text,
        anthropic_parsed,
        anthropic_streamed,
        anthropic_nothing,
    ),
    "langchain": (
        langchain_text,
        langchain_parsed,
        langchain_streamed,
        langchain_nothing,
    ),
}


@workflow(name="crash.metering")
async def two_rounds(sdks: list[str]) -> int:
    for topic in ("tea", "paper"):
        for sdk in sdks:
            for number, ask in enumerate(STEPS[sdk]):
                await ask(f"{topic}, part {number}")
        if topic == "tea":
            await pause()
    return 8 * len(sdks)


if __name__ == "__main__":
    # a short lease: the resumed process takes the killed one's run over quickly
    engine = Engine(f"sqlite:///{sys.argv[1]}", lease_ttl_s=0.5)
    engine.run_sync(two_rounds, sys.argv[2].split(","), run_id=sys.argv[3])
