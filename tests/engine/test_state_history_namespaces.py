"""`state_history(thread)` lists every saved state of the thread, whatever its
namespace, and a state not found in one namespace names the ones it has."""

from __future__ import annotations

import re

import pytest

from resumable import CheckpointNotFound, Engine
from resumable.stores.protocol import Store


async def test_a_conversations_saves_are_in_the_threads_history(store: Store) -> None:
    engine = Engine(store)
    chat = await engine.conversation("cust-7")
    for turn in range(4):
        chat.append({"role": "user", "content": f"q{turn}"})
        await chat.save()
    await engine.save_state("cust-7", {"plan": "gold"}, label="account")
    history = await engine.state_history("cust-7")
    assert [cp.namespace for cp in history] == [""] + ["conversation"] * 4
    assert [cp.label for cp in await engine.state_history("cust-7", namespace="")] == [
        "account"
    ]
    assert len(await engine.state_history("cust-7", namespace="conversation")) == 4
    assert len(await engine.state_history("cust-7", limit=2)) == 2
    older = await engine.state_history("cust-7", before=history[1].checkpoint_id)
    assert older == history[2:]


async def test_loading_a_conversation_thread_without_namespace_names_the_namespace(
    store: Store,
) -> None:
    engine = Engine(store)
    chat = await engine.conversation("cust-7")
    for turn in range(4):
        chat.append({"role": "user", "content": f"q{turn}"})
        await chat.save()
    expected = (
        "thread 'cust-7' has no saved state in namespace ''; it has 'conversation' "
        "(use engine.conversation(...) or namespace='conversation')"
    )
    with pytest.raises(CheckpointNotFound, match=re.escape(expected)):
        await engine.load_state("cust-7")
    with pytest.raises(CheckpointNotFound, match=re.escape(expected)):
        await engine.view_state("cust-7")
    assert await engine.load_state("cust-7", default=None) is None
    saved = await engine.load_state("cust-7", namespace="conversation")
    assert len(saved["messages"]) == 4


async def test_a_state_missing_from_a_namespace_lists_the_threads_other_namespaces(
    store: Store,
) -> None:
    engine = Engine(store)
    await engine.save_state("doc-1", {"v": 1})
    await engine.save_state("doc-1", {"v": 2}, namespace="drafts")
    with pytest.raises(CheckpointNotFound) as caught:
        await engine.load_state("doc-1", namespace="notes")
    assert str(caught.value).endswith(
        "has no saved state in namespace 'notes'; it has '', 'drafts' "
        "(use namespace='' or namespace='drafts')"
    )
    with pytest.raises(CheckpointNotFound) as caught:
        await engine.load_state("nobody")
    assert "save one with Engine.save_state, or pass default=" in str(caught.value)
    assert "it has" not in str(caught.value)
