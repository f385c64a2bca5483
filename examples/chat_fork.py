"""A chat whose history is saved after each turn, then forked back in time.

`engine.conversation(thread_id)` is a chat thread kept in the store: append
messages, `save()` after each turn, and any later process reopens it where it was.
Every save is a checkpoint you can go back to: here we fork the thread at its first
turn and ask a different follow-up, as "edit an earlier message" does in a chat app.
The fork shares the first turn with the original (stored once, not copied).

    python examples/chat_fork.py     # chats, forks, shows both threads
    python examples/chat_fork.py     # again: both threads are read back from the store

The model is resumable's simulated provider, started in this process and called
through the real openai SDK (set OPENAI_BASE_URL and OPENAI_API_KEY for a real
one). The store is $RESUMABLE_STORE (default: the SQLite file ./.resumable/state.db).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import textwrap

import openai

from resumable import Engine
from resumable.simulator import SimulatedProvider

STORE = os.environ.get("RESUMABLE_STORE", "sqlite:///.resumable/state.db")
THREAD, FORK = "customer-7", "customer-7-retry"
QUESTIONS = [
    "My order of two lamps arrived broken. What can I do?",
    "Can I get a refund instead of a replacement?",
]
OTHER_FOLLOW_UP = "Can you send the replacement by express delivery?"
NAMESPACE = "conversation"  # where engine.conversation() keeps its threads


async def ask(client: openai.AsyncOpenAI, messages: list[dict[str, str]]) -> str:
    response = await client.chat.completions.create(
        model="gpt-5-mini",
        messages=messages,
        max_tokens=40,
    )
    return response.choices[0].message.content or ""


async def chat(engine: Engine, client: openai.AsyncOpenAI) -> None:
    """Two turns on THREAD, saved after each; then a fork at turn 1 with another question."""
    conversation = await engine.conversation(THREAD)
    for turn, question in enumerate(QUESTIONS, start=1):
        conversation.append({"role": "user", "content": question})
        answer = await ask(client, conversation.messages)
        conversation.append({"role": "assistant", "content": answer})
        await conversation.save(label=f"turn {turn}")  # a checkpoint per turn
    print(f"chatted on thread {THREAD!r}: {len(QUESTIONS)} turns, saved after each")
    print("(the answers come from the simulated model: placeholder text)")

    # Time travel: find the checkpoint saved after turn 1 and fork the thread there.
    checkpoints = await engine.state_history(THREAD, namespace=NAMESPACE)
    print(
        "its checkpoints, newest first:", ", ".join(str(c.label) for c in checkpoints)
    )
    turn_1 = next(c for c in checkpoints if c.label == "turn 1")
    await engine.fork_state(
        THREAD, turn_1.checkpoint_id, to_thread=FORK, namespace=NAMESPACE
    )
    print(f"forked {THREAD!r} after turn 1 into {FORK!r}, asking something else")
    forked = await engine.conversation(FORK)  # turn 1, read from the store
    forked.append({"role": "user", "content": OTHER_FOLLOW_UP})
    forked.append({"role": "assistant", "content": await ask(client, forked.messages)})
    await forked.save(label="turn 2, another question")


async def main() -> None:
    async with Engine(STORE) as engine:
        if not (await engine.conversation(THREAD)).messages:
            await chat(engine, openai.AsyncOpenAI(max_retries=2))
        else:
            print(f"thread {THREAD!r} exists from an earlier run: reading it back")
        for thread in (THREAD, FORK):
            print()
            print(f"thread {thread!r}:")
            for message in (await engine.conversation(thread)).messages:
                text = textwrap.shorten(
                    message["content"], width=80, placeholder=" ..."
                )
                print(f"  {message['role']:>9}: {text}")


if __name__ == "__main__":
    with contextlib.ExitStack() as stack:
        if (
            "OPENAI_BASE_URL" not in os.environ
        ):  # no provider set: serve the simulated one
            provider = stack.enter_context(SimulatedProvider())
            os.environ["OPENAI_BASE_URL"] = provider.openai_base_url
            os.environ.setdefault("OPENAI_API_KEY", "sk-simulated")
        asyncio.run(main())
