"""The runs page: one page of runs, filtered, with counts by status."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from resumable._engine.engine import Engine
from resumable._engine.listing import RunFilter, RunView
from resumable.errors import UsageError
from resumable.stores.protocol import RUN_STATUSES, RunStatus
from resumable.ui.html import badge, esc, table, url, when

PAGE_SIZES = (25, 50, 100, 200)
_FILTER_KEYS = ("q", "workflow", "queue", "version", "since", "until")


def run_filter(params: Mapping[str, str], *, with_status: bool = True) -> RunFilter:
    """The selection the page's query string names.

    Raises:
        UsageError: a time is not ISO 8601 or a status is unknown.
    """
    status = params.get("status") or ""
    if status and status not in RUN_STATUSES:
        raise UsageError(
            f"unknown status {status!r}; choose one of {', '.join(RUN_STATUSES)}"
        )
    statuses: tuple[RunStatus, ...] = (status,) if status and with_status else ()  # type: ignore[assignment]  # checked against RUN_STATUSES above
    return RunFilter(
        status=statuses,
        workflow=params.get("workflow") or None,
        queue=params.get("queue") or None,
        version=params.get("version") or None,
        run_id_prefix=params.get("q") or None,
        created_since=_time(params, "since"),
        created_before=_time(params, "until"),
    )


def _time(params: Mapping[str, str], key: str) -> datetime | None:
    text = params.get(key) or ""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"{key}={text!r} is not a time; use ISO 8601, e.g. 2026-11-26T08:00"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


async def render(engine: Engine, params: Mapping[str, str]) -> str:
    """The page: the filter form, then the live part (counts, table, pager)."""
    text = params.get("limit") or ""
    limit = int(text) if text.isdigit() and int(text) in PAGE_SIZES else 50
    selection = run_filter(params)
    counts = await engine.count_runs(run_filter(params, with_status=False))
    found = await engine.runs_page(
        selection, limit=limit, cursor=params.get("cursor") or None
    )
    kept: dict[str, object] = {k: params.get(k, "") for k in _FILTER_KEYS}
    kept["limit"] = limit
    return (
        _filters(params, limit)
        + "<div id=live data-terminal=0>"
        + _counts(counts.by_status(), counts.total, params.get("status", ""), kept)
        + _rows(found.runs)
        + _pager(found.next_cursor, params, kept)
        + "</div>"
    )


def _filters(params: Mapping[str, str], limit: int) -> str:
    def field(name: str, label: str, placeholder: str = "") -> str:
        return (
            f'<label>{esc(label)} <input name={name} value="{esc(params.get(name, ""))}"'
            f' placeholder="{esc(placeholder)}"></label>'
        )

    sizes = "".join(
        f"<option{' selected' if n == limit else ''}>{n}</option>" for n in PAGE_SIZES
    )
    status = params.get("status", "")
    statuses = "<option value=''>any</option>" + "".join(
        f"<option{' selected' if s == status else ''}>{s}</option>"
        for s in RUN_STATUSES
    )
    return (
        '<form class=filters method=get action="/" id=filters>'
        + field("q", "Run id starts with", "batch-7/")
        + field("workflow", "Workflow")
        + field("queue", "Queue")
        + field("version", "Version")
        + f"<label>Status <select name=status>{statuses}</select></label>"
        + field("since", "Created since", "2026-11-26T08:00")
        + field("until", "Created before", "2026-11-27")
        + f"<label>Per page <select name=limit>{sizes}</select></label>"
        + "<button>Filter</button> <a href='/'>clear</a></form>"
    )


def _counts(
    by_status: dict[str, int], total: int, current: str, kept: dict[str, object]
) -> str:
    tabs = [
        f'<a class="tab{"" if current else " on"}" href="{url("/", kept)}">'
        f"all <b data-count=all>{total:,}</b></a>"
    ]
    for status in RUN_STATUSES:
        n = by_status.get(status, 0)
        on = " on" if status == current else ""
        tabs.append(
            f'<a class="tab{on}" href="{url("/", kept | {"status": status})}">'
            f"{esc(status)} <b data-count={esc(status)}>{n:,}</b></a>"
        )
    return f"<nav class=counts>{''.join(tabs)}</nav>"


def _rows(runs: list[RunView]) -> str:
    if not runs:
        return "<p class=empty>No run matches.</p>"
    rows = [
        [
            f'<a class=runlink href="{url("/run", {"id": run.run_id})}">{esc(run.run_id)}</a>',
            esc(run.workflow),
            badge(run.status),
            esc(run.queue or ""),
            esc(run.version or ""),
            when(run.created_at),
            when(run.updated_at),
            _lineage(run),
        ]
        for run in runs
    ]
    return table(
        [
            "Run",
            "Workflow",
            "Status",
            "Queue",
            "Version",
            "Created (UTC)",
            "Updated",
            "Lineage",
        ],
        rows,
        "runs",
    )


def _lineage(run: RunView) -> str:
    parts = []
    if run.parent_id is not None:
        parts.append(
            f'child of <a href="{url("/run", {"id": run.parent_id})}">{esc(run.parent_id)}</a>'
        )
    if run.forked_from is not None:
        parts.append(
            f'fork of <a href="{url("/run", {"id": run.forked_from})}">{esc(run.forked_from)}</a>'
            f" @{run.fork_seq}"
        )
    return "; ".join(parts)


def _pager(
    next_cursor: str | None, params: Mapping[str, str], kept: dict[str, object]
) -> str:
    links = []
    status = {"status": params.get("status", "")}
    if params.get("cursor"):
        links.append(f'<a href="{url("/", kept | status)}">« newest</a>')
    if next_cursor is not None:
        links.append(
            f'<a rel=next href="{url("/", kept | status | {"cursor": next_cursor})}">older »</a>'
        )
    return f"<nav class=pager>{' '.join(links)}</nav>"
