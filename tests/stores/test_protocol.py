"""The Store protocol's records themselves."""

from __future__ import annotations

import dataclasses

import pytest

from resumable.stores.protocol import StepRecord


def _record(**changes: object) -> StepRecord:
    fields: dict[str, object] = {
        "run_id": "r",
        "seq": 3,
        "name": "draft",
        "fingerprint": "f" * 16,
        "status": "ok",
        "output": b"out",
        "attempts": 1,
        "started_at_ms": 10,
        "finished_at_ms": 12,
    }
    return StepRecord(**{**fields, **changes})  # type: ignore[arg-type]  # the test's own keywords


def test_a_step_record_is_a_frozen_value() -> None:
    record = _record()
    assert record.usage is None
    assert [getattr(record, f.name) for f in dataclasses.fields(record)] == [
        "r",
        3,
        "draft",
        "f" * 16,
        "ok",
        b"out",
        1,
        10,
        12,
        None,
    ]
    assert record == _record()
    assert hash(record) == hash(_record())
    assert record != _record(usage=b"u")
    assert dataclasses.replace(record, seq=4) == _record(seq=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.seq = 5  # type: ignore[misc]  # the point: it is frozen
