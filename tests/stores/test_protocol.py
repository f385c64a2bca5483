"""The Store protocol's records themselves."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from resumable.stores._sql import (
    STEP_COLUMNS,
    journal_records,
    step_from_row,
    to_text,
)
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


def test_a_step_records_hand_written_init_takes_exactly_its_fields() -> None:
    # StepRecord sets its slots itself (it is made at every step): a field added
    # to the class but not to __init__ would be left unset
    parameters = list(inspect.signature(StepRecord.__init__).parameters.values())[1:]
    fields = dataclasses.fields(StepRecord)
    assert [p.name for p in parameters] == [f.name for f in fields]
    assert {p.kind for p in parameters} == {inspect.Parameter.KEYWORD_ONLY}
    assert [p.default for p in parameters] == [
        inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        for f in fields
    ]


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


def test_the_hand_written_init_builds_what_the_dataclass_init_would() -> None:
    plain = object.__new__(StepRecord)
    fields = {
        f.name: getattr(_record(usage=b"u"), f.name)
        for f in dataclasses.fields(StepRecord)
    }
    for name, value in fields.items():
        object.__setattr__(
            plain, name, value
        )  # what a frozen dataclass's __init__ does
    assert _record(usage=b"u") == plain


@pytest.mark.parametrize(
    "row",
    [
        (1, "draft", "f" * 16, "ok", b"out", 1, 10, 12, None),
        (2, "50%\x00 off", "f" * 16, "failed", memoryview(b"err"), 3, 10, 12, b"u"),
        (
            3,
            "w\ud800",
            "f" * 16,
            "retrying",
            bytearray(b"x"),
            2,
            10,
            12,
            bytearray(b"u"),
        ),
        (4, "wait", "f" * 16, "ok", None, 1, 10, 12, memoryview(b"u")),
    ],
    ids=["plain", "escaped name, memoryview", "surrogate, bytearray", "no output"],
)
def test_a_journal_built_by_slots_equals_one_built_by_keyword(
    row: tuple[object, ...],
) -> None:
    """journal_records (the fast path) against step_from_row (the plain one)."""
    stored = (to_text("run/1"), row[0], to_text(str(row[1])), *row[2:])
    by_name = dict(zip(STEP_COLUMNS, stored, strict=True))
    (fast,) = journal_records("run/1", [stored[1:]])
    assert fast == step_from_row(by_name)
    assert [type(fast.output), type(fast.usage)] == [
        type(step_from_row(by_name).output),
        type(step_from_row(by_name).usage),
    ]
