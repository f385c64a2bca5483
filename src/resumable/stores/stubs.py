"""What a store keeps of archived history (stubs), and the capabilities that keep it.

`SupportsArchive` swaps a finished run's journal and inputs for an `ArchiveStub`,
`SupportsThreadArchive` a thread's older snapshots for a `ThreadStub`; each stub
names the one object the records moved into. Declared apart from `Store` so the
core protocol stays small; this module builds on `protocol`, never the reverse.
`resumable.stores.cold` writes the objects and drives the swaps.
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

if TYPE_CHECKING:
    from resumable.stores.protocol import InputRecord, SnapshotRecord, StepRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchiveStub:
    """What stays of a finished run's journal and inputs moved to an object store.

    See `resumable.stores.cold`.
    """

    run_id: str
    key: str
    """The object's key: `runs/<sha256 of its bytes>`, so its bytes are checkable."""
    size: int
    """The object's size in bytes."""
    steps: int
    """How many journal records it holds (steps, ledger entries, batch items)."""
    inputs: int
    """How many inputs it holds."""
    fence: int
    """The run's fence when it was archived: a run taken again since is not archived."""
    archived_at_ms: int
    refers_to: tuple[str, ...] = ()
    """Keys of other objects its records reference (offloaded payloads), which a
    collection of garbage must keep while the stub exists."""


MAX_KEY_CHARS: Final = 256
"""The longest object key a stub lists (ours are content addresses, under 100)."""


def most_run_refs(steps: int, inputs: int) -> int:
    """How many keys a run's stub may list: one per payload its object holds."""
    return 2 * steps + inputs  # each step's output and usage, each input's value


def most_thread_refs(snapshots: int, chunks: int) -> int:
    """How many keys a thread's stub may list: one per payload its object holds."""
    return 2 * snapshots + chunks  # each snapshot's manifest and metadata, each chunk


def keys_of(text: str | bytes, *, most: int, lines: bool = False) -> tuple[str, ...]:
    """A stub's `refers_to` from its stored text, at most `most` keys.

    The text is a JSON list of keys, or with `lines` one key a line. It is measured before it is parsed, so a damaged row costs no more than
    the longest list of `most` keys would.

    Raises:
        ValueError: it is not such a list.
    """
    if len(text) > 2 + max(most, 0) * (MAX_KEY_CHARS + 4):
        raise ValueError(
            f"{len(text):,} characters of object keys, for at most {most:,} keys"
        )
    if lines:
        listed = text.decode() if isinstance(text, bytes) else text
        value: object = listed.split("\n") if listed else []
    else:
        value = json.loads(text)
    if (
        not isinstance(value, list)
        or len(value) > most
        or not all(type(k) is str and 0 < len(k) <= MAX_KEY_CHARS for k in value)
    ):
        raise ValueError(
            f"not a list of at most {most:,} object keys: {reprlib.repr(value)}"
        )
    return tuple(value)


@runtime_checkable
class SupportsArchive(Protocol):
    """An optional capability: a store that swaps a finished run's journal for a stub.

    The object holding the rows is written by the caller (`cold.archive_run`)
    before `archive_journal` is called, so a crash leaves either the rows or the
    stub, never neither. `delete_runs` deletes a run's stub with the run.
    """

    async def archive_journal(self, stub: ArchiveStub) -> bool:
        """Replace the run's journal records and inputs by `stub`, in one transaction.

        Only if the run has finished, its fence is still `stub.fence`, it has no
        stub, and it holds exactly `stub.steps` journal records and `stub.inputs`
        inputs (what the object holds); otherwise change nothing and return False.
        """
        ...

    async def load_archive_stub(self, run_id: str) -> ArchiveStub | None:
        """The run's stub, or None when its journal is in the store (or no run)."""
        ...

    async def restore_journal(
        self,
        stub: ArchiveStub,
        steps: Sequence[StepRecord],
        inputs: Sequence[InputRecord],
    ) -> bool:
        """Put archived records back and delete the stub, in one transaction.

        Only if the run's stub still names `stub.key`; otherwise change nothing
        and return False. A record whose seq (or input whose key) has a row
        already keeps that row.
        """
        ...

    async def list_archive_stubs(
        self, *, after: str | None, limit: int
    ) -> list[ArchiveStub]:
        """Up to `limit` stubs in run_id order, after the run_id `after`."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadStub:
    """What stays of a thread's older saved states moved to an object store.

    See `resumable.stores.cold`. The thread's newest snapshot of each
    namespace stays a live row beside it.
    """

    thread_id: str
    key: str
    """The object's key: `threads/<sha256 of its bytes>`."""
    size: int
    """The object's size in bytes."""
    snapshots: int
    """How many snapshot records it holds (packs included)."""
    chunks: int
    """How many chunks it holds: every chunk its snapshots name that was stored."""
    archived_at_ms: int
    newest: tuple[tuple[str, str], ...] = ()
    """Per namespace it holds records of, the newest checkpoint_id it holds, in
    namespace order: a read whose live rows are all newer needs no object."""
    refers_to: tuple[str, ...] = ()
    """Keys of other objects its records reference (offloaded payloads)."""


def namespaces_of(value: object) -> tuple[tuple[str, str], ...]:
    """`ThreadStub.newest` from its stored JSON; ValueError if it is not that."""
    if not isinstance(value, list) or not all(
        isinstance(pair, list)
        and len(pair) == 2
        and all(isinstance(part, str) for part in pair)
        for pair in value
    ):
        raise ValueError(f"not a list of namespaces and ids: {reprlib.repr(value)}")
    return tuple((str(ns), str(cp)) for ns, cp in value)


@runtime_checkable
class SupportsThreadArchive(Protocol):
    """An optional capability: a store that swaps a thread's older snapshots for a stub.

    The object holding them is written by the caller (`cold.archive_thread`)
    before `archive_snapshots` is called, so a crash leaves either the rows or the
    stub, never neither. `delete_thread` deletes the thread's stub with its rows.
    """

    async def archive_snapshots(
        self,
        stub: ThreadStub,
        *,
        moved: Collection[tuple[str, str]],
        chunks: Collection[str],
        replaces: str | None,
    ) -> bool:
        """Replace the snapshots `moved` ((namespace, checkpoint_id) pairs) by `stub`.

        In one transaction: only if the thread's stub is the one keyed `replaces`
        (None: it has none) and every snapshot `moved` exists, delete them, delete
        those of `chunks` that no remaining snapshot (of any thread) names, and put
        `stub` in the place of the thread's stub; otherwise change nothing and
        return False. The chunks' deletion is atomic with `save_snapshot`'s check
        (a save naming one of them is refused with `ChunksMissing`).
        """
        ...

    async def load_thread_stub(self, thread_id: str) -> ThreadStub | None:
        """The thread's stub, or None when none of its snapshots is archived."""
        ...

    async def restore_snapshots(
        self,
        stub: ThreadStub,
        snapshots: Sequence[SnapshotRecord],
        chunks: Mapping[str, bytes],
    ) -> bool:
        """Put archived snapshots and chunks back and delete the stub, in one transaction.

        Only if the thread's stub still names `stub.key`; otherwise change nothing
        and return False. A snapshot (or chunk) that has a row already keeps it.
        """
        ...

    async def list_thread_stubs(
        self, *, after: str | None, limit: int
    ) -> list[ThreadStub]:
        """Up to `limit` thread stubs in thread_id order, after the thread_id `after`."""
        ...
