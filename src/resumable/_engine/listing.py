"""Run listings and counts: what `Engine.runs` and a dashboard show of many runs.

`RunView` is a run as listed. `RunFilter` says which runs; `Engine.runs_page` returns one page of them and an
opaque cursor to the next (keyset pagination: a page costs the same at run 100,000
as at run 1); `Engine.count_runs` counts them by status and queue. `Engine.threads`
pages through the threads holding snapshots the same way, leaving out the threads
the library keeps for itself (`is_internal_thread`).
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from resumable._engine.clock import datetime_of
from resumable.errors import ResumableError, UsageError
from resumable.serde import Serde
from resumable.stores.checks import checked_run
from resumable.stores.places import run_place
from resumable.stores.protocol import (
    RUN_STATUSES,
    RunListing,
    RunQuery,
    RunRecord,
    RunStatus,
    SnapshotStore,
)
from resumable.stores.roles import ThreadRole, thread_role


@dataclass(frozen=True, slots=True, kw_only=True)
class RunView:
    """A run as `Engine.runs()` lists it."""

    run_id: str
    workflow: str
    status: RunStatus
    created_at: datetime
    updated_at: datetime
    parent_id: str | None
    forked_from: str | None
    fork_seq: int | None
    queue: str | None
    version: str | None = None
    """The workflow version the run started on (`@workflow(version=)`)."""
    lease_owner: str | None = None
    """The worker that holds (or last held) the run's lease."""
    lease_expires_at: datetime | None = None
    """When that lease ends unless renewed (None: never leased)."""
    wake_at: datetime | None = None
    """When a sleeping run wakes, or a waiting run's earliest timeout fires."""
    error: str | None = None
    """Why a failed run failed (`Type: message`, and the step it failed in),
    whether a step's retries ran out or the workflow's own code raised.
    Set by `Engine.get`; listings leave it None (they decode no payloads)."""
    error_traceback: str | None = None
    """The traceback recorded with `error` (set by `Engine.get`)."""
    input: Any = None
    """The run's arguments as `{"args": [...], "kwargs": {...}}` of generic views
    (`resumable.serde.view`; set by `Engine.get`)."""
    result: Any = None
    """The generic view of a succeeded run's result (set by `Engine.get`)."""
    unreadable: tuple[str, ...] = ()
    """Why any of the values above could not be read here (e.g. no key)."""

    @classmethod
    def of(cls, run: RunRecord) -> RunView:
        """The view of a stored run."""
        return cls(
            run_id=run.run_id,
            workflow=run.workflow,
            status=run.status,
            created_at=datetime_of(run.created_at_ms),
            updated_at=datetime_of(run.updated_at_ms),
            parent_id=run.parent_id,
            forked_from=run.forked_from,
            fork_seq=run.fork_seq,
            queue=run.queue,
            version=run.version,
            lease_owner=run.lease_owner,
            lease_expires_at=_lease_time(run.lease_expires_at_ms),
            wake_at=None if run.wake_at_ms is None else _lease_time(run.wake_at_ms),
        )

    @classmethod
    def detailed(cls, run: RunRecord, serde: Serde) -> RunView:
        """The view of one run with its input, and its result or error, decoded."""
        problems: list[str] = []
        error = trace = result = None
        run_input = _call_view(
            _decoded(serde.view, run.input, run_place(run.run_id, "input"), problems)
        )
        output_place = run_place(run.run_id, "output")
        if run.status == "failed" and run.output is not None:
            info = _decoded(serde.loads, run.output, output_place, problems)
            if isinstance(info, dict):
                error, trace = _error_text(info), info.get("traceback")
        elif run.status == "succeeded" and run.output is not None:
            result = _decoded(serde.view, run.output, output_place, problems)
        return dataclasses.replace(
            cls.of(run),
            error=error,
            error_traceback=None if trace is None else str(trace),
            input=run_input,
            result=result,
            unreadable=tuple(problems),
        )


def _decoded(
    decode: Callable[..., Any], data: bytes, place: str, problems: list[str]
) -> Any:
    try:
        return decode(data, place=place)
    except ResumableError as exc:  # shown as unreadable; the rest still shows
        problems.append(str(exc))
        return None


def _items(view: Any) -> Any:
    """A tuple's view (`{"$type": "tuple", "$items": [...]}`) as its list of items."""
    if isinstance(view, dict) and view.get("$type") == "tuple":
        return view.get("$items")
    return view


def _call_view(view: Any) -> Any:
    """The view of a stored `(args, kwargs)` as `{"args": [...], "kwargs": {...}}`."""
    pair = _items(view)
    if not (isinstance(pair, list) and len(pair) == 2):
        return view  # unreadable (None), or not a call: shown as it is
    return {"args": _items(pair[0]), "kwargs": pair[1]}


def _error_text(info: dict[str, Any]) -> str:
    """`Type: message`, then where: the step (and its number) or the workflow's code."""
    text = f"{info.get('type')}: {info.get('message')}"
    step = info.get("step")
    if step is None:
        return f"{text} (raised by the workflow's own code)"
    seq = info.get("seq")
    where = f"step #{seq} {step!r}" if seq is not None else f"step {step!r}"
    attempts = info.get("attempts")
    tries = (
        f" after {attempts} attempt{'s' if attempts != 1 else ''}" if attempts else ""
    )
    return f"{text} (in {where}{tries})"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPage:
    """One page of `Engine.runs_page`."""

    runs: list[RunView]
    next_cursor: str | None
    """Pass it back as `cursor` for the next page; None on the last page."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFilter:
    """Which runs: every field given narrows the selection."""

    status: Sequence[RunStatus] = ()
    """Runs in any of these statuses (empty: any status)."""
    workflow: str | None = None
    queue: str | None = None
    version: str | None = None
    """The `@workflow(version=)` the run started on."""
    parent: str | None = None
    """Child runs of this run."""
    forked_from: str | None = None
    """Forks of this run."""
    run_id_prefix: str | None = None
    """Runs whose run_id starts with this."""
    created_since: datetime | None = None
    """Runs created at or after this time."""
    created_before: datetime | None = None
    """Runs created before this time."""

    def query(
        self, *, limit: int = 100, after: tuple[int, str] | None = None
    ) -> RunQuery:
        """The store query for this filter."""
        return RunQuery(
            status=tuple(self.status),
            workflow=self.workflow,
            queue=self.queue,
            version=self.version,
            parent_id=self.parent,
            forked_from=self.forked_from,
            run_id_prefix=self.run_id_prefix,
            created_since_ms=_ms(self.created_since),
            created_before_ms=_ms(self.created_before),
            limit=limit,
            after=after,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCounts:
    """How many runs a filter selects, by status and by queue."""

    by_status_and_queue: dict[tuple[str, str | None], int] = field(default_factory=dict)
    """Runs per `(status, queue)`; `queue` is None for runs not enqueued."""

    @property
    def total(self) -> int:
        """Every run counted."""
        return sum(self.by_status_and_queue.values())

    def by_status(self) -> dict[str, int]:
        """Runs per status, in lifecycle order (statuses with no run left out)."""
        counts: dict[str, int] = {}
        for (status, _), n in self.by_status_and_queue.items():
            counts[status] = counts.get(status, 0) + n
        return {s: counts[s] for s in sorted(counts, key=_lifecycle_order)}

    def by_queue(self) -> dict[str, dict[str, int]]:
        """Runs per queue name, then per status (runs without a queue left out)."""
        queues: dict[str, dict[str, int]] = {}
        for (status, queue), n in sorted(
            self.by_status_and_queue.items(),
            key=lambda item: (item[0][1] or "", item[0][0]),
        ):
            if queue is not None:
                queues.setdefault(queue, {})[status] = n
        return queues


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadView:
    """A thread holding snapshots (`Engine.save_state`, or a LangGraph thread)."""

    thread_id: str
    updated_at: datetime
    """When its newest snapshot was saved (in any namespace)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadPage:
    """One page of `Engine.threads`."""

    threads: list[ThreadView]
    next_cursor: str | None
    """Pass it back as `cursor` for the next page; None on the last page."""


async def list_runs(
    store: RunListing,
    *,
    status: RunStatus | list[RunStatus] | None,
    workflow: str | None,
    parent: str | None,
    forked_from: str | None,
    queue: str | None,
    limit: int,
    version: str | None,
) -> list[RunView]:
    """`Engine.runs`: the runs matching every filter given, newest first."""
    statuses = [status] if isinstance(status, str) else list(status or [])
    records = await store.list_runs(
        RunQuery(
            status=statuses,
            workflow=workflow,
            parent_id=parent,
            forked_from=forked_from,
            queue=queue,
            limit=limit,
            version=version,
        )
    )
    return [RunView.of(checked_run(run)) for run in records]


async def runs_page(
    store: RunListing, selection: RunFilter | None, *, limit: int, cursor: str | None
) -> RunPage:
    """`Engine.runs_page`: one page of the runs `selection` matches, newest first."""
    query = (selection or RunFilter()).query(
        limit=limit + 1, after=None if cursor is None else decode_cursor(cursor)
    )
    records = await store.list_runs(query)
    runs = [RunView.of(checked_run(run)) for run in records[:limit]]
    last = records[limit - 1] if len(records) > limit else None
    return RunPage(
        runs=runs,
        next_cursor=None
        if last is None
        else encode_cursor(last.created_at_ms, last.run_id),
    )


async def count_runs(store: RunListing, selection: RunFilter | None) -> RunCounts:
    """`Engine.count_runs`: how many runs `selection` matches, by status and queue."""
    return RunCounts(
        by_status_and_queue=await store.count_runs((selection or RunFilter()).query())
    )


def is_internal_thread(thread_id: str) -> bool:
    """Whether the library keeps this thread for itself (never listed to users)."""
    return thread_role(thread_id) is not ThreadRole.USER


async def threads_page(
    store: SnapshotStore, *, prefix: str | None, limit: int, cursor: str | None
) -> ThreadPage:
    """`Engine.threads`: a page of user threads, read past internal ones."""
    after = None if cursor is None else decode_cursor(cursor)
    found: list[tuple[int, str]] = []
    while len(found) <= limit:
        batch = await store.list_threads(prefix=prefix, after=after, limit=limit + 1)
        found += [
            (t.updated_at_ms, t.thread_id) for t in batch if t.role is ThreadRole.USER
        ]
        if len(batch) <= limit:
            break  # the store has no more
        after = (batch[-1].updated_at_ms, batch[-1].thread_id)
    shown = found[: max(limit, 0)]
    return ThreadPage(
        threads=[
            ThreadView(
                thread_id=thread_id,
                updated_at=datetime.fromtimestamp(ms / 1000, tz=UTC),
            )
            for ms, thread_id in shown
        ],
        next_cursor=encode_cursor(*shown[-1]) if len(found) > limit > 0 else None,
    )


def encode_cursor(created_at_ms: int, run_id: str) -> str:
    """The opaque cursor after a run (or thread): URL-safe, for a query string."""
    raw = json.dumps([created_at_ms, run_id]).encode("utf-8", "surrogatepass")
    return base64.urlsafe_b64encode(raw).decode("ascii")


def decode_cursor(cursor: str) -> tuple[int, str]:
    """The key `encode_cursor` made.

    Raises:
        UsageError: the cursor was not made by `encode_cursor`.
    """
    try:
        created_at_ms, run_id = json.loads(
            base64.urlsafe_b64decode(cursor.encode("ascii")).decode(
                "utf-8", "surrogatepass"
            )
        )
    except (ValueError, TypeError, UnicodeError) as exc:
        raise UsageError(
            f"cursor {cursor[:40]!r} is not one Engine.runs_page (or Engine.threads) "
            "returned; "
            "start from the first page (cursor=None)"
        ) from exc
    if not isinstance(created_at_ms, int) or not isinstance(run_id, str):
        raise UsageError(
            f"cursor {cursor[:40]!r} is not one Engine.runs_page (or Engine.threads) "
            "returned; "
            "start from the first page (cursor=None)"
        )
    return created_at_ms, run_id


def _lease_time(ms: int) -> datetime | None:
    """A lease's expiry to show; None if never leased, or past what a datetime holds.

    Only shown, never acted on: the store compares the stored number itself, so a
    damaged expiry must not make every listing of the run fail.
    """
    try:
        return datetime_of(ms) if ms else None
    except (ValueError, OverflowError, OSError):
        return None


def _lifecycle_order(status: str) -> tuple[int, str]:
    known = status in RUN_STATUSES
    return (RUN_STATUSES.index(status) if known else len(RUN_STATUSES), status)


def _ms(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)
