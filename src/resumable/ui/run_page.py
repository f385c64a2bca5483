"""The run page: header, step waterfall, steps with their values, ledger, actions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from resumable._engine.children import child_run_id
from resumable._engine.clock import deadline_text, moment_text
from resumable._engine.engine import Engine
from resumable._engine.export import InputView, StepExport
from resumable._engine.ledger import Ledger, Spend, dollars_text, spend_text
from resumable._engine.listing import RunFilter, RunView
from resumable._engine.map_items import journal_seq
from resumable._plural import plural
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
from resumable.ui.step_pages import Replayed, asked, page_links, step_page

_WATERFALL_PX = 560
_LINEAGE_LIMIT = 200


async def render_live(engine: Engine, run_id: str, steps_at: str | None = None) -> str:
    """The part of the page that live updates replace: everything but the forms.

    It shows one page of the run's steps (`step_page`): `steps_at` is the
    `steps` query parameter that chose it.
    """
    run = await engine.get(run_id)
    # one read of the journal: the count, the page's steps and the ledger
    read = await engine.journal_page(run_id, asked(steps_at))
    shown = step_page(read.total, steps_at)
    every = range(read.total)
    if every[shown.positions] != every[asked(steps_at)]:  # asked past the end
        read = await engine.journal_page(run_id, shown.positions)
    steps = read.steps
    ledger = read.ledger  # None: e.g. encrypted without the key; the rest still shows
    children = await engine.runs_page(RunFilter(parent=run_id), limit=_LINEAGE_LIMIT)
    forks = await engine.runs_page(RunFilter(forked_from=run_id), limit=_LINEAGE_LIMIT)
    replayed = shown.shifted(_replayed_in_latest(ledger))
    inputs = await engine.inputs(run_id)
    progress = await _progress(engine, run_id)
    return (
        f'<div id=live data-status="{esc(run.status)}" data-terminal="{int(run.status in ("succeeded", "failed", "cancelled"))}">'
        + _header(run, ledger)
        + _outcome(run)
        + progress
        + _waterfall(
            steps,
            replayed,
            _children_by_seq(run_id, steps, children.runs),
            shown.inputs_within(inputs, steps),
            run.created_at if shown.start == 0 else steps[0].started_at,
        )
        + page_links(run_id, shown)
        + _steps(steps, replayed, _children_by_seq(run_id, steps, children.runs))
        + page_links(run_id, shown)
        + _inputs(inputs)
        + _ledger(ledger)
        + _related("Child runs", children.runs)
        + _related("Forks", forks.runs)
        + "</div>"
    )


# ---------------------------------------------------------------- actions


def actions(run: RunView, csrf: str, steps: int, awaited: Sequence[str] = ()) -> str:
    """The action forms (outside the live part, so typing is never interrupted).

    The send form is filled in with the first key the run waits for (`awaited`).
    """
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
            f"<label>Input key <input name=key required {_key_field(awaited)}></label>"
            "<label>Value (JSON) <textarea name=value required rows=2 data-json>true</textarea></label>"
            "<label><input type=checkbox name=early value=1> before the run waits for it</label>"
            "<button>Send input</button><output class=json-error></output></form>"
        )
    forms.append(
        f'<form method=post action="/actions/fork">{csrf_field(csrf)}{rid}'
        f'<label>Fork at step <input name=at_step type=number min=0 max="{steps}" value="{max(0, steps - 1)}" required></label>'
        '<label>New run id <input name=new_id placeholder="(generated)"></label>'
        "<button>Fork</button></form>"
    )
    return f"<section class=actions><h2>Actions</h2>{''.join(forms)}</section>"


def _key_field(awaited: Sequence[str]) -> str:
    """The key input's value (the awaited key) and the others it waits for, listed."""
    if not awaited:
        return 'placeholder="approval"'
    others = (
        f' title="it waits for: {esc(", ".join(awaited))}"' if len(awaited) > 1 else ""
    )
    return f'value="{esc(awaited[0])}"{others}'


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
    if run.wake_at is not None and run.status in ("sleeping", "waiting"):
        label = "Wakes" if run.status == "sleeping" else "Times out"
        rows.append((label, esc(moment_text(run.wake_at, datetime.now(UTC)))))
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


def _outcome(run: RunView) -> str:
    """Why a failed run failed, what a succeeded one returned, and its input."""
    parts = []
    if run.error is not None:
        trace = run.error_traceback or ""
        parts.append(
            f"<section class=run-error><p class=error><b>Error</b>: {esc(run.error)}</p>"
            f"<details><summary>Traceback</summary>"
            f"<pre class=value>{esc(trace[-VALUE_CHARS:])}</pre></details></section>"
        )
    if run.status == "succeeded":
        parts.append(
            f"<details open><summary>Result</summary><pre>{value_text(run.result)}</pre></details>"
        )
    if run.input is not None:
        parts.append(
            f"<details><summary>Run input (args, kwargs)</summary><pre>{value_text(run.input)}</pre></details>"
        )
    parts.extend(f"<p class=error>{esc(problem)}</p>" for problem in run.unreadable)
    return "".join(parts)


def _kind(step: StepExport, position: int, replayed: Replayed) -> str:
    if step.status in ("failed", "retrying", "waiting"):
        return step.status
    seq = journal_seq(step.seq, step.item_key)  # the ledger lists stored seqs
    return "replayed" if replayed(seq, position) else "executed"


def step_label(step: StepExport) -> str:
    """The step's number as `resumable show` prints it: `3`, or `3 [mail-0]` for an item."""
    if step.item_key is None:
        return str(step.seq)
    return f"{step.seq} [{step.item_key[:24]}]"


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
                f"{plural(step.attempts - 1, 'earlier attempt')} and retry back-off",
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
        rows.append(
            (f"#{step_label(s)} {s.step[:26]}", _step_bars(s, kind, previous_end))
        )
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


async def _progress(engine: Engine, run_id: str) -> str:
    """The latest value of each progress event the run published (`publish`)."""
    if engine.capabilities.feeds is None:
        return ""
    try:
        values = await engine.events(run_id)
    except ResumableError as exc:  # e.g. encrypted without the key: say so
        return f"<h2>Progress</h2><p class=error>{esc(str(exc))}</p>"
    if not values:
        return ""
    rows = [
        [esc(key), f"<pre class=value>{value_text(value)}</pre>"]
        for key, value in values.items()
    ]
    return "<h2>Progress</h2>" + table(["Key", "Latest value"], rows, "progress")


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
        shown = _step_value(s)
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
        if s.cached_from_run is not None:
            source = url("/run", {"id": s.cached_from_run})
            inherited += (
                f' <small class=cached>(cached from <a href="{source}">'
                f"{esc(s.cached_from_run)}</a>)</small>"
            )
        rows.append(
            [
                esc(step_label(s)),
                esc(s.step) + inherited + child_link,
                badge(s.status),
                f'<span class="k-{kind} kind">{esc(kind)}</span>',
                str(s.attempts),
                f"{s.duration_ms:,} ms",
                _step_dollars(s) if s.calls else "",
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


def _spent(spend: Spend) -> str:
    return spend_text(spend) if spend.calls else "nothing"


def _step_dollars(step: StepExport) -> str:
    """A step's LLM calls and dollars: "2 · $0.0012", "1 · unpriced", "2 · $0.0012+ (1 unmetered)"."""
    if (
        step.cost_usd is None
    ):  # a call's model has no price: the step's total is unknown
        dollars = dollars_text(
            0.0, calls=step.unpriced_calls, unpriced_calls=step.unpriced_calls
        )
        if step.unpriced_calls < step.calls:
            dollars = f"{plural(step.unpriced_calls, 'call')} {dollars}"
    else:
        dollars = f"${step.cost_usd:.4f}"
    if step.unmetered_calls:  # their cost is unknown: the dollars are a lower bound
        dollars += f"+ ({step.unmetered_calls} unmetered)"
    return f"{step.calls} · {esc(dollars)}"


def _step_value(step: StepExport) -> str:
    """A step's error, its deadline as a date (a sleep or wait_for), or its result."""
    if step.status in ("failed", "retrying"):
        return _error(step.error)
    if step.status == "waiting":
        deadline = deadline_text(step.result, datetime.now(UTC))
        if deadline is not None:
            return f"<pre class=value>{esc(deadline)}</pre>"
    return f"<pre class=value>{value_text(step.result)}</pre>"


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
        f"<p>Incurred {esc(_spent(ledger.incurred))}; "
        f"reused by replay {esc(_spent(ledger.reused))}.</p>"
    )
    if ledger.unpriced_models:
        usd += (
            f"<p>Unpriced: {esc(', '.join(ledger.unpriced_models))} "
            "(tokens counted, no price known).</p>"
        )
    unmetered = ledger.incurred.unmetered_calls + ledger.reused.unmetered_calls
    if unmetered:
        usd += (
            f"<p class=error>{plural(unmetered, 'unmetered call')}: "
            "usage unknown (no usage in the response, or a stream not read to its "
            "end), so the dollars above are a lower bound.</p>"
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
