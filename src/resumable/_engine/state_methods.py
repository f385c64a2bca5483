"""The Engine's saved-state methods (the manual-checkpoint pattern).

A group of `Engine`'s public methods, as redis-py groups its commands: each
delegates to `states.States` (or to the listing of threads), and the Engine
inherits them, so users and the API reference see one class.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any, Final

from resumable._engine.listing import ThreadPage, threads_page
from resumable._engine.snapshots import Checkpoint
from resumable._engine.states import MISSING as _MISSING
from resumable._engine.states import States
from resumable.stores.protocol import Store
from resumable.stores.roles import SnapshotRole

__all__ = ["StateMethods"]


class EveryState(enum.Enum):
    """The default of `state_history(namespace=)`: every saved state of the thread."""

    EVERY_STATE = "every state"


EVERY_STATE: Final = EveryState.EVERY_STATE


class StateMethods:
    """Save, load, list and fork the versions of a thread's state."""

    store: Store
    _states: States

    async def save_state(
        self,
        thread_id: str,
        state: Any,
        *,
        label: str | None = None,
        metadata: Any = None,
        parent: str | None = None,
        namespace: str = "",
        checkpoint_id: str | None = None,
    ) -> Checkpoint:
        """Save a version of a thread's state (the manual-checkpoint pattern).

        Lists and dicts are stored element by element, content-addressed: saving a
        conversation after each turn writes only the new messages.

        Args:
            thread_id: The thread (conversation, session) the state belongs to.
            state: Any value the codec can encode.
            label: A name for this version, shown in `state_history`.
            metadata: Any encodable value kept beside the state.
            parent: The checkpoint this version follows (default: the thread's
                latest); pass an older one to branch the thread from there.
            namespace: Separates independent states of one thread (default `""`;
                a conversation saves in `"conversation"`). `load_state` reads one
                namespace (`""` unless given); `state_history` and `resumable
                show-thread` list every namespace unless given one.
            checkpoint_id: The new checkpoint's id (default: generated). Ids must
                sort in the order versions are saved (e.g. uuid6/uuid7 strings).

        Returns:
            The new checkpoint; its `metadata` is the object passed, not a copy
            decoded back (loading it gives an equal value).
        """
        return await self._states.save(
            thread_id,
            state,
            label=label,
            metadata=metadata,
            parent=parent,
            namespace=namespace,
            checkpoint_id=checkpoint_id,
        )

    async def load_state(
        self,
        thread_id: str,
        *,
        checkpoint_id: str | None = None,
        namespace: str = "",
        default: Any = _MISSING,
    ) -> Any:
        """The thread's latest state, or the state at `checkpoint_id`.

        Raises:
            CheckpointNotFound: nothing was saved in `namespace` (and no
                `default` was given); the message names the namespaces the
                thread has (a conversation's saves are in "conversation").
        """
        return await self._states.load(
            thread_id, checkpoint_id=checkpoint_id, namespace=namespace, default=default
        )

    async def view_state(
        self, thread_id: str, *, checkpoint_id: str | None = None, namespace: str = ""
    ) -> Any:
        """`load_state` as a generic view: readable without the state's types.

        Plain JSON-like data naming the type of every tagged value (see
        `resumable.serde.view`); nothing is imported or constructed.

        Raises:
            CheckpointNotFound: nothing was saved there.
            CorruptCheckpointError: a stored part is damaged or missing.
        """
        return await self._states.view(
            thread_id, checkpoint_id=checkpoint_id, namespace=namespace
        )

    async def load_checkpoint(
        self, thread_id: str, *, checkpoint_id: str | None = None, namespace: str = ""
    ) -> tuple[Checkpoint, Any] | None:
        """A checkpoint (the latest, or the given one) with its state; None if absent."""
        return await self._states.load_checkpoint(
            thread_id, checkpoint_id=checkpoint_id, namespace=namespace
        )

    async def delete_thread(self, thread_id: str) -> int:
        """Delete every checkpoint of a thread (in every namespace); returns how many.

        The content chunks they used are removed by `gc` once nothing uses them.
        """
        return await self._states.delete_thread(thread_id)

    async def delete_states(
        self, thread_id: str, checkpoints: Iterable[str | tuple[str, str]]
    ) -> int:
        """Delete single checkpoints of a thread; returns how many existed.

        Each checkpoint is an id (in namespace "") or a `(namespace, checkpoint_id)`
        pair; ids naming no checkpoint are skipped. The others stay loadable: one
        stored as changes against a deleted checkpoint is first rewritten whole, and
        a packed one (older checkpoints are stored together) is rewritten out of its
        pack. A crash
        midway loses no kept checkpoint; calling again finishes the deletion. The
        content chunks only they used are removed by `gc`.

        Raises:
            ValueError: a namespace names the engine's packs.
            StoreError: another engine rewrote a pack meanwhile; nothing was lost,
                call again.
        """
        return await self._states.delete(thread_id, checkpoints)

    async def state_history(
        self,
        thread_id: str,
        *,
        limit: int | None = None,
        before: str | None = None,
        namespace: str | EveryState | None = EVERY_STATE,
    ) -> list[Checkpoint]:
        """The thread's checkpoints, newest first.

        By default every state saved under the thread, whatever its namespace:
        `save_state` (namespace `""` unless given), a conversation
        (`engine.conversation(thread_id)` saves in namespace `"conversation"`) and
        LangGraph checkpoints (root and subgraphs); each `Checkpoint` names its
        `namespace`.

        Args:
            thread_id: The thread.
            limit: At most this many (newest first).
            before: Only checkpoints older than this checkpoint id.
            namespace: Only this namespace (`""` is what `save_state` uses by
                default); None: every namespace, LangGraph's pending writes too.
        """
        if namespace is EVERY_STATE:
            found = await self._states.history(
                thread_id, limit=None, before=before, namespace=None
            )
            saved = [cp for cp in found if cp.role is SnapshotRole.CHECKPOINT]
            return saved if limit is None else saved[:limit]
        return await self._states.history(
            thread_id, limit=limit, before=before, namespace=namespace
        )

    async def threads(
        self, *, prefix: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> ThreadPage:
        """One page of the threads holding snapshots, most recently saved first.

        Lists `save_state` threads and LangGraph threads alike, not the threads the
        library keeps for itself. Paged by key like `runs_page`.

        Args:
            prefix: Only threads whose id starts with this.
            limit: Threads per page.
            cursor: The `next_cursor` of the previous page (None: the first page).
        """
        return await threads_page(self.store, prefix=prefix, limit=limit, cursor=cursor)

    async def fork_state(
        self, thread_id: str, checkpoint_id: str, *, to_thread: str, namespace: str = ""
    ) -> Checkpoint:
        """Start thread `to_thread` from a checkpoint of another thread.

        The new thread shares every chunk with the original (nothing is copied).
        """
        return await self._states.fork(
            thread_id, checkpoint_id, to_thread=to_thread, namespace=namespace
        )
