"""The run page: header, step waterfall, steps with their values, ledger, actions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from resumable._engine.children import child_run_id
from resumable._engine.engine import Engine
from resumable._engine.export import InputView, StepExport
from resumable._engine.ledger import Ledger
from resumable._engine.listing import RunFilter, RunView
from resumable.errors import ResumableError
from resumable.ui.html import (
    VALUE_CHARS,
    badge,
    csrf_field,
    esc,
    hbar_chart,
    table,
    url,
    value_text,
    when,
)

_WATERFALL_PX = 560
Replayed = Callable[[int, int], bool]
"""(seq, position from the top) -> whether the latest execution replayed it."""
_LINEAGE_LIMIT = 200


async def render_live(engine: Engine, run_id: str, steps_at: str | None = None) -> str:
    """The part of the page that live updates replace: everything but the forms.

    It shows one page of the run's steps (`step_page`): `steps_at` is the
    `steps` query parameter that chose it.
    """
    run = await engine.get(run_id)
    shown = step_page(len(await engine.history(run_id)), steps_at)
    steps = [
        record
        async for record in engine.export(
            [run_id], run_input=True, steps=shown.positions
        )
    ]
    try:
        ledger: Ledger | None = await engine.ledger(run_id)
    except ResumableError:  # e.g. encrypted without the key: the rest still shows
        ledger = None
    children = await engine.runs_page(RunFilter(parent=run_id), limit=_LINEAGE_LIMIT)
    forks = await engine.runs_page(RunFilter(forked_from=run_id), limit=_LINEAGE_LIMIT)
    replayed = shown.shifted(_replayed_in_latest(ledger))
    inputs = await engine.inputs(run_id)
    return (
        f'<div id=live data-status="{esc(run.status)}" data-terminal="{int(run.status in ("succeeded", "failed", "cancelled"))}">'
        + _header(run, ledger)
        + _run_input(steps)
        + _waterfall(
            steps,
            replayed,
            _children_by_seq(run_id, steps, children.runs),
            shown.inputs_within(inputs, steps),
            run.created_at if shown.start == 0 else steps[0].started_at,
        )
        + _page_links(run_id, shown)
        + _steps(steps, replayed, _children_by_seq(run_id, steps, children.runs))
        + _page_links(run_id, shown)
        + _inputs(inputs)
        + _ledger(ledger)
        + _related("Child runs", children.runs)
        + _related("Forks", forks.runs)
        + "</div>"
    )


# ---------------------------------------------------------------- paging the steps

STEPS_PER_PAGE: Final = 100
"""How many steps a run page shows: a run of 100,000 steps is 1,000 pages."""


@dataclass(frozen=True, slots=True)
class StepPage:
    """Which of a run's steps a page shows: a window of its journal, by position."""

    start: int
    """The position (from 0) of the first step shown."""
    total: int
    """How many steps the run has."""

    @property
    def positions(self) -> slice:
        """The steps shown, as `Engine.export(steps=...)` takes them."""
        return slice(self.start, self.start + STEPS_PER_PAGE)

    @property
    def is_newest(self) -> bool:
        """Whether it shows the run's newest step (and so the steps still to come)."""
        return self.start + STEPS_PER_PAGE >= self.total

    def shifted(self, replayed: Replayed) -> Replayed:
        """`replayed`, asked with positions counted from the run's first step."""
        return lambda seq, position: replayed(seq, position + self.start)

    def inputs_within(
        self, inputs: list[InputView], steps: list[StepExport]
    ) -> list[InputView]:
        """The inputs sent while the steps shown ran (all of them on a single page)."""
        if not steps:
            return inputs
        first, last = steps[0].started_at, steps[-1].finished_at
        return [
            sent
            for sent in inputs
            if (self.start == 0 or sent.sent_at >= first)
            and (self.is_newest or sent.sent_at <= last)
        ]


def step_page(total: int, at: str | None) -> StepPage:
    """The page of steps that `at` (the `steps` query parameter) names.

    "oldest", the position (from 1) of its first step, or by default "newest":
    the last page, which a live run's refresh keeps following.
    """
    last = max(total - STEPS_PER_PAGE, 0)
    if at == "oldest":
        return StepPage(0, total)
    if at is not None and at.isdigit() and len(at) < 12:
        return StepPage(min(max(int(at) - 1, 0), last), total)
    return StepPage(last, total)


def _page_links(run_id: str, shown: StepPage) -> str:
    """Oldest, older, newer and newest page links, when there is more than one page."""
    if shown.total <= STEPS_PER_PAGE:
        return ""
    older = max(shown.start - STEPS_PER_PAGE, 0) + 1
    newer = shown.start + STEPS_PER_PAGE + 1
    links = [
        ("Oldest", "oldest", shown.start > 0),
        ("Older", str(older), shown.start > 0),
        ("Newer", str(newer), not shown.is_newest),
        ("Newest", "newest", not shown.is_newest),
    ]
    parts = [
        f'<a href="{url("/run", {"id": run_id, "steps": at})}">{label}</a>'
        if live
        else f"<span>{label}</span>"
        for label, at, live in links
    ]
    end = min(shown.start + STEPS_PER_PAGE, shown.total)
    return (
        f"<nav class=pages>steps {shown.start + 1:,} to {end:,} of {shown.total:,} · "
        + " · ".join(parts)
        + "</nav>"
    )


# ---------------------------------------------------------------- actions


def actions(run: RunView, csrf: str, steps: int) -> str:
    """The action forms (outside the live part, so typing is never interrupted)."""
    rid = f'<input type=hidden name=run_id value="{esc(run.run_id)}">'
    forms = []
    if run.status != "succeeded":
        forms.append(
            f'<form method=post action="/actions/resume">{csrf_field(csrf)}{rid}'
            "<button>Resume</button></form>"
        )
    if run.status not in ("succeeded", "failed", "cancelled"):
        forms.append(
            f'<form method=post action="/actions/cancel">{csrf_field(csrf)}{rid}'
            "<button class=danger>Cancel</button></form>"
        )
        forms.append(
            f'<form method=post action="/actions/send" class=send>{csrf_field(csrf)}{rid}'
            '<label>Input key <input name=key required placeholder="approval"></label>'
            "<label>Value (JSON) <textarea name=value required rows=2 data-json>true</textarea></label>"
            "<button>Send input</button><output class=json-error></output></form>"
        )
    forms.append(
        f'<form method=post action="/actions/fork">{csrf_field(csrf)}{rid}'
        f'<label>Fork at step <input name=at_step type=number min=0 max="{steps}" value="{max(0, steps - 1)}" required></label>'
        '<label>New run id <input name=new_id placeholder="(generated)"></label>'
        "<button>Fork</button></form>"
    )
    return f"<section class=actions><h2>Actions</h2>{''.join(forms)}</section>"


def _replayed_in_latest(ledger: Ledger | None) -> Replayed:
    """Whether the latest execution replayed a step (at `seq`, `position` from the top).

    Each execution that replayed steps wrote the seqs it replayed in the ledger (an
    execution that replayed nothing wrote no entry), so the latest known one is the
    answer. Entries written before seqs were recorded hold only a count: then the
    first steps of the journal are taken as the replayed ones.
    """
    if ledger is None or not ledger.executions:
        return lambda seq, position: False
    latest = max(ledger.executions, key=lambda e: e.fence)
    if latest.replayed_seqs is not None:
        return lambda seq, position: bool(latest.replayed(seq))
    return lambda seq, position: position <= latest.replayed_steps


def _header(run: RunView, ledger: Ledger | None) -> str:
    rows = [
        ("Status", badge(run.status)),
        (
            "Workflow",
            esc(run.workflow)
            + (f" (version {esc(run.version)})" if run.version else ""),
        ),
        ("Created", when(run.created_at) + " UTC"),
        ("Updated", when(run.updated_at) + " UTC"),
    ]
    if run.queue:
        rows.append(("Queue", esc(run.queue)))
    if run.lease_owner:
        rows.append(
            ("Lease", f"{esc(run.lease_owner)} until {when(run.lease_expires_at)}")
        )
    if run.parent_id:
        rows.append(
            (
                "Parent",
                f'<a href="{url("/run", {"id": run.parent_id})}">{esc(run.parent_id)}</a>',
            )
        )
    if run.forked_from:
        rows.append(
            (
                "Forked from",
                f'<a href="{url("/run", {"id": run.forked_from})}">{esc(run.forked_from)}</a> at step {run.fork_seq}',
            )
        )
    if ledger is not None and ledger.executions:
        rows.append(("Executions", f"{len(ledger.executions)} that spent or replayed"))
    cells = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    links = (
        f'<a href="{url("/lineage", {"id": run.run_id})}">lineage</a> · '
        f'<a href="{url("/diff", {"a": run.forked_from or run.run_id, "b": run.run_id})}">diff</a>'
    )
    return f"<h1 class=runid>{esc(run.run_id)}</h1><p>{links}</p><table class=kv>{cells}</table>"


def _run_input(steps: list[StepExport]) -> str:
    if not steps or steps[0].run_input is None:
        return ""
    return f"<details><summary>Run input (args, kwargs)</summary><pre>{value_text(steps[0].run_input)}</pre></details>"


def _kind(step: StepExport, position: int, replayed: Replayed) -> str:
    if step.status in ("failed", "retrying", "waiting"):
        return step.status
    return "replayed" if replayed(step.seq, position) else "executed"


def _children_by_seq(
    run_id: str, steps: list[StepExport], children: list[RunView]
) -> dict[int, RunView]:
    """The child run each journal seq started (a child's id is `<parent>/<seq>`)."""
    by_id = {child.run_id: child for child in children}
    found = {s.seq: by_id.get(child_run_id(run_id, s.seq)) for s in steps}
    return {seq: child for seq, child in found.items() if child is not None}


@dataclass(frozen=True, slots=True)
class _Bar:
    began: datetime
    duration_ms: float
    kind: str
    title: str


def _step_bars(
    step: StepExport, kind: str, previous_end: datetime | None
) -> list[_Bar]:
    """A step's bar, and the bars of time it spent not running: back-off, sleeps."""
    bars = []
    if (
        step.attempts > 1
        and previous_end is not None
        and previous_end < step.started_at
    ):
        # the record keeps the last attempt's times: the earlier attempts and their
        # back-off lie between the previous step's end (or the run's creation) and
        # this attempt's start
        bars.append(
            _Bar(
                previous_end,
                _ms(step.started_at, previous_end),
                "backoff",
                f"{step.attempts - 1} earlier attempt(s) and retry back-off",
            )
        )
    if step.step == "sleep" and step.status == "ok":
        kind = "sleep"
    elif step.step.startswith("wait_for:") and step.status == "ok":
        kind = "input"
    bars.append(
        _Bar(
            step.started_at, step.duration_ms, kind, f"{kind}: {step.duration_ms:,} ms"
        )
    )
    delay = _retry_in_s(step)
    if delay is not None:
        bars.append(
            _Bar(
                step.finished_at,
                delay * 1000,
                "backoff",
                f"retry back-off: attempt {step.attempts + 1} in {delay:.3f} s",
            )
        )
    return bars


def _retry_in_s(step: StepExport) -> float | None:
    if step.status != "retrying" or not isinstance(step.error, dict):
        return None
    delay = step.error.get("retry_in_s")
    return float(delay) if isinstance(delay, int | float) else None


def _waterfall_rows(
    steps: list[StepExport],
    replayed: Replayed,
    children: dict[int, RunView],
    inputs: list[InputView],
    created_at: datetime,
) -> list[tuple[str, list[_Bar]]]:
    """A labelled row of bars per step, child run and input sent."""
    rows: list[tuple[str, list[_Bar]]] = []
    previous_end: datetime | None = created_at
    for i, s in enumerate(steps, start=1):
        kind = _kind(s, i, replayed)
        rows.append((f"#{s.seq} {s.step[:26]}", _step_bars(s, kind, previous_end)))
        previous_end = s.finished_at
        child = children.get(s.seq)
        if child is not None:
            took = _ms(child.updated_at, child.created_at)
            rows.append(
                (
                    f"  ↳ {child.run_id[-24:]}",
                    [
                        _Bar(
                            child.created_at,
                            took,
                            "child",
                            f"child run: {took:,.0f} ms",
                        )
                    ],
                )
            )
    rows += [
        (
            f"⇢ input {sent.key[:20]}",
            [_Bar(sent.sent_at, 0, "sent", f"input {sent.key!r} sent")],
        )
        for sent in inputs
    ]
    return rows


def _waterfall(
    steps: list[StepExport],
    replayed: Replayed,
    children: dict[int, RunView],
    inputs: list[InputView],
    created_at: datetime,
) -> str:
    if not steps:
        return "<p class=empty>No steps recorded yet.</p>"
    rows = _waterfall_rows(steps, replayed, children, inputs, created_at)
    every = [bar for _, bars in rows for bar in bars]
    start = min(bar.began for bar in every)
    end = max(bar.began + timedelta(milliseconds=bar.duration_ms) for bar in every)
    span_ms = max(1.0, _ms(end, start))
    drawn = []
    for i, (label, bars) in enumerate(rows):
        y = 20 * i
        drawn.append(f'<text x="0" y="{y + 13}" class=lbl>{esc(label)}</text>')
        for bar in bars:
            x = 200 + _WATERFALL_PX * _ms(bar.began, start) / span_ms
            width = max(3.0, _WATERFALL_PX * bar.duration_ms / span_ms)
            drawn.append(
                f'<rect x="{x:.1f}" y="{y + 2}" width="{width:.1f}" height="14" '
                f'class="k-{esc(bar.kind)}"><title>{esc(bar.title)}</title></rect>'
            )
    legend = "".join(
        f'<span class="key k-{k}">{k}</span>'
        for k in (
            "executed",
            "replayed",
            "retrying",
            "backoff",
            "waiting",
            "input",
            "sleep",
            "sent",
            "failed",
            "child",
        )
    )
    return (
        f"<h2>Steps</h2><p class=legend>{legend}</p>"
        f'<svg class=waterfall width="{200 + _WATERFALL_PX + 10}" height="{20 * len(rows) + 4}" role=img>{"".join(drawn)}</svg>'
    )


def _inputs(inputs: list[InputView]) -> str:
    if not inputs:
        return ""
    rows = [
        [
            esc(sent.key),
            when(sent.sent_at),
            f"<pre class=value>{value_text(sent.value)}</pre>"
            if sent.unreadable is None
            else f"<p class=error>{esc(sent.unreadable)}</p>",
        ]
        for sent in inputs
    ]
    return "<h2>Inputs sent</h2>" + table(
        ["Key", "Sent (UTC)", "Value"], rows, "inputs"
    )


def _ms(moment: datetime, start: datetime) -> float:
    return (moment - start).total_seconds() * 1000


def _steps(
    steps: list[StepExport], replayed: Replayed, children: dict[int, RunView]
) -> str:
    rows = []
    for i, s in enumerate(steps, start=1):
        kind = _kind(s, i, replayed)
        if s.status in ("failed", "retrying"):
            shown = _error(s.error)
        else:
            shown = f"<pre class=value>{value_text(s.result)}</pre>"
        if s.unreadable:
            shown += f"<p class=error>{esc('; '.join(s.unreadable))}</p>"
        if s.status in ("failed", "retrying"):
            shown = f"<div class=error-box>{shown}</div>"
        child = children.get(s.seq)
        if child is not None:
            link = url("/run", {"id": child.run_id})
            child_link = f' <a class=child href="{link}">child run {esc(child.run_id)}</a> {badge(child.status)}'
        else:
            child_link = ""
        inherited = (
            f" <small>(from {esc(s.inherited_from)})</small>"
            if s.inherited_from
            else ""
        )
        rows.append(
            [
                str(s.seq),
                esc(s.step) + inherited + child_link,
                badge(s.status),
                f'<span class="k-{kind} kind">{esc(kind)}</span>',
                str(s.attempts),
                f"{s.duration_ms:,} ms",
                f"{s.calls} · ${s.cost_usd:.4f}" if s.calls else "",
                f"<code>{esc(s.args_fingerprint[:10])}</code>",
                shown,
            ]
        )
    if not rows:
        return ""
    return table(
        [
            "#",
            "Step",
            "Status",
            "Latest execution",
            "Attempts",
            "Duration",
            "LLM calls · $",
            "Args",
            "Result / error",
        ],
        rows,
        "steps",
    )


def _error(error: object) -> str:
    """A recorded error: its type and message, then its traceback as text."""
    if not isinstance(error, dict) or not isinstance(error.get("traceback"), str):
        return f"<pre class=value>{value_text(error)}</pre>"
    head = f"<p class=error><b>{esc(error.get('type', 'Error'))}</b>: {esc(error.get('message', ''))}</p>"
    return head + f"<pre class=value>{esc(error['traceback'][-VALUE_CHARS:])}</pre>"


def _ledger(ledger: Ledger | None) -> str:
    if ledger is None:
        return "<p class=empty>Ledger unreadable here.</p>"
    if not ledger.executions:
        return ""
    bars: list[tuple[str, float, str]] = []
    for e in ledger.executions:
        bars.append(
            (f"execution {e.fence} incurred", e.incurred.total_tokens, "incurred")
        )
        bars.append((f"execution {e.fence} reused", e.reused.total_tokens, "reused"))
    usd = (
        f"<p>Incurred ${ledger.incurred.cost_usd:.4f} ({ledger.incurred.calls} calls); "
        f"reused by replay ${ledger.reused.cost_usd:.4f} ({ledger.reused.calls} calls).</p>"
    )
    return "<h2>Ledger (tokens)</h2>" + usd + hbar_chart(bars, "tok")


def _related(title: str, runs: list[RunView]) -> str:
    if not runs:
        return ""
    rows = [
        [
            f'<a href="{url("/run", {"id": r.run_id})}">{esc(r.run_id)}</a>',
            esc(r.workflow),
            badge(r.status),
            "" if r.fork_seq is None else f"at step {r.fork_seq}",
        ]
        for r in runs
    ]
    return f"<h2>{esc(title)}</h2>" + table(["Run", "Workflow", "Status", ""], rows)
