"""Threads: LangGraph threads and `save_state` histories, states, chats as chat."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from resumable._engine.engine import Engine
from resumable.errors import ResumableError
from resumable.integrations.langgraph_threads import (
    is_langgraph_checkpoint,
    is_writes_namespace,
    known_threads,
    langgraph_metadata,
)
from resumable.ui.html import esc, table, url, value_text, when

_HISTORY_LIMIT = 200
_THREADS_PAGE = 50
_CHAT_KEYS = ("messages", "transcript", "history")


async def render_threads(engine: Engine, params: Mapping[str, str]) -> str:
    """Every thread holding snapshots, newest first, paged; LangGraph ones marked."""
    prefix = params.get("prefix") or None
    found = await engine.threads(
        prefix=prefix, limit=_THREADS_PAGE, cursor=params.get("cursor") or None
    )
    langgraph = set(await known_threads(engine))
    rows = []
    for thread in found.threads:
        step, source = await _langgraph_step(engine, thread.thread_id, langgraph)
        rows.append(
            [
                f'<a href="{url("/thread", {"id": thread.thread_id})}">'
                f"{esc(thread.thread_id)}</a>",
                "save_state" if step is None else "LangGraph",
                esc(step or ""),
                esc(source),
                when(thread.updated_at),
            ]
        )
    listing = (
        table(["Thread", "Kind", "Step", "Source", "Updated (UTC)"], rows, "threads")
        if rows
        else "<p class=empty>No threads in this store"
        + (f" start with {esc(prefix)}" if prefix else "")
        + ".</p>"
    )
    pager = ""
    if params.get("cursor"):
        pager += f'<a href="{url("/threads", {"prefix": prefix})}">« newest</a> '
    if found.next_cursor is not None:
        older = {"prefix": prefix, "cursor": found.next_cursor}
        pager += f'<a rel=next href="{url("/threads", older)}">older »</a>'
    return (
        "<h1>Threads and saved states</h1>"
        '<form method=get action="/threads" class=filters>'
        "<label>Thread id starts with "
        f'<input name=prefix value="{esc(prefix or "")}" placeholder="thread-"></label>'
        "<button>Filter</button></form>"
        + listing
        + (f"<p class=pager>{pager}</p>" if pager else "")
    )


async def _langgraph_step(
    engine: Engine, thread_id: str, langgraph: set[str]
) -> tuple[str | None, str]:
    """(step, source) of a LangGraph thread's latest checkpoint; step None if not one."""
    if thread_id not in langgraph:
        return None, ""
    latest = await engine.state_history(thread_id, namespace="", limit=1)
    if not latest or not is_langgraph_checkpoint(latest[0]):
        return None, ""
    metadata = langgraph_metadata(latest[0])
    step, source = metadata.get("step"), metadata.get("source")
    return str(step) if isinstance(step, int) else "", str(source or "")


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
