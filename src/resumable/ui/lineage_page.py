"""The lineage page (a run's ancestors, children and forks) and the diff of two runs."""

from __future__ import annotations

import json

from resumable._engine.engine import Engine, RunView
from resumable._engine.export import StepExport
from resumable._engine.listing import RunFilter
from resumable.errors import RunNotFound
from resumable.ui.html import badge, esc, table, url, value_text

_MAX_DEPTH = 50
_LIMIT = 200


async def render_lineage(engine: Engine, run_id: str) -> str:
    """Ancestors up to the root, then the tree of children and forks below the run."""
    run = await engine.get(run_id)
    chain: list[tuple[str, RunView]] = []
    current = run
    for _ in range(_MAX_DEPTH):
        up, how = (
            (current.parent_id, "child of")
            if current.parent_id
            else (current.forked_from, f"forked at step {current.fork_seq} from")
        )
        if up is None:
            break
        try:
            current = await engine.get(up)
        except RunNotFound:
            break
        chain.append((how, current))
    ancestors = "".join(f"<li>{esc(how)} {_node(r)}</li>" for how, r in reversed(chain))
    tree = await _tree(engine, run, depth=0)
    return (
        f"<h1>Lineage of {esc(run_id)}</h1>"
        + (f"<h2>Ancestors</h2><ol class=ancestors>{ancestors}</ol>" if chain else "")
        + f"<h2>Descendants</h2><ul class=tree>{tree}</ul>"
        + _diff_form(run)
    )


async def _tree(engine: Engine, run: RunView, *, depth: int) -> str:
    below = ""
    if depth < _MAX_DEPTH:
        children = await engine.runs_page(RunFilter(parent=run.run_id), limit=_LIMIT)
        forks = await engine.runs_page(RunFilter(forked_from=run.run_id), limit=_LIMIT)
        items = [await _tree(engine, c, depth=depth + 1) for c in children.runs]
        items += [await _tree(engine, f, depth=depth + 1) for f in forks.runs]
        below = f"<ul>{''.join(items)}</ul>" if items else ""
    how = ""
    if depth and run.forked_from:
        how = f"<small>fork at step {run.fork_seq}</small> "
    elif depth and run.parent_id:
        how = "<small>child</small> "
    diff = ""
    if depth and run.forked_from:
        diff = f' <a href="{url("/diff", {"a": run.forked_from, "b": run.run_id})}">diff with source</a>'
    return f"<li>{how}{_node(run)}{diff}{below}</li>"


def _node(run: RunView) -> str:
    return (
        f'<a class=node href="{url("/run", {"id": run.run_id})}">{esc(run.run_id)}</a> '
        f"{badge(run.status)} <small>{esc(run.workflow)}</small>"
    )


def _diff_form(run: RunView) -> str:
    return (
        '<h2>Compare two runs</h2><form method=get action="/diff" class=filters>'
        f'<label>Run A <input name=a value="{esc(run.forked_from or run.run_id)}"></label>'
        f'<label>Run B <input name=b value="{esc(run.run_id)}"></label>'
        "<button>Diff</button></form>"
    )


async def render_diff(engine: Engine, a: str, b: str) -> str:
    """Both journals side by side; rows that differ in step, args or result marked."""
    left = {s.seq: s async for s in engine.export([a])}
    right = {s.seq: s async for s in engine.export([b])}
    rows = []
    differing = 0
    for seq in sorted(left.keys() | right.keys()):
        sa, sb = left.get(seq), right.get(seq)
        verdict = _compare(sa, sb)
        differing += verdict != "same"
        rows.append(
            [
                str(seq),
                f'<span class="verdict v-{verdict.replace(" ", "-")}">{esc(verdict)}</span>',
                _cell(sa),
                _cell(sb),
            ]
        )
    summary = (
        f"<p>{differing} of {len(rows)} steps differ.</p>"
        if rows
        else "<p class=empty>Neither run has steps.</p>"
    )
    return (
        f'<h1>Diff</h1><p>A: <a href="{url("/run", {"id": a})}">{esc(a)}</a> · '
        f'B: <a href="{url("/run", {"id": b})}">{esc(b)}</a></p>'
        + summary
        + table(["#", "Verdict", f"A: {a}", f"B: {b}"], rows, "diff")
    )


def _compare(a: StepExport | None, b: StepExport | None) -> str:
    if a is None or b is None:
        return "only in A" if b is None else "only in B"
    if a.step != b.step:
        return "different step"
    if a.args_fingerprint != b.args_fingerprint:
        return "different args"
    if _value(a) != _value(b) or a.status != b.status:
        return "different result"
    return "same"


def _value(step: StepExport) -> str:
    value = step.error if step.status in ("failed", "retrying") else step.result
    return json.dumps(value, sort_keys=True, default=str)


def _cell(step: StepExport | None) -> str:
    if step is None:
        return ""
    value = step.error if step.status in ("failed", "retrying") else step.result
    shared = (
        f" <small>(shared from {esc(step.inherited_from)})</small>"
        if step.inherited_from
        else ""
    )
    return (
        f"<b>{esc(step.step)}</b> {badge(step.status)}{shared} "
        f"<code>{esc(step.args_fingerprint[:10])}</code>"
        f"<pre class=value>{value_text(value, 1500)}</pre>"
    )
