"""A LangGraph checkpointer on any resumable store: `ResumableSaver`.

Switching a graph is one line::

    from resumable.integrations.langgraph import ResumableSaver

    saver = ResumableSaver.from_url("sqlite:///.resumable/state.db")  # or memory://,
    graph = builder.compile(checkpointer=saver)  # postgresql://..., redis://...
    graph.invoke({"messages": [...]}, {"configurable": {"thread_id": "user-42"}})

`ResumableSaver(engine)` uses an existing `Engine` (and its encryption keys);
`ResumableSaver()` opens the default `./.resumable/state.db`. Close it with
`saver.close()` (or `with`/`async with`). Everything LangGraph does with a
checkpointer works: `invoke`/`ainvoke`/`stream`, `interrupt()` and
`Command(resume=...)`, `get_state`, `get_state_history`, `update_state`,
subgraphs, and the optional `copy_thread`, `prune` and `delete_for_runs`.

**Safe data.** Checkpoints, metadata and pending writes are stored with resumable's
codec: tagged JSON that rebuilds only registered types, never pickle, never a class
named by the stored data. LangChain messages (`AIMessage`, `HumanMessage`, ...,
their chunks, `RemoveMessage`), `Document`, and LangGraph's own types
(`Interrupt`, `Send`, `Overwrite`, ...) are registered. Register your state's types
once per process, before a thread is read back::

    saver = ResumableSaver.from_url(url, types=[State])  # TypedDicts, dataclasses,
    saver.register(graph)  # pydantic models; or a whole graph's schemas and channels

A value of an unregistered type is refused with `SerializationError`, and nothing
is constructed. A node's exception is stored as its `repr`, as LangGraph's own
serializer does. `list(filter=...)` compares metadata in Python, after decoding:
filter keys never reach a query.

**Storage.** Each checkpoint is an `Engine.save_state` snapshot of LangGraph's
checkpoint dict: channel values are split by channel and lists element by element,
each element stored once under its content hash, and a checkpoint is stored as a
delta against its parent; a task's pending writes are a record of their own whose
values share those chunks. A `messages` channel that grows by one message per step
costs the new message plus under a kilobyte of bookkeeping per step (ids, versions,
metadata, the task's writes), where savers that rewrite the channel cost the whole
history. Channel versions are integers. A save encodes only what is new: an
element the saver stored before is recognized by identity and an exact image of
its contents (an element changed in place is encoded again), and a checkpoint's
new chunks are written in the same transaction as the checkpoint itself.
`benchmarks/langgraph_storage.py` measures both;
`langgraph_threads` describes the layout and `langgraph_checkpoints` holds the
implementation.

**Inspect.** `resumable threads` and `resumable show-thread THREAD_ID` list the
threads and checkpoint history the saver wrote (see `langgraph_threads`).

**Sync and async.** The async methods are the implementation. The async face runs
it on the saver's own event loop thread (`resumable._engine.bridge.Bridge`), so one
store connection serves a graph used from `invoke` and `ainvoke` alike. The sync
face does too on PostgreSQL and Redis, whose clients belong to one loop; on SQLite
and memory stores it runs the call on the caller's own thread instead
(`bridge.run_here`), which saves two thread wake-ups per call, and calls take
turns, so the saver's caches never see two threads at once. A call's writes
commit in its turn, and it returns once they are on disk; on SQLite with
durability=full it waits for that fsync after its turn, so the next call's turn
runs while the disk works (`resumable.stores.syncs`). A sync method called on
the saver's loop thread raises `RuntimeError` instead of deadlocking.

**Deleting.** `prune` and `delete_for_runs` delete exactly the doomed checkpoints
and their pending writes with `Engine.delete_states` (a crash midway loses no kept
checkpoint; pruning again finishes). Versions before it rewrote a thread through
`<thread_id>` + `STAGING_SUFFIX`; a copy such a rewrite left behind after a crash
is reported, never deleted (restore it with `copy_thread`). Threads are found
through an index the saver keeps (`langgraph_threads.INDEX_THREAD`);
`delete_for_runs` reads every thread in it. The index stays because finding
LangGraph threads without it means reading one record of every snapshot thread:
with 200 LangGraph threads beside 10,000 `save_state` ones (SQLite), listing them
took about 8 ms through the index and 1.5 s by scanning. Keep LangGraph threads
apart from `Engine.save_state` threads.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import typing
from collections.abc import (
    AsyncIterator,
    Collection,
    Coroutine,
    Iterable,
    Iterator,
    Sequence,
)
from types import TracebackType
from typing import Any, Self, TypeVar

from resumable._engine.bridge import Bridge, await_on, run_here, running_loop
from resumable._engine.engine import Engine
from resumable.errors import SerializationError
from resumable.serde import Serde, TypeRegistry
from resumable.stores.syncs import DeferredSyncs

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
    )

    from resumable.integrations.langgraph_checkpoints import (
        STAGING_SUFFIX,
        CheckpointStorage,
        SendPacket,
    )
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        f"resumable.integrations.langgraph needs langgraph and langgraph-checkpoint "
        f"({exc}); pip install 'resumable[langgraph]'"
    ) from exc

__all__ = ["STAGING_SUFFIX", "ResumableSaver", "SendPacket"]

T = TypeVar("T")


async def _running_loop() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    return asyncio.get_running_loop(), threading.current_thread()


class _CodecSerializer:
    """`saver.serde` for code that calls it directly: resumable's codec, no pickle."""

    kind = "resumable"

    def __init__(self, serde: Serde) -> None:
        self._serde = serde

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self.kind, self._serde.codec.encode(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind, payload = data
        if kind != self.kind:
            raise SerializationError(
                path="serde payload",
                detail=f"it is {kind!r}, not resumable's codec; ResumableSaver never "
                f"decodes pickle or msgpack",
            )
        return self._serde.decode(payload, place="a LangGraph serde payload")


class ResumableSaver(BaseCheckpointSaver[int]):
    """LangGraph checkpointer storing threads in a resumable store.

    Args:
        engine: The Engine whose store (and keys) to use; default `Engine(store)`.
        store: A store URL, when no engine is given (default: the Engine's).
        types: State schemas (TypedDicts, dataclasses, pydantic models), classes or
            graphs whose types checkpoints may hold; see `register`.

    Raises:
        TypeError: both `engine` and `store` were given.
    """

    def __init__(
        self,
        engine: Engine | None = None,
        *,
        store: str | None = None,
        types: Iterable[object] = (),
    ) -> None:
        if engine is not None and store is not None:
            raise TypeError("pass an engine or a store URL, not both")
        self.engine: Engine = (
            engine
            if engine is not None
            else Engine(store)
            if store is not None
            else Engine()
        )
        self._owns_engine = engine is None
        super().__init__(serde=_CodecSerializer(self.engine.serde))
        self._bridge = Bridge()
        self._home: tuple[asyncio.AbstractEventLoop, threading.Thread] | None = None
        # On a store that runs on any loop, a sync call runs on its caller's thread
        # (`_call`), so calls on several threads take turns: `_turn` is held by the
        # one running, and calls on the saver's loop queue for it in `_queue`.
        self._direct = self.engine.capabilities.any_loop
        self._turn = threading.Lock()
        self._queue = asyncio.Lock()
        self._storage = CheckpointStorage(self.engine)
        register_langgraph_types(self.engine.serde.registry)
        self.register(*types)

    @classmethod
    def from_url(cls, url: str, *, types: Iterable[object] = ()) -> ResumableSaver:
        """A saver on the store at `url`, which it closes on `close()`."""
        return cls(store=url, types=types)

    def __repr__(self) -> str:
        return f"ResumableSaver({self.engine!r})"

    def register(self, *types: object) -> None:
        """Allow checkpoints to hold these types, and the types their fields use.

        Accepts classes (dataclasses, pydantic models, enums, NamedTuples),
        TypedDict schemas and other annotations (walked for such classes), and
        `StateGraph`s or compiled graphs (their schemas and channel types).

        Raises:
            TypeError: a class that the codec cannot rebuild.
        """
        registry = self.engine.serde.registry
        for item in types:
            if _is_graph(item):
                for annotation in _graph_annotations(item):
                    _register_annotation(registry, annotation, set())
            elif isinstance(item, type) and not typing.is_typeddict(item):
                registry.register(item)
            else:
                _register_annotation(registry, item, set())

    def with_allowlist(
        self, extra_allowlist: Collection[tuple[str, ...]]
    ) -> ResumableSaver:
        """Register the classes LangGraph derived from a graph (strict msgpack mode).

        Only classes of modules already imported are looked up: nothing is imported.
        """
        for entry in extra_allowlist:
            if len(entry) < 2:
                continue
            found = getattr(sys.modules.get(entry[0]), entry[1], None)
            if isinstance(found, type) and self.engine.serde.registry.info(found):
                self.engine.serde.registry.register(found)
        return self

    # --- the two faces ------------------------------------------------------------
    def _loop(self) -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
        if self._home is None:
            self._home = self._bridge.run(_running_loop())
        return self._home

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` for a synchronous caller: on its own thread when it can.

        That needs a store that runs on any loop and a caller with no loop running
        (LangGraph's `invoke` calls from its executor threads); the call then takes
        its turn and runs here. Its writes commit in the turn, and it waits for
        them to reach the disk after the turn (`syncs.DeferredSyncs`): the next
        call's turn runs meanwhile. Otherwise it runs on the saver's loop thread.
        """
        if self._direct and running_loop() is None:
            owed = DeferredSyncs()
            try:
                with self._turn, owed:
                    return run_here(coro)
            finally:
                owed.wait()  # returns (or raises) once its writes are on disk
        _, thread = self._loop()
        if threading.current_thread() is thread:
            coro.close()
            raise RuntimeError(
                "a synchronous ResumableSaver method was called on the saver's own "
                "event loop thread, which would deadlock; await its async twin "
                "(aget_tuple, aput, alist, ...) there instead"
            )
        return self._bridge.run(self._in_turn(coro))

    async def run_on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro` on the saver's own loop, in turn with the saver's calls.

        For work on `saver.engine.store` from any loop (maintenance, inspection):
        a PostgreSQL or Redis store's client belongs to the saver's loop.
        """
        loop, _ = self._loop()
        return await await_on(loop, self._in_turn(coro))

    async def _in_turn(self, coro: Coroutine[Any, Any, T]) -> T:
        """`coro` on the saver's loop, never beside a call on a caller's thread.

        The calls on this loop queue, and the first waits for the turn blocking the
        loop: only a call on a caller's thread can hold it, and that never needs
        this loop, so the wait is one call long and cannot deadlock.
        """
        if not self._direct:
            return await coro
        try:
            await self._queue.acquire()
        except BaseException:
            coro.close()  # cancelled while queued: it never ran
            raise
        try:
            with self._turn:
                return await coro
        finally:
            self._queue.release()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names (or the thread's latest), or None."""
        return self._call(self._storage.get_tuple(config))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names (or the thread's latest), or None."""
        return await self.run_on_loop(self._storage.get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # LangGraph's parameter name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints matching `config`, `filter`, `before`, newest first."""
        for snapshot in self._call(self._storage.select(config, filter, before, limit)):
            found = self._call(self._storage.tuple_of(snapshot))
            if found is not None:
                yield found

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # LangGraph's parameter name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints matching `config`, `filter`, `before`, newest first."""
        for snapshot in await self.run_on_loop(
            self._storage.select(config, filter, before, limit)
        ):
            found = await self.run_on_loop(self._storage.tuple_of(snapshot))
            if found is not None:
                yield found

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint; returns the config that names it."""
        return self._call(self._storage.put(config, checkpoint, metadata))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint; returns the config that names it."""
        return await self.run_on_loop(self._storage.put(config, checkpoint, metadata))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes against the checkpoint `config` names."""
        self._call(self._storage.put_writes(config, writes, task_id, task_path))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes against the checkpoint `config` names."""
        await self.run_on_loop(
            self._storage.put_writes(config, writes, task_id, task_path)
        )

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints and writes, in every namespace."""
        self._call(self._storage.delete_thread(str(thread_id)))

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints and writes, in every namespace."""
        await self.run_on_loop(self._storage.delete_thread(str(thread_id)))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of a thread to another thread id."""
        self._call(
            self._storage.copy_thread(str(source_thread_id), str(target_thread_id))
        )

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of a thread to another thread id."""
        await self.run_on_loop(
            self._storage.copy_thread(str(source_thread_id), str(target_thread_id))
        )

    def prune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
    ) -> None:
        """Keep only each namespace's latest checkpoint ("keep_latest"), or none ("delete")."""
        self._call(self._storage.prune(thread_ids, strategy))

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
    ) -> None:
        """Keep only each namespace's latest checkpoint ("keep_latest"), or none ("delete")."""
        await self.run_on_loop(self._storage.prune(thread_ids, strategy))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) whose metadata names these runs."""
        self._call(self._storage.delete_for_runs(run_ids))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) whose metadata names these runs."""
        await self.run_on_loop(self._storage.delete_for_runs(run_ids))

    def close(self) -> None:
        """Close the store (if the saver opened it) and stop the saver's loop thread."""
        if self._owns_engine and (self._direct or self._home is not None):
            self._call(self.engine.close())
        self._bridge.close()
        self._home = None
        self._queue = asyncio.Lock()  # the next loop's

    async def aclose(self) -> None:
        """Close the store (if the saver opened it) and stop the saver's loop thread."""
        await asyncio.to_thread(self.close)  # joins threads: never on the caller's loop

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


# --- types -------------------------------------------------------------------------
_MESSAGE_CLASSES = (
    "AIMessage",
    "AIMessageChunk",
    "HumanMessage",
    "HumanMessageChunk",
    "SystemMessage",
    "SystemMessageChunk",
    "ToolMessage",
    "ToolMessageChunk",
    "FunctionMessage",
    "FunctionMessageChunk",
    "ChatMessage",
    "ChatMessageChunk",
    "RemoveMessage",
)
_LANGGRAPH_CLASSES = (
    ("langgraph.types", "Interrupt"),
    ("langgraph.types", "Overwrite"),
    ("langgraph.types", "TimeoutPolicy"),
    ("langgraph.checkpoint.serde.types", "_DeltaSnapshot"),
    ("langchain_core.documents", "Document"),
)


def register_langgraph_types(registry: TypeRegistry) -> None:
    """Register LangChain messages and the LangGraph types checkpoints hold."""
    from langchain_core import messages

    found: list[object] = [getattr(messages, name, None) for name in _MESSAGE_CLASSES]
    for module, name in _LANGGRAPH_CLASSES:
        # these modules are imported by langgraph itself; never import by name here
        found.append(getattr(sys.modules.get(module), name, None))
    found.append(SendPacket)
    for tp in found:
        if isinstance(tp, type) and registry.info(tp) is not None:
            registry.register(tp)


def _is_graph(item: object) -> bool:
    builder = getattr(item, "builder", item)
    return hasattr(builder, "schemas") and hasattr(builder, "channels")


def _graph_annotations(item: object) -> Iterator[object]:
    """The schemas and channel value types of a StateGraph or compiled graph."""
    builder = getattr(item, "builder", item)
    yield from getattr(builder, "schemas", {})
    for channel in getattr(builder, "channels", {}).values():
        for attribute in ("ValueType", "UpdateType"):
            try:
                yield getattr(channel, attribute)
            except Exception:  # noqa: BLE001, S112 - some channels type nothing
                continue


def _register_annotation(
    registry: TypeRegistry, annotation: object, seen: set[int]
) -> None:
    """Register the classes an annotation names, descending into TypedDicts."""
    if id(annotation) in seen:
        return
    seen.add(id(annotation))
    if isinstance(annotation, type) and typing.is_typeddict(annotation):
        try:
            hints = typing.get_type_hints(annotation, include_extras=True)
        except Exception:  # noqa: BLE001 - an unresolvable name hides only itself
            hints = dict(getattr(annotation, "__annotations__", {}))
        for hint in hints.values():
            _register_annotation(registry, hint, seen)
        return
    registry.register_annotation(annotation)
    for argument in typing.get_args(annotation):
        _register_annotation(registry, argument, seen)
