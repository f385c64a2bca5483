"""`state_history(thread)` lists every saved state of the thread, whatever its namespace."""

from __future__ import annotations

from resumable import Engine
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
