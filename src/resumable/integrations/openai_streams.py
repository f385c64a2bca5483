"""`stream_chat`: an OpenAI chat completion streamed as text, for a streaming step.

```python
@step
async def answer(question: str) -> AsyncIterator[str]:
    async for text in resumable.stream_chat(
        client, model="gpt-4o-mini", messages=[{"role": "user", "content": question}]
    ):
        yield text
```

Each piece of text the model sends is yielded as it arrives; the step streams it
to the run's feed (`Engine.stream`), and its journaled value is the whole answer.
The SDK is the caller's: nothing here imports `openai`, and the call is metered
like any other made in a step.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any


async def stream_chat(client: Any, /, **create: Any) -> AsyncIterator[str]:
    """Yield the text of `client.chat.completions.create(**create, stream=True)`.

    Args:
        client: An `openai.AsyncOpenAI` (or a client with its interface).
        **create: The arguments of `chat.completions.create`; `stream` is set.
            `stream_options={"include_usage": True}` is added unless given, so
            the call's tokens reach the run's ledger.
    """
    create.setdefault("stream_options", {"include_usage": True})
    stream = await client.chat.completions.create(**create, stream=True)
    async for chunk in stream:
        for choice in chunk.choices or ():
            text = choice.delta.content if choice.delta is not None else None
            if text:
                yield text
