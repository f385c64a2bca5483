"""Snapshot and thread roles: one module encodes them in namespaces and thread ids."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from resumable.stores.protocol import ThreadRecord
from resumable.stores.roles import (
    STAGING_SUFFIX,
    SnapshotRole,
    ThreadRole,
    internal_thread,
    newest_packed,
    pack_label,
    pack_namespace,
    packed_namespace,
    snapshot_role,
    staging_thread,
    thread_role,
    writes_namespace,
    writes_owner_namespace,
)
from resumable.testing.contract.records import snapshot_record

SRC = Path(__file__).resolve().parents[2] / "src" / "resumable"


@pytest.mark.parametrize("namespace", ["", "sub", "a:b", "🚀"])
def test_namespaces_round_trip_through_their_roles(namespace: str) -> None:
    assert snapshot_role(namespace) is SnapshotRole.CHECKPOINT
    packs = pack_namespace(namespace)
    assert snapshot_role(packs) is SnapshotRole.PACK
    assert packed_namespace(packs) == namespace
    writes = writes_namespace(namespace)
    assert snapshot_role(writes) is SnapshotRole.WRITES
    assert writes_owner_namespace(writes) == namespace
    # a pack of pending writes is a pack, of the writes namespace
    assert snapshot_role(pack_namespace(writes)) is SnapshotRole.PACK
    assert packed_namespace(pack_namespace(writes)) == writes
    assert snapshot_record("t", "1", (), namespace=packs).role is SnapshotRole.PACK
    with pytest.raises(ValueError, match="no packs"):
        packed_namespace(namespace)
    with pytest.raises(ValueError, match="no pending writes"):
        writes_owner_namespace(packs)


def test_threads_carry_their_role() -> None:
    assert thread_role("user-1") is ThreadRole.USER
    assert thread_role(internal_thread("langgraph-threads")) is ThreadRole.INTERNAL
    assert thread_role(staging_thread("t")) is ThreadRole.STAGING
    record = ThreadRecord(thread_id=internal_thread("x"), updated_at_ms=0)
    assert record.role is ThreadRole.INTERNAL
    assert newest_packed(pack_label("0042")) == "0042"


def test_the_encoding_is_the_one_stored_before_roles_existed() -> None:
    """Data written by earlier versions reads with the same roles (no migration)."""
    assert pack_namespace("") == ":pack:"
    assert writes_namespace("sub") == ":writes:sub"
    assert internal_thread("langgraph-threads") == ":resumable:langgraph-threads"
    assert staging_thread("t") == "t:resumable-staging" == "t" + STAGING_SUFFIX
    assert newest_packed("0002") == "0002"  # a pack's label is its newest row's id


def test_no_module_but_the_roles_one_encodes_roles_in_names() -> None:
    encoding = re.compile(
        r":pack:|:writes:|:resumable:|resumable-staging"
        r"|(startswith|endswith)\(\s*(PACK|WRITES|INTERNAL|STAGING|_PACK|_WRITES)"
    )
    found = [
        f"{path.relative_to(SRC)}:{number}: {line.strip()}"
        for path in [*SRC.rglob("*.py"), *SRC.rglob("*.lua")]
        if path != SRC / "stores" / "roles.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if encoding.search(line)
    ]
    assert found == []
