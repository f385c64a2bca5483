"""Threads: LangGraph threads and `save_state` histories, states, chats as chat."""

from __future__ import annotations

from typing import Any

from resumable._engine.engine import Engine
from resumable.errors import ResumableError
from resumable.integrations.langgraph_threads import is_writes_namespace, list_threads
from resumable.ui.html import esc, table, url, value_text, when

_HISTORY_LIMIT = 200
_CHAT_KEYS = ("messages", "transcript", "history")


async def render_threads(engine: Engine) -> str:
    """A form to open any thread, and the LangGraph threads the store indexes."""
    threads = await list_threads(engine, limit=100)
    rows = [
        [
            f'<a href="{url("/thread", {"id": t.thread_id})}">{esc(t.thread_id)}</a>',
            esc("" if t.step is None else t.step),
            esc(t.source or ""),
            when(t.updated_at),
        ]
        for t in threads
    ]
    listing = (
        table(["LangGraph thread", "Step", "Source", "Updated (UTC)"], rows)
        if rows
        else "<p class=empty>No LangGraph threads in this store.</p>"
    )
    return (
        "<h1>Threads and saved states</h1>"
        '<form method=get action="/thread" class=filters>'
        '<label>Thread id <input name=id required placeholder="thread-7"></label>'
        "<button>Open</button></form>"
        "<p><small>Threads saved with <code>Engine.save_state</code> are opened by id: "
        "the store keeps no list of them.</small></p>" + listing
    )


async def render_thread(
    engine: Engine, thread_id: str, checkpoint_id: str | None, namespace: str
) -> str:
    """A thread's checkpoint timeline and the state at one checkpoint (the latest)."""
    history = [
        cp
        for cp in await engine.state_history(
            thread_id, namespace=None, limit=_HISTORY_LIMIT
        )
        if not is_writes_namespace(cp.namespace)
    ]
    if not history:
        return f"<h1>Thread {esc(thread_id)}</h1><p class=empty>Nothing saved under this thread id.</p>"
    chosen = next(
        (
            cp
            for cp in history
            if cp.checkpoint_id == checkpoint_id and cp.namespace == namespace
        ),
        history[0],
    )
    rows = [
        [
            f'<a href="{url("/thread", {"id": thread_id, "cp": cp.checkpoint_id, "ns": cp.namespace})}">'
            f"{esc(cp.checkpoint_id)}</a>" + (" ◀" if cp is chosen else ""),
            esc(cp.namespace),
            esc(cp.label or ""),
            esc(cp.parent_id or ""),
            when(cp.created_at),
        ]
        for cp in history
    ]
    try:
        state: Any = await engine.view_state(
            thread_id, checkpoint_id=chosen.checkpoint_id, namespace=chosen.namespace
        )
        shown = _chat(state) or f"<pre class=value>{value_text(state)}</pre>"
    except ResumableError as exc:
        shown = f"<p class=error>{esc(exc)}</p>"
    return (
        f"<h1>Thread {esc(thread_id)}</h1>"
        f"<h2>State at {esc(chosen.checkpoint_id)}</h2>{shown}"
        "<h2>Checkpoints (newest first)</h2>"
        + table(["Checkpoint", "Namespace", "Label", "Parent", "Saved (UTC)"], rows)
    )


def _messages(state: Any) -> list[dict[str, Any]] | None:
    """The list of chat messages inside a state, if it holds one."""
    candidates = [state]
    if isinstance(state, dict):
        values = state.get("values")
        candidates += [state.get(k) for k in _CHAT_KEYS]
        if isinstance(values, dict):
            candidates += [values.get(k) for k in _CHAT_KEYS]
    for found in candidates:
        if (
            isinstance(found, list)
            and found
            and all(
                isinstance(m, dict) and "content" in m and ("role" in m or "type" in m)
                for m in found
            )
        ):
            return found
    return None


def _chat(state: Any) -> str:
    messages = _messages(state)
    if messages is None:
        return ""
    bubbles = []
    for message in messages:
        role = str(message.get("role") or message.get("type") or "")
        content = message["content"]
        text = content if isinstance(content, str) else value_text(content, 2000)
        if isinstance(content, str):
            text = esc(content)
        bubbles.append(
            f'<div class="msg r-{esc(role)}"><b>{esc(role)}</b><p>{text}</p></div>'
        )
    return f"<div class=chat>{''.join(bubbles)}</div>"
