"""What a snapshot record or a thread is for, and the one place that encodes it in names.

Stores keep snapshots by `(thread_id, namespace, checkpoint_id)` and know nothing
of roles; the engine and the LangGraph saver give some namespaces and threads a
role of their own, encoded in the name as earlier versions stored it (so there
is no migration):

| role | stored as |
| --- | --- |
| `SnapshotRole.CHECKPOINT` | any namespace not below (a user's, or LangGraph's `checkpoint_ns`) |
| `SnapshotRole.WRITES` | namespace `":writes:" + checkpoint_ns`: LangGraph pending writes |
| `SnapshotRole.PACK` | namespace `":pack:" + namespace`: a pack of that namespace's older snapshots (`_engine/packs.py`); its `label` is the newest packed row's id |
| `ThreadRole.USER` | any thread id not below |
| `ThreadRole.INTERNAL` | thread ids starting `":resumable:"`: kept by the library (the LangGraph thread index) |
| `ThreadRole.STAGING` | thread ids ending `":resumable-staging"`: a rewrite older LangGraph savers staged |

Readers ask `SnapshotRecord.role`, `ThreadRecord.role` (or `snapshot_role`,
`thread_role`) and build names with the functions here; no other module tests a
name's prefix (`tests/stores/test_roles.py` checks it).
"""

from __future__ import annotations

import enum
from typing import Final

_PACK: Final = ":pack:"
_WRITES: Final = ":writes:"
_INTERNAL: Final = ":resumable:"
STAGING_SUFFIX: Final = ":resumable-staging"
"""Where `prune`/`delete_for_runs` of older LangGraph savers kept a thread's surviving
checkpoints while they rewrote it (`thread_id + STAGING_SUFFIX`); left behind only by
a crash midway (restore with `copy_thread`). Today's saver writes none, and reports
one it finds."""


class SnapshotRole(enum.Enum):
    """What the snapshots of a namespace are (see the module docstring)."""

    CHECKPOINT = "checkpoint"
    """A saved state: `save_state`, a conversation, a LangGraph checkpoint."""
    WRITES = "writes"
    """One `put_writes` call of the LangGraph saver: a checkpoint's pending writes."""
    PACK = "pack"
    """Older snapshots of one namespace, stored together by the engine."""


class ThreadRole(enum.Enum):
    """What a thread is (see the module docstring)."""

    USER = "user"
    """A thread a user or LangGraph named: listed by `Engine.threads`."""
    INTERNAL = "internal"
    """A thread the library keeps for itself (never listed to users)."""
    STAGING = "staging"
    """A copy an older saver's crashed rewrite left behind (never listed to users)."""


def snapshot_role(namespace: str) -> SnapshotRole:
    """The role of the snapshots stored in `namespace`."""
    if namespace.startswith(_PACK):
        return SnapshotRole.PACK
    if namespace.startswith(_WRITES):
        return SnapshotRole.WRITES
    return SnapshotRole.CHECKPOINT


def pack_namespace(namespace: str) -> str:
    """Where the packs of `namespace` are stored."""
    return _PACK + namespace


def packed_namespace(pack_namespace: str) -> str:
    """The namespace whose snapshots the packs of `pack_namespace` hold."""
    if snapshot_role(pack_namespace) is not SnapshotRole.PACK:
        raise ValueError(f"namespace {pack_namespace!r} holds no packs")
    return pack_namespace[len(_PACK) :]


def pack_label(newest_id: str) -> str:
    """The `label` of a pack whose newest row is `newest_id`."""
    return newest_id


def newest_packed(label: str | None) -> str | None:
    """The id of a pack's newest row, from its `label` (None: not a pack's)."""
    return label


def writes_namespace(checkpoint_ns: str) -> str:
    """The namespace holding the pending writes of a checkpoint namespace."""
    return _WRITES + checkpoint_ns


def writes_owner_namespace(namespace: str) -> str:
    """The checkpoint namespace whose pending writes `namespace` holds."""
    if snapshot_role(namespace) is not SnapshotRole.WRITES:
        raise ValueError(f"namespace {namespace!r} holds no pending writes")
    return namespace[len(_WRITES) :]


def thread_role(thread_id: str) -> ThreadRole:
    """The role of a thread."""
    if thread_id.startswith(_INTERNAL):
        return ThreadRole.INTERNAL
    if thread_id.endswith(STAGING_SUFFIX):
        return ThreadRole.STAGING
    return ThreadRole.USER


def internal_thread(name: str) -> str:
    """The id of the library's own thread `name`."""
    return _INTERNAL + name


def staging_thread(thread_id: str) -> str:
    """Where an older saver staged a rewrite of `thread_id`."""
    return thread_id + STAGING_SUFFIX
