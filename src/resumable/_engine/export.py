"""Export: every step of the selected runs as one flat record, for analysis.

Each record is a step of a run's journal (a fork's shared steps included, and
marked) with its timings, attempts, the fingerprint of its arguments, the
token usage and cost of every attempt (priced by the engine's PriceTable, as
the ledger prices them), and the generic view of its result or error
(`resumable.serde.view`), so it reads without the application's code. A value
that cannot be read is marked in `unreadable` and the export goes on: one
damaged payload does not hide ten thousand good ones.

A step's arguments are not stored (only their fingerprint, which replay
compares), so they cannot be exported; the run's own input can (`run_input`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from resumable._engine.clock import datetime_of
from resumable._engine.history import in_call_order
from resumable._engine.journal import load_journal
from resumable._engine.ledger import (
    Ledger,
    cached_source,
    ledger_of,
    spend_of,
    usage_entries,
)
from resumable.errors import ResumableError, RunNotFound
from resumable.pricing import PriceTable
from resumable.serde import Serde
from resumable.stores.places import input_place, run_place, step_place
from resumable.stores.protocol import (
    RunListing,
    RunQuery,
    RunRecord,
    RunStatus,
    RunStore,
    StepRecord,
)

__all__ = ["ExportQuery", "JournalPage", "StepExport", "export_steps", "journal_page"]

_ALL = 1 << 40  # a limit no store reaches: every matching run
_ERROR_STATUSES = frozenset({"failed", "retrying"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportQuery:
    """Which runs `Engine.export` reads; every field given narrows the selection."""

    run_ids: Sequence[str] = ()
    """These runs only (each must exist); empty: every run the filters match."""
    workflow: str | None = None
    status: Collection[str] = ()
    created_since_ms: int | None = None
    """Runs created at or after this time (ms since the epoch)."""
    run_input: bool = False
    """Add the view of the run's input `(args, kwargs)` to each record."""
    steps: slice | None = None
    """Only these of each run's journal entries, by position (None: all)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StepExport:
    """One step of one run, flat, with its values as generic views."""

    run_id: str
    workflow: str
    run_status: str
    seq: int
    """The step's number in call order, as `resumable show` prints it; a
    `map_steps` item has its map call's number (see `Engine.history`)."""
    item_key: str | None
    """For a `map_steps` item: the key the workflow gave it."""
    step: str
    status: str
    attempts: int
    started_at: datetime
    finished_at: datetime
    duration_ms: int
    args_fingerprint: str
    inherited_from: str | None
    """The run this step belongs to, when it is shared with a fork."""
    calls: int
    """LLM calls recorded for the step, every attempt included."""
    input_tokens: int
    cached_input_tokens: int
    cache_write_tokens: int
    output_tokens: int
    cost_usd: float | None
    """Dollars of the step's calls; None when a call's model has no price (the
    tokens are still counted, and `unpriced_calls` says how many)."""
    unpriced_calls: int
    unmetered_calls: int
    """Calls whose usage could not be known: in `calls`, not in tokens or dollars."""
    models: tuple[str, ...]
    result: Any
    """The view of the recorded result (or, while waiting, its deadline)."""
    error: Any
    """The view of the recorded error of a failed or retrying step."""
    run_input: Any
    """The view of the run's `(args, kwargs)`, when the export asked for it."""
    unreadable: tuple[str, ...]
    """Why a value of this record could not be read (then it is None)."""
    cached_from_run: str | None = None
    """For a step served from the step cache: the run whose row it copied (its
    calls and dollars are then those that run made, reused here, not incurred)."""
    cached_from_seq: int | None = None
    """... and that row's stored seq."""

    def to_json(self) -> dict[str, Any]:
        """The record as JSON-ready data (times as ISO 8601 text)."""
        data = asdict(self)
        data["started_at"] = self.started_at.isoformat()
        data["finished_at"] = self.finished_at.isoformat()
        data["models"] = list(self.models)
        data["unreadable"] = list(self.unreadable)
        return data


def export_query(
    run_ids: Sequence[str],
    *,
    workflow: str | None,
    status: RunStatus | Sequence[RunStatus] | None,
    since: datetime | timedelta | None,
    run_input: bool,
    now_ms: int,
    steps: slice | None = None,
) -> ExportQuery:
    """The query for `Engine.export`'s arguments (`since` as a time or an age)."""
    if isinstance(since, timedelta):
        since = datetime_of(now_ms) - since
    return ExportQuery(
        run_ids=[run_ids] if isinstance(run_ids, str) else list(run_ids),
        workflow=workflow,
        status=[status] if isinstance(status, str) else list(status or ()),
        created_since_ms=None if since is None else int(since.timestamp() * 1000),
        run_input=run_input,
        steps=steps,
    )


async def export_steps(
    store: RunStore,
    listing: RunListing | None,
    serde: Serde,
    prices: PriceTable,
    query: ExportQuery,
) -> AsyncIterator[StepExport]:
    """The records of every selected run, oldest run first, each in seq order.

    `listing`: the store's listing, needed unless the query names its runs.
    """
    for run in await _select(store, listing, query):
        journal = await load_journal(store, run, serde=serde)
        entries = in_call_order(journal, serde)
        for record in journal_records(
            serde, prices, run, entries, steps=query.steps, run_input=query.run_input
        ):
            yield record


def journal_records(
    serde: Serde,
    prices: PriceTable,
    run: RunRecord,
    entries: list[tuple[int, str | None, StepRecord]],
    *,
    steps: slice | None,
    run_input: bool,
) -> Iterator[StepExport]:
    """The records of a run's journal as read (`in_call_order`), these `steps` only."""
    problems: list[str] = []
    view = None
    if run_input:
        view = _view(serde, run.input, run_place(run.run_id, "input"), problems)
    # only the records asked for are made: each reads its values
    for number, key, record in entries if steps is None else entries[steps]:
        yield _record(
            serde,
            prices,
            run=run,
            step=record,
            number=number,
            item_key=key,
            run_input=view,
            run_problems=problems,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalPage:
    """Some of a run's steps, how many it has and its ledger, from one journal read."""

    total: int
    """How many steps the run has (items of `map_steps` calls included)."""
    steps: list[StepExport]
    """The steps asked for, as `Engine.export` gives them."""
    ledger: Ledger | None
    """The run's ledger (`Engine.ledger`); None if it cannot be read here."""
    ledger_problem: str | None = None
    """Why the ledger cannot be read (say, encrypted and the key is missing)."""


async def journal_page(
    store: RunStore, serde: Serde, prices: PriceTable, run: RunRecord, steps: slice
) -> JournalPage:
    """`Engine.journal_page`: the journal read once; only `steps` have their values read."""
    journal = await load_journal(store, run, serde=serde)
    entries = in_call_order(journal, serde)
    records = list(
        journal_records(serde, prices, run, entries, steps=steps, run_input=True)
    )
    try:
        ledger: Ledger | None = ledger_of(run.run_id, journal.values(), serde, prices)
    except ResumableError as exc:
        return JournalPage(
            total=len(entries), steps=records, ledger=None, ledger_problem=str(exc)
        )
    return JournalPage(total=len(entries), steps=records, ledger=ledger)


async def _select(
    store: RunStore, listing: RunListing | None, query: ExportQuery
) -> list[RunRecord]:
    if query.run_ids:
        runs = []
        for run_id in dict.fromkeys(query.run_ids):
            run = await store.get_run(run_id)
            if run is None:
                raise RunNotFound(run_id=run_id)
            runs.append(run)
    else:
        assert listing is not None  # noqa: S101 - Engine.export asked for it
        listed = await listing.list_runs(
            RunQuery(status=query.status, workflow=query.workflow, limit=_ALL)
        )
        runs = list(reversed(listed))  # listed newest first
    return [
        run
        for run in runs
        if (query.workflow is None or run.workflow == query.workflow)
        and (not query.status or run.status in query.status)
        and (
            query.created_since_ms is None
            or run.created_at_ms >= query.created_since_ms
        )
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class InputView:
    """An input sent to a run (`Engine.send`), its value as a generic view."""

    key: str
    sent_at: datetime
    value: Any
    """The generic view of the value (None if it could not be read: see `unreadable`)."""
    unreadable: str | None = None
    """Why the value could not be read (say, encrypted and the key is missing)."""


async def input_views(store: RunListing, serde: Serde, run_id: str) -> list[InputView]:
    """`Engine.inputs`: every input sent to the run, oldest first."""
    views = []
    for record in await store.list_inputs(run_id):
        problems: list[str] = []
        value = _view(serde, record.value, input_place(run_id, record.key), problems)
        views.append(
            InputView(
                key=record.key,
                sent_at=_datetime(record.sent_at_ms),
                value=value,
                unreadable="; ".join(problems) or None,
            )
        )
    return views


def _view(serde: Serde, data: bytes | None, place: str, problems: list[str]) -> Any:
    if data is None:
        return None
    try:
        return serde.view(data, place=place)
    except ResumableError as exc:
        problems.append(str(exc))
        return None


def _record(
    serde: Serde,
    prices: PriceTable,
    *,
    run: RunRecord,
    step: StepRecord,
    number: int,
    item_key: str | None,
    run_input: Any,
    run_problems: list[str],
) -> StepExport:
    problems = list(run_problems)
    place = step_place(step.run_id, step.seq, step.name)
    value = _view(serde, step.output, place, problems)
    usages = []
    source = None
    if step.usage is not None:
        try:
            raw = serde.loads(step.usage, place=place + " usage")
            source = cached_source(raw)
            usages = [usage for _, usage in usage_entries(raw, place=place + " usage")]
        except ResumableError as exc:
            problems.append(f"{place} usage: {exc}")
    unpriced: set[str] = set()
    spend = spend_of(usages, prices, unpriced)
    failed = step.status in _ERROR_STATUSES
    return StepExport(
        run_id=run.run_id,
        workflow=run.workflow,
        run_status=run.status,
        seq=number,
        item_key=item_key,
        step=step.name,
        status=step.status,
        attempts=step.attempts,
        started_at=_datetime(step.started_at_ms),
        finished_at=_datetime(step.finished_at_ms),
        duration_ms=step.finished_at_ms - step.started_at_ms,
        args_fingerprint=step.fingerprint,
        inherited_from=None if step.run_id == run.run_id else step.run_id,
        calls=spend.calls,
        input_tokens=spend.input_tokens,
        cached_input_tokens=spend.cached_input_tokens,
        cache_write_tokens=spend.cache_write_tokens,
        output_tokens=spend.output_tokens,
        cost_usd=None if spend.unpriced_calls else spend.cost_usd,
        unpriced_calls=spend.unpriced_calls,
        unmetered_calls=spend.unmetered_calls,
        models=tuple(sorted({u.model for u in usages if u.model is not None})),
        result=None if failed else value,
        error=value if failed else None,
        run_input=run_input,
        unreadable=tuple(problems),
        cached_from_run=None if source is None else source[0],
        cached_from_seq=None if source is None else source[1],
    )


def _datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)
