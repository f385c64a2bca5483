"""Hypothesis replaces whole stored rows, not single bytes, and the library fails safe."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resumable.testing import StoredField, TamperReport, TamperSuite
from tamper.subjects import sqlite_subject

# what a column of any SQLite table may be made to hold
VALUES = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.binary(max_size=300),
)

_TEMPLATE: dict[str, Any] = {}


def _template() -> Any:
    """One filled SQLite store, made once; each example damages a copy of it."""
    if "subject" not in _TEMPLATE:

        async def fill() -> Any:
            subject = sqlite_subject(Path(tempfile.mkdtemp(prefix="tamper-rows-")))
            await TamperSuite.fill(subject)
            return subject, await subject.fields()

        _TEMPLATE["subject"], _TEMPLATE["fields"] = asyncio.run(fill())
    return _TEMPLATE["subject"], _TEMPLATE["fields"]


def _rows(fields: list[StoredField]) -> list[list[StoredField]]:
    by_row: dict[tuple[str, tuple[Any, ...]], list[StoredField]] = {}
    for field in fields:
        by_row.setdefault((field.table, field.row), []).append(field)
    return list(by_row.values())


@pytest.mark.timeout(600)
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(data=st.data())
def test_a_row_replaced_whole_by_arbitrary_values_fails_safe(
    data: st.DataObject,
) -> None:
    template, fields = _template()
    row = data.draw(st.sampled_from(_rows(fields)), label="row")
    values = [data.draw(VALUES, label=field.column) for field in row]

    async def damage_and_examine() -> TamperReport:
        subject = await template.clone()
        report = TamperReport()
        try:
            written = [
                await subject.write(f, v) for f, v in zip(row, values, strict=True)
            ]
            if any(written):
                await TamperSuite(subject_factory).examine(
                    report, subject, row[0], "whole row replaced"
                )
        finally:
            await subject.drop()
        return report

    report = asyncio.run(damage_and_examine())
    assert not report.failures, report.failures


async def subject_factory() -> Any:  # examine() never makes subjects of its own
    raise AssertionError("not called")
