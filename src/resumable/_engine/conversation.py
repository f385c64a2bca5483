"""Conversations: a thread of chat messages an agent appends to, turn by turn.

`save()` persists the longest prefix of the thread in which every assistant tool
call has all its tool results and every tool result follows its call; a turn
still waiting for tool results stays pending (in memory) until it is complete.
A thread saved this way can always be sent back to a provider, however the
process died (openai-agents #4827 bricked sessions by saving half a turn).
Messages are stored content-addressed, so each save writes only the new ones.

Both message shapes are understood: OpenAI chat (`tool_calls` on assistant
messages, `role: "tool"` results with `tool_call_id`) and Anthropic messages
(`tool_use` blocks in assistant content, `tool_result` blocks with `tool_use_id`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from resumable._engine.snapshots import Checkpoint
from resumable.errors import UsageError

Message = dict[str, Any]
NAMESPACE = "conversation"


class Engine(Protocol):
    """What a conversation needs of its `resumable.Engine` (which is one)."""

    async def load_state(
        self, thread_id: str, *, namespace: str = "", default: Any = ...
    ) -> Any:
        """The thread's latest state, or `default`."""
        ...

    async def save_state(
        self,
        thread_id: str,
        state: Any,
        *,
        label: str | None = None,
        namespace: str = "",
    ) -> Checkpoint:
        """Save a version of the thread's state."""
        ...


class Conversation:
    """A chat thread, loaded from the store and saved back only in complete turns."""

    def __init__(self, engine: Engine, thread_id: str, messages: list[Message]) -> None:
        self.engine, self.thread_id = engine, thread_id
        self._saved: list[Message] = messages
        self._pending: list[Message] = []

    @classmethod
    async def open(cls, engine: Engine, thread_id: str) -> Conversation:
        """The thread as last saved (empty if new)."""
        state = await engine.load_state(thread_id, namespace=NAMESPACE, default=None)
        messages = [] if state is None else list(state["messages"])
        return cls(engine, thread_id, messages)

    @property
    def messages(self) -> list[Message]:
        """Every message: the saved ones, then the pending ones (send these)."""
        return [*self._saved, *self._pending]

    @property
    def pending(self) -> list[Message]:
        """Messages appended but not saved yet."""
        return list(self._pending)

    def append(self, message: Mapping[str, Any]) -> None:
        """Add one message (OpenAI or Anthropic shape) to the thread."""
        self._pending.append(dict(message))

    def extend(self, messages: Iterable[Mapping[str, Any]]) -> None:
        """Add several messages."""
        for message in messages:
            self.append(message)

    async def save(self, *, label: str | None = None) -> Checkpoint | None:
        """Persist every complete turn; an unfinished tool turn stays pending.

        Returns the new checkpoint, or None if there was nothing complete to save.

        Raises:
            UsageError: a tool result answers no tool call before it.
        """
        complete = complete_prefix(self.messages, thread_id=self.thread_id)
        if complete <= len(self._saved):
            return None
        messages = self.messages
        checkpoint = await self.engine.save_state(
            self.thread_id,
            {"messages": messages[:complete]},
            namespace=NAMESPACE,
            label=label,
        )
        self._saved, self._pending = messages[:complete], messages[complete:]
        return checkpoint


def complete_prefix(messages: list[Message], *, thread_id: str = "?") -> int:
    """How many leading messages form complete turns (every tool call answered)."""
    open_calls: set[str] = set()
    complete = 0
    for index, message in enumerate(messages):
        for call_id in _results(message):
            if call_id not in open_calls:
                raise UsageError(
                    f"thread {thread_id!r}, message {index}: a tool result for {call_id!r} "
                    f"answers no tool call before it; a provider would reject the thread"
                )
            open_calls.discard(call_id)
        open_calls.update(_calls(message))
        if not open_calls:
            complete = index + 1
    return complete


def _calls(message: Message) -> list[str]:
    """Ids of the tool calls an assistant message makes."""
    if message.get("role") != "assistant":
        return []
    ids = [
        str(call.get("id"))
        for call in message.get("tool_calls") or ()
        if isinstance(call, Mapping)
    ]
    ids += [
        str(block.get("id"))
        for block in _blocks(message)
        if block.get("type") == "tool_use"
    ]
    return ids


def _results(message: Message) -> list[str]:
    """Ids of the tool calls a message answers."""
    if message.get("role") == "tool":
        return [str(message.get("tool_call_id"))]
    return [
        str(block.get("tool_use_id"))
        for block in _blocks(message)
        if block.get("type") == "tool_result"
    ]


def _blocks(message: Message) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, list):
        return [block for block in content if isinstance(block, Mapping)]
    return []
