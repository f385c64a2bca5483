"""Journal record kinds: one module maps kind and index to the stored seq."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from resumable._engine.map_items import keyed_seq
from resumable.stores.kinds import (
    KEYED_SEQ_BASE,
    JournalKind,
    index_of,
    is_step,
    kind_of,
    seq_of,
)
from resumable.testing.contract.records import step_record

SRC = Path(__file__).resolve().parents[2] / "src" / "resumable"


@pytest.mark.parametrize(
    ("kind", "index"),
    [
        (JournalKind.STEP, 1),
        (JournalKind.STEP, KEYED_SEQ_BASE - 1),
        (JournalKind.LEDGER, 1),
        (JournalKind.LEDGER, 7),
        (JournalKind.BATCH_ITEM, 0),
        (JournalKind.BATCH_ITEM, (1 << 62) - 1),
    ],
)
def test_kind_and_index_round_trip_through_the_stored_seq(
    kind: JournalKind, index: int
) -> None:
    seq = seq_of(kind, index)
    assert kind_of(seq) is kind
    assert index_of(seq) == index
    assert is_step(seq) == (kind is JournalKind.STEP)
    assert -(1 << 63) <= seq < 1 << 63  # fits every store's signed 64-bit column
    assert step_record("r", seq).kind is kind


@pytest.mark.parametrize(
    ("kind", "index"),
    [
        (JournalKind.STEP, 0),
        (JournalKind.STEP, KEYED_SEQ_BASE),
        (JournalKind.LEDGER, -1),
        (JournalKind.BATCH_ITEM, -1),
        (JournalKind.BATCH_ITEM, 1 << 62),
    ],
)
def test_an_index_out_of_its_kinds_range_is_refused(
    kind: JournalKind, index: int
) -> None:
    with pytest.raises(ValueError, match="out of range"):
        seq_of(kind, index)


def test_the_encoding_is_the_one_stored_before_kinds_existed() -> None:
    """Rows written by earlier versions read as the same kinds (no migration)."""
    assert seq_of(JournalKind.LEDGER, 3) == -3
    assert seq_of(JournalKind.STEP, 5) == 5
    assert seq_of(JournalKind.BATCH_ITEM, 9) == (1 << 62) + 9
    assert kind_of(keyed_seq(4, "item-key")) is JournalKind.BATCH_ITEM


def test_no_module_but_the_kinds_one_decodes_seqs_by_sign_or_range() -> None:
    decoding = re.compile(
        r"KEYED_SEQ_BASE|\bseq\s*[<>]=?\s*0\b|\b0\s*[<>]=?\s*seq\b|-\s*\w*\.?fence\b"
    )
    found = [
        f"{path.relative_to(SRC)}:{number}: {line.strip()}"
        for path in SRC.rglob("*.py")
        if path != SRC / "stores" / "kinds.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if decoding.search(line)
    ]
    assert found == []
