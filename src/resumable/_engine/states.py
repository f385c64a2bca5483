"""Thread states: the manual-checkpoint API of `Engine` over `Snapshots`.

`save_state`, `load_state`, `view_state`, `state_history`, `fork_state`,
`delete_thread` and `delete_states` resolve a thread's latest checkpoint, word the errors, and turn
snapshot records into public `Checkpoint`s; `Snapshots` stores and reads them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any, Final

from resumable._engine.clock import Clock, datetime_of
from resumable._engine.conversation import NAMESPACE as CONVERSATION
from resumable._engine.damage import reading
from resumable._engine.deletes import delete_states
from resumable._engine.snapshots import Checkpoint, Snapshots
from resumable.errors import CheckpointNotFound
from resumable.serde import Serde
from resumable.stores.protocol import SnapshotRecord, SnapshotStore
from resumable.stores.roles import SnapshotRole, packed_namespace

MISSING: Any = object()
"""No value given (where None is a value: `load_state(default=None)`)."""


class EveryState(enum.Enum):
    """The default of `state_history(namespace=)`: every saved state of the thread."""

    EVERY_STATE = "every state"


EVERY_STATE: Final = EveryState.EVERY_STATE


class States:
    """One Engine's thread states."""

    def __init__(
        self, store: SnapshotStore, serde: Serde, clock: Clock, *, packing: bool = True
    ) -> None:
        self.snapshots = Snapshots(store, serde, packing=packing)
        self._store, self._clock = store, clock

    async def save(
        self,
        thread_id: str,
        state: Any,
        *,
        label: str | None,
        metadata: Any,
        parent: str | None,
        namespace: str,
        checkpoint_id: str | None,
    ) -> Checkpoint:
        """`Engine.save_state`: a new version, after the latest unless `parent` is given."""
        if parent is None:
            latest = await self.snapshots.packs.find(thread_id, namespace, None)
            parent = None if latest is None else latest.checkpoint_id
            if latest is not None and latest.checkpoint_id == checkpoint_id:
                # saved again under its own id, it replaces the latest: it is no
                # delta of itself (two first saves of one id at once did that)
                parent = latest.parent_id
        record = await self.snapshots.save(
            thread_id,
            state,
            now_ms=self._clock.now_ms(),
            namespace=namespace,
            parent_id=parent,
            label=label,
            metadata=metadata,
            checkpoint_id=checkpoint_id,
        )
        return self.checkpoint(record, metadata)

    async def load(
        self,
        thread_id: str,
        *,
        checkpoint_id: str | None,
        namespace: str,
        default: Any,
    ) -> Any:
        """`Engine.load_state`: the state, `default`, or CheckpointNotFound."""
        found = await self.snapshots.load(
            thread_id, namespace=namespace, checkpoint_id=checkpoint_id
        )
        if found is not None:
            return found[1]
        if default is not MISSING:
            return default
        raise await self._not_found(
            thread_id,
            checkpoint_id=checkpoint_id,
            namespace=namespace,
            otherwise="save one with Engine.save_state, or pass default=",
        )

    async def view(
        self, thread_id: str, *, checkpoint_id: str | None, namespace: str
    ) -> Any:
        """`Engine.view_state`: the state as a generic view, or CheckpointNotFound."""
        found = await self.snapshots.view(
            thread_id, namespace=namespace, checkpoint_id=checkpoint_id
        )
        if found is None:
            raise await self._not_found(
                thread_id,
                checkpoint_id=checkpoint_id,
                namespace=namespace,
                otherwise=f"list them with Engine.state_history({thread_id!r}, "
                f"namespace=None)",
            )
        return found[1]

    async def _not_found(
        self,
        thread_id: str,
        *,
        checkpoint_id: str | None,
        namespace: str,
        otherwise: str,
    ) -> CheckpointNotFound:
        """The error for a state not in `namespace`, naming the ones the thread has.

        A conversation's saves live under namespace "conversation": a
        `load_state(thread)` that finds none must say where they are.
        """
        what = f"checkpoint {checkpoint_id!r}" if checkpoint_id else "saved state"
        where = f"{what} in namespace {namespace!r}"
        others = [n for n in await self.namespaces(thread_id) if n != namespace]
        if not others:
            detail = f"has no {where}; {otherwise}"
            return CheckpointNotFound(thread_id=thread_id, detail=detail)
        uses = [f"namespace={n!r}" for n in others]
        if CONVERSATION in others:
            uses.insert(0, "engine.conversation(...)")
        listed = ", ".join(repr(n) for n in others)
        how = " or ".join([", ".join(uses[:-1]), uses[-1]] if len(uses) > 1 else uses)
        return CheckpointNotFound(
            thread_id=thread_id,
            detail=f"has no {where}; it has {listed} (use {how})",
        )

    async def namespaces(self, thread_id: str) -> list[str]:
        """The namespaces the thread has saved states in (packed ones too), sorted."""
        found: set[str] = set()
        for record in await self._store.list_snapshots(thread_id, namespace=None):
            with reading(f"thread {thread_id!r} checkpoint {record.checkpoint_id!r}"):
                if record.role is SnapshotRole.CHECKPOINT:
                    found.add(record.namespace)
                elif record.role is SnapshotRole.PACK:
                    found.add(packed_namespace(record.namespace))
        return sorted(found)

    async def load_checkpoint(
        self, thread_id: str, *, checkpoint_id: str | None, namespace: str
    ) -> tuple[Checkpoint, Any] | None:
        """`Engine.load_checkpoint`: a checkpoint with its state; None if absent."""
        found = await self.snapshots.load(
            thread_id, namespace=namespace, checkpoint_id=checkpoint_id
        )
        return None if found is None else (self.checkpoint(found[0]), found[1])

    async def delete_thread(self, thread_id: str) -> int:
        """`Engine.delete_thread`: delete every checkpoint of the thread."""
        self.snapshots.forget(thread_id)
        return await self._store.delete_thread(thread_id)

    async def delete(
        self, thread_id: str, checkpoints: Iterable[str | tuple[str, str]]
    ) -> int:
        """`Engine.delete_states`: delete single checkpoints of the thread."""
        keys = [("", c) if isinstance(c, str) else c for c in checkpoints]
        return await delete_states(self.snapshots, thread_id, keys)

    async def history(
        self,
        thread_id: str,
        *,
        limit: int | None,
        before: str | None,
        namespace: str | EveryState | None,
    ) -> list[Checkpoint]:
        """`Engine.state_history`: the thread's checkpoints, newest first.

        EVERY_STATE: those of every namespace, without LangGraph's pending writes.
        """
        if namespace is EVERY_STATE:
            found = await self.history(
                thread_id, limit=None, before=before, namespace=None
            )
            saved = [cp for cp in found if cp.role is SnapshotRole.CHECKPOINT]
            return saved if limit is None else saved[:limit]
        records = await self.snapshots.packs.history(
            thread_id, namespace=namespace, before=before, limit=limit
        )
        return [self.checkpoint(record) for record in records]

    async def fork(
        self, thread_id: str, checkpoint_id: str, *, to_thread: str, namespace: str
    ) -> Checkpoint:
        """`Engine.fork_state`: start `to_thread` from a checkpoint of `thread_id`."""
        found = await self.snapshots.load(
            thread_id, namespace=namespace, checkpoint_id=checkpoint_id
        )
        if found is None:
            raise CheckpointNotFound(
                thread_id=thread_id,
                detail=f"has no checkpoint {checkpoint_id!r}; list them with "
                f"Engine.state_history({thread_id!r})",
            )
        record = await self.snapshots.save(
            to_thread,
            found[1],
            now_ms=self._clock.now_ms(),
            namespace=namespace,
            parent_id=None,
            label=f"fork of {thread_id}@{checkpoint_id}",
            metadata={
                "forked_from": {"thread_id": thread_id, "checkpoint_id": checkpoint_id}
            },
        )
        return self.checkpoint(record)

    def checkpoint(self, record: SnapshotRecord, metadata: Any = MISSING) -> Checkpoint:
        """The public view of a snapshot record.

        `metadata`: the value just saved as the record's metadata, when the caller
        has it; else it is decoded from the record (a LangGraph step saves two
        records and reads neither's metadata back).
        """
        with reading(
            f"thread {record.thread_id!r} checkpoint {record.checkpoint_id!r}"
        ):
            return Checkpoint(
                thread_id=record.thread_id,
                checkpoint_id=record.checkpoint_id,
                parent_id=record.parent_id,
                label=record.label,
                metadata=self.snapshots.metadata(record)
                if metadata is MISSING
                else metadata,
                created_at=datetime_of(record.created_at_ms),
                namespace=record.namespace,
            )
