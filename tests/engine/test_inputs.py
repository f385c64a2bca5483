"""Engine.inputs on every store: what was sent to a run, when, as generic views."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from resumable import Engine, RunNotFound, workflow
from resumable.stores.protocol import Store
from resumable.testing import T0, FakeClock


@workflow
async def idle() -> None:
    return None


async def test_inputs_lists_every_input_sent_with_its_time_oldest_first(
    store: Store, clock: FakeClock
) -> None:
    engine = Engine(store, clock=clock)
    await engine.enqueue(idle, run_id="inbox")
    assert await engine.inputs("inbox") == []
    clock.advance(1)
    await engine.send("inbox", "approval", {"ok": True, "by": "ana"})
    clock.advance(1)
    await engine.send("inbox", "note", b"\x00" * 3)
    found = await engine.inputs("inbox")
    assert [(i.key, i.sent_at) for i in found] == [
        ("approval", datetime.fromtimestamp((T0 + 1000) / 1000, tz=UTC)),
        ("note", datetime.fromtimestamp((T0 + 2000) / 1000, tz=UTC)),
    ]
    assert found[0].value == {"ok": True, "by": "ana"}
    assert found[0].unreadable is None
    with pytest.raises(RunNotFound):
        await engine.inputs("missing")
