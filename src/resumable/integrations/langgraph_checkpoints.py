"""The async implementation behind `ResumableSaver`: LangGraph threads on an Engine.

Import `resumable.integrations.langgraph` rather than this module: it checks that
langgraph is installed and names the extra when it is not. The layout written here
is described in `resumable.integrations.langgraph_threads`.
"""

from __future__ import annotations

import itertools
import random
import re
import time
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.types import TASKS
from langgraph.types import Send

from resumable._engine.damage import reading
from resumable._engine.engine import Engine
from resumable._engine.snapshots import Checkpoint as Snapshot
from resumable.errors import SerializationError, UsageError
from resumable.integrations.langgraph_threads import (
    LANGGRAPH_KEY,
    is_langgraph_checkpoint,
    is_writes_namespace,
    known_threads,
    langgraph_metadata,
    langgraph_parent,
    merge_writes,
    register_thread,
    writes_namespace,
    writes_record_owner,
)
from resumable.stores.packing import through
from resumable.stores.roles import (
    STAGING_SUFFIX,
    staging_thread,
    writes_owner_namespace,
)

__all__ = ["STAGING_SUFFIX", "CheckpointStorage", "SendPacket"]

_WRITES_PAGE = 16
_SEEN_MAX = 10_000


@dataclass(frozen=True, slots=True)
class SendPacket:
    """How a `langgraph.types.Send` is stored: `Send` is not a dataclass."""

    node: str
    arg: Any
    timeout: Any = None

    @classmethod
    def of(cls, send: Send) -> SendPacket:
        """The packet for a Send."""
        return cls(send.node, send.arg, getattr(send, "timeout", None))

    def send(self) -> Send:
        """The Send this packet stores."""
        if self.timeout is None:  # older langgraph: Send has no timeout
            return Send(self.node, self.arg)
        return Send(self.node, self.arg, timeout=self.timeout)


def _stored(value: Any) -> Any:
    """A write or task value as stored: Sends as packets, exceptions as repr."""
    if isinstance(value, Send):
        return SendPacket.of(value)
    if isinstance(value, BaseException):
        return repr(value)  # what LangGraph's JsonPlusSerializer stores
    return value


def _loaded(value: Any) -> Any:
    return value.send() if isinstance(value, SendPacket) else value


# LangGraph's checkpoint keys -> the short keys stored (every delta op names them)
_SHORT_KEYS = {
    "channel_values": "values",
    "channel_versions": "versions",
    "versions_seen": "seen",
    "updated_channels": "updated",
}
_LONG_KEYS = {short: long for long, short in _SHORT_KEYS.items()}
_RECORD_KEYS = frozenset({"id", "ts", "v"})  # kept in the record and its metadata
# LangGraph's ids (uuid6): its loop fails on any other with binascii.Error
_LANGGRAPH_ID: Final = re.compile(r"[\da-f]{8}(-[\da-f]{4}){3}-[\da-f]{12}", re.I)


def _stored_checkpoint(checkpoint: Checkpoint) -> dict[str, Any]:
    value: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, item in checkpoint.items():
        if key in _SHORT_KEYS:
            value[_SHORT_KEYS[key]] = item
        elif key not in _RECORD_KEYS:
            extra[key] = item
    channels = dict(checkpoint["channel_values"])
    if isinstance(channels.get(TASKS), list):
        channels[TASKS] = [_stored(send) for send in channels[TASKS]]
    value["values"] = channels
    if isinstance(extra.get("pending_sends"), list):  # checkpoints before v4
        extra["pending_sends"] = [_stored(send) for send in extra["pending_sends"]]
    if extra:
        value["extra"] = extra
    return value


def _loaded_checkpoint(snapshot: Snapshot, value: dict[str, Any]) -> Checkpoint:
    if not _LANGGRAPH_ID.fullmatch(snapshot.checkpoint_id):
        raise ValueError("its checkpoint id is not the UUID LangGraph gave it")
    metadata: dict[str, Any] = snapshot.metadata
    loaded: dict[str, Any] = {
        "v": metadata["v"],
        "id": snapshot.checkpoint_id,
        "ts": metadata["ts"],
        **value.pop("extra", {}),
        **{_LONG_KEYS.get(key, key): item for key, item in value.items()},
    }
    channels = loaded.setdefault("channel_values", {})
    if isinstance(channels.get(TASKS), list):
        channels[TASKS] = [_loaded(packet) for packet in channels[TASKS]]
    if isinstance(loaded.get("pending_sends"), list):
        loaded["pending_sends"] = [_loaded(p) for p in loaded["pending_sends"]]
    return typing.cast("Checkpoint", loaded)


def _config(thread_id: str, namespace: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": namespace,
            "checkpoint_id": checkpoint_id,
        }
    }


def _where(config: RunnableConfig) -> tuple[str, str]:
    configurable = config.get("configurable", {})
    return str(configurable["thread_id"]), str(configurable.get("checkpoint_ns", ""))


def _matches(metadata: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    # Compared in Python after decoding, as InMemorySaver does: no filter key or
    # value ever becomes part of a query.
    return all(metadata.get(key) == value for key, value in wanted.items())


class CheckpointStorage:
    """LangGraph checkpoints, pending writes and threads stored on one Engine.

    Every method is a coroutine meant for one event loop: `ResumableSaver` runs
    them all on its own loop thread, so the per-saver caches need no locks.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._registered: set[str] = set()
        # thread -> namespace -> the record this storage saved there last, and has
        # not deleted since: a delta base known to exist without a query
        self._saved: dict[str, dict[str, str]] = {}
        self._last_us = 0

    async def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names (or its thread's latest), or None."""
        thread_id, namespace = _where(config)
        found = await self._load(thread_id, namespace, get_checkpoint_id(config))
        if found is None:
            return None
        return await self._tuple(*found)

    async def tuple_of(self, snapshot: Snapshot) -> CheckpointTuple | None:
        """The checkpoint a record `select` returned describes, or None if gone."""
        found = await self._load(
            snapshot.thread_id, snapshot.namespace, snapshot.checkpoint_id
        )
        return None if found is None else await self._tuple(*found)

    async def _load(
        self, thread_id: str, namespace: str, checkpoint_id: str | None
    ) -> tuple[Snapshot, dict[str, Any]] | None:
        try:
            found = await self.engine.load_checkpoint(
                thread_id, checkpoint_id=checkpoint_id, namespace=namespace
            )
        except SerializationError as exc:
            raise _unregistered(thread_id, checkpoint_id, exc) from exc
        if found is None:
            return None
        snapshot, value = found
        if not is_langgraph_checkpoint(snapshot) or not isinstance(value, dict):
            raise UsageError(
                f"thread {thread_id!r} namespace {namespace!r} checkpoint "
                f"{snapshot.checkpoint_id!r} was not written by ResumableSaver; keep "
                f"LangGraph threads apart from Engine.save_state threads"
            )
        return snapshot, value

    async def _tuple(
        self, snapshot: Snapshot, value: dict[str, Any]
    ) -> CheckpointTuple:
        """The CheckpointTuple a loaded state describes.

        Raises:
            CorruptCheckpointError: The state is not shaped as the saver writes it.
        """
        place = f"thread {snapshot.thread_id!r} checkpoint {snapshot.checkpoint_id!r}"
        with reading(place):
            return await self._build_tuple(snapshot, value)

    async def _build_tuple(
        self, snapshot: Snapshot, value: dict[str, Any]
    ) -> CheckpointTuple:
        thread_id, namespace = snapshot.thread_id, snapshot.namespace
        parent = langgraph_parent(snapshot)
        return CheckpointTuple(
            config=_config(thread_id, namespace, snapshot.checkpoint_id),
            checkpoint=_loaded_checkpoint(snapshot, value),
            metadata=typing.cast("CheckpointMetadata", langgraph_metadata(snapshot)),
            parent_config=None
            if parent is None
            else _config(thread_id, namespace, parent),
            pending_writes=await self._pending_writes(
                thread_id, namespace, snapshot.checkpoint_id
            ),
        )

    async def _writes_records(
        self, thread_id: str, namespace: str, checkpoint_id: str
    ) -> list[Snapshot]:
        """The pending-writes records of one checkpoint, oldest first."""
        prefix, found = checkpoint_id + ".", list[Snapshot]()
        before = checkpoint_id + "/"  # just after every id starting with prefix
        # one record first: a thread's latest checkpoint (what a turn loads) has no
        # writes yet, and the record found is an older checkpoint's
        limit = 1
        while True:
            page = await self.engine.state_history(
                thread_id,
                namespace=writes_namespace(namespace),
                before=before,
                limit=limit,
            )
            # ids sort as the checkpoint's own just below `before`: take those,
            # skipping a checkpoint whose id merely starts with this one's
            mine = list(
                itertools.takewhile(lambda r: r.checkpoint_id.startswith(prefix), page)
            )
            found.extend(
                r for r in mine if writes_record_owner(r.checkpoint_id) == checkpoint_id
            )
            if len(mine) < limit:
                return found[::-1]
            before = mine[-1].checkpoint_id
            limit = min(2 * limit, _WRITES_PAGE)

    async def _pending_writes(
        self, thread_id: str, namespace: str, checkpoint_id: str
    ) -> list[PendingWrite]:
        loaded = []
        for record in await self._writes_records(thread_id, namespace, checkpoint_id):
            value = await self._load_writes(record)
            if value is not None:
                loaded.append((record.metadata, value))
        return [
            (task_id, channel, _loaded(value))
            for task_id, channel, value in merge_writes(loaded)
        ]

    async def _load_writes(self, record: Snapshot) -> dict[str, Any] | None:
        try:
            found = await self.engine.load_checkpoint(
                record.thread_id,
                checkpoint_id=record.checkpoint_id,
                namespace=record.namespace,
            )
        except SerializationError as exc:
            raise _unregistered(record.thread_id, record.checkpoint_id, exc) from exc
        return None if found is None else found[1]

    async def select(
        self,
        config: RunnableConfig | None,
        wanted: Mapping[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> list[Snapshot]:
        """The checkpoint records `list` returns, from metadata alone."""
        configurable = config.get("configurable", {}) if config is not None else {}
        namespace = configurable.get("checkpoint_ns")
        only = configurable.get("checkpoint_id")
        before_id = get_checkpoint_id(before) if before is not None else None
        if "thread_id" in configurable:
            threads = [str(configurable["thread_id"])]
        else:
            threads = await known_threads(self.engine)
        # the store can apply `limit` itself only when every record it returns counts
        pushed = limit if namespace is not None and not wanted and not only else None
        selected: list[Snapshot] = []
        for thread_id in threads:
            if limit is not None and len(selected) >= limit:
                break
            records = await self.engine.state_history(
                thread_id, namespace=namespace, before=before_id, limit=pushed
            )
            for record in records:
                if limit is not None and len(selected) >= limit:
                    break
                if not is_langgraph_checkpoint(record):
                    continue
                if only is not None and record.checkpoint_id != only:
                    continue
                if wanted and not _matches(langgraph_metadata(record), wanted):
                    continue
                selected.append(record)
        return selected

    async def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
    ) -> RunnableConfig:
        """Save a checkpoint under the thread and namespace `config` names."""
        thread_id, namespace = _where(config)
        await self._register(thread_id)
        await self._save_checkpoint(
            thread_id,
            namespace,
            checkpoint["id"],
            _stored_checkpoint(checkpoint),
            {
                LANGGRAPH_KEY: get_serializable_checkpoint_metadata(config, metadata),
                "ts": checkpoint["ts"],
                "v": checkpoint["v"],
            },
            parent=get_checkpoint_id(config),
        )
        return _config(thread_id, namespace, checkpoint["id"])

    async def _save_checkpoint(
        self,
        thread_id: str,
        namespace: str,
        checkpoint_id: str,
        value: dict[str, Any],
        metadata: dict[str, Any],
        *,
        parent: str | None,
    ) -> None:
        """Save with LangGraph's parent as the snapshot's parent (the delta base).

        Without a LangGraph parent, or when it was deleted, the Engine picks the
        latest checkpoint as base and `metadata["parent"]` keeps LangGraph's own.
        """
        metadata = {k: v for k, v in metadata.items() if k != "parent"}
        base = await self._existing(thread_id, namespace, parent)
        if base != parent:
            metadata["parent"] = parent
        await self._save(
            thread_id, namespace, checkpoint_id, value, metadata, base=base
        )

    async def _existing(
        self, thread_id: str, namespace: str, record_id: str | None
    ) -> str | None:
        """`record_id` if that record exists, else None.

        Checked with a query unless this storage saved it last. Never trusted from
        the Engine's cache alone: `Engine.delete_thread` leaves it in place, and a
        delta against a deleted snapshot could never be loaded.
        """
        if record_id is None:
            return None
        if self._saved.get(thread_id, {}).get(namespace) == record_id:
            return record_id
        return (
            record_id if await self._exists(thread_id, namespace, record_id) else None
        )

    async def _save(
        self,
        thread_id: str,
        namespace: str,
        record_id: str,
        value: Any,
        metadata: dict[str, Any],
        *,
        base: str | None,
    ) -> None:
        """Save a record as a delta against `base` (None: the latest, if any)."""
        await self.engine.save_state(
            thread_id,
            value,
            metadata=metadata,
            parent=base,
            namespace=namespace,
            checkpoint_id=record_id,
        )
        if len(self._saved) >= _SEEN_MAX and thread_id not in self._saved:
            self._saved.clear()
        self._saved.setdefault(thread_id, {})[namespace] = record_id

    async def _delete(self, thread_id: str) -> None:
        await self.engine.delete_thread(thread_id)
        self._saved.pop(thread_id, None)

    async def _exists(self, thread_id: str, namespace: str, checkpoint_id: str) -> bool:
        found = await self.engine.state_history(
            thread_id, namespace=namespace, before=through(checkpoint_id), limit=1
        )
        return bool(found) and found[0].checkpoint_id == checkpoint_id

    async def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> None:
        """Save one task's writes as a new record beside its checkpoint."""
        if not writes:
            return
        thread_id, namespace = _where(config)
        checkpoint_id = str(config.get("configurable", {})["checkpoint_id"])
        await self._register(thread_id)
        namespace = writes_namespace(namespace)
        record_id = f"{checkpoint_id}.{self._writes_suffix()}"
        # Never rewritten: concurrent tasks cannot lose each other's writes, and
        # readers merge repeats the way LangGraph's savers keep them (merge_writes).
        value = {str(i): _stored(item) for i, (_, item) in enumerate(writes)}
        metadata = {
            "task": task_id,
            "path": task_path,
            "channels": [channel for channel, _ in writes],
        }
        # the last writes record saved here is the base: no query for the latest
        base = self._saved.get(thread_id, {}).get(namespace)
        await self._save(thread_id, namespace, record_id, value, metadata, base=base)

    def _writes_suffix(self) -> str:
        """16 hex digits: µs since the epoch, increasing in this process, and noise.

        The noise tells apart processes writing at the same µs; it needs no secrecy,
        and `random` (reseeded in a forked child) costs no syscall, as
        `secrets` does (put_writes runs at every LangGraph step).
        """
        self._last_us = max(time.time_ns() // 1000, self._last_us + 1)
        noise = random.getrandbits(12)
        return f"{self._last_us:013x}{noise:03x}"

    async def _register(self, thread_id: str) -> None:
        if thread_id in self._registered:
            return
        await register_thread(self.engine, thread_id)
        if len(self._registered) >= _SEEN_MAX:
            self._registered.clear()
        self._registered.add(thread_id)

    async def delete_thread(self, thread_id: str) -> None:
        """Delete the thread's checkpoints and writes (its index record stays)."""
        await self._delete(thread_id)

    async def copy_thread(self, source: str, target: str) -> None:
        """Save every record of `source` under `target`, oldest first."""
        records = await self.engine.state_history(source, namespace=None)
        if records:
            await self._register(target)
            await self._copy(source, target, records)

    async def _copy(self, source: str, target: str, records: list[Snapshot]) -> None:
        """Save `records` of thread `source` under `target`, oldest first."""
        for record in sorted(records, key=lambda r: (r.checkpoint_id, r.namespace)):
            found = await self.engine.load_checkpoint(
                source, checkpoint_id=record.checkpoint_id, namespace=record.namespace
            )
            if found is None:
                continue
            if is_writes_namespace(record.namespace):
                base = self._saved.get(target, {}).get(record.namespace)
                await self._save(
                    target,
                    record.namespace,
                    record.checkpoint_id,
                    found[1],
                    record.metadata,
                    base=base,
                )
            elif is_langgraph_checkpoint(record):
                await self._save_checkpoint(
                    target,
                    record.namespace,
                    record.checkpoint_id,
                    found[1],
                    record.metadata,
                    parent=langgraph_parent(record),
                )

    async def _check_no_staging(self, thread_id: str) -> None:
        """Refuse to touch a thread an older version's crashed rewrite left staged.

        Versions before `Engine.delete_states` rewrote a pruned thread through
        `thread_id + STAGING_SUFFIX`; after a crash midway that copy may hold
        checkpoints the thread lacks, so it is reported, never deleted here.
        """
        staging = staging_thread(thread_id)
        if await self.engine.state_history(staging, namespace=None, limit=1):
            raise UsageError(
                f"thread {thread_id!r}: an earlier prune or delete_for_runs did not "
                f"finish, and thread {staging!r} holds its surviving checkpoints; "
                f"restore them with saver.copy_thread({staging!r}, {thread_id!r}) "
                f"if the thread lacks them, then saver.delete_thread({staging!r})"
            )

    async def _keep_only(
        self,
        thread_id: str,
        records: list[Snapshot],
        checkpoints: set[tuple[str, str]],
    ) -> None:
        """Delete the thread's records but these (namespace, id) checkpoints and their writes."""
        doomed = [
            (record.namespace, record.checkpoint_id)
            for record in records
            if (record.namespace, record.checkpoint_id) not in checkpoints
            and (
                not is_writes_namespace(record.namespace)
                or (
                    writes_owner_namespace(record.namespace),
                    writes_record_owner(record.checkpoint_id),
                )
                not in checkpoints
            )
        ]
        if doomed:
            await self._check_no_staging(thread_id)
            # one call; a crash midway leaves some doomed records, never a kept
            # one unloadable: pruning again finishes
            await self.engine.delete_states(thread_id, doomed)
            # the last record saved per namespace may be gone: no delta against it
            self._saved.pop(thread_id, None)

    async def prune(self, thread_ids: Sequence[str], strategy: str) -> None:
        """Keep each namespace's latest checkpoint ("keep_latest"), or none ("delete")."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(
                f"unknown prune strategy {strategy!r}; use 'keep_latest' or 'delete'"
            )
        for thread_id in map(str, thread_ids):
            if strategy == "delete":
                await self._delete(thread_id)
                continue
            records = await self.engine.state_history(thread_id, namespace=None)
            latest: dict[str, str] = {}
            for record in records:  # newest first
                if is_langgraph_checkpoint(record):
                    latest.setdefault(record.namespace, record.checkpoint_id)
            await self._keep_only(thread_id, records, set(latest.items()))

    async def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete, in every indexed thread, the checkpoints these runs wrote."""
        doomed = set(run_ids)
        if not doomed:
            return
        for thread_id in await known_threads(self.engine):
            records = await self.engine.state_history(thread_id, namespace=None)
            keep = {
                (record.namespace, record.checkpoint_id)
                for record in records
                if is_langgraph_checkpoint(record)
                and langgraph_metadata(record).get("run_id") not in doomed
            }
            await self._keep_only(thread_id, records, keep)


def _unregistered(
    thread_id: str, checkpoint_id: str | None, exc: SerializationError
) -> SerializationError:
    return SerializationError(
        path=f"thread {thread_id!r} checkpoint {checkpoint_id or '(latest)'!r}",
        detail=f"{exc.detail}; ResumableSaver(types=[...]) or saver.register(...) "
        f"registers your graph state's types",
    )
