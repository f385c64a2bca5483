"""The lineage page (a run's ancestors, children and forks) and the diff of two runs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from resumable._engine.engine import Engine
from resumable._engine.export import StepExport
from resumable._engine.listing import RunFilter, RunView
from resumable._plural import plural
from resumable.errors import RunNotFound
from resumable.ui.html import badge, esc, table, url, value_text

_MAX_DEPTH = 50
_LIMIT = 200
_BOX_W, _BOX_H = 190, 22
_STEP_X, _ROW_Y = 40, 30
_LABEL_CHARS = 24


@dataclass(slots=True)
class _Node:
    run: RunView
    how: str
    """How it relates to the node above it: "", "child", or "fork at step N"."""
    below: list[_Node] = field(default_factory=list)


async def render_lineage(engine: Engine, run_id: str) -> str:
    """The run's family drawn as a graph, with the same tree as nested lists."""
    run = await engine.get(run_id)
    chain: list[tuple[str, RunView]] = []
    current = run
    for _ in range(_MAX_DEPTH):
        up, how = (
            (current.parent_id, "child")
            if current.parent_id
            else (current.forked_from, f"fork at step {current.fork_seq}")
        )
        if up is None:
            break
        try:
            found = await engine.get(up)
        except RunNotFound:
            break
        chain.append((how, found))
        current = found
    ancestors = "".join(
        f"<li>{esc(how.replace('child', 'child of'))} {_node(r)}</li>"
        for how, r in reversed(chain)
    )
    tree = await _collect(engine, run, "", depth=0)
    top = tree
    for how, ancestor in chain:  # the ancestors above the run, nearest first
        top.how = how
        top = _Node(run=ancestor, how="", below=[top])
    return (
        f"<h1>Lineage of {esc(run_id)}</h1>"
        + graph(top, focus=run_id)
        + "<details open><summary>As a list</summary>"
        + (f"<h2>Ancestors</h2><ol class=ancestors>{ancestors}</ol>" if chain else "")
        + f"<h2>Descendants</h2><ul class=tree>{_list(tree, depth=0)}</ul></details>"
        + _diff_form(run)
    )


async def _collect(engine: Engine, run: RunView, how: str, *, depth: int) -> _Node:
    node = _Node(run=run, how=how)
    if depth < _MAX_DEPTH:
        children = await engine.runs_page(RunFilter(parent=run.run_id), limit=_LIMIT)
        forks = await engine.runs_page(RunFilter(forked_from=run.run_id), limit=_LIMIT)
        for child in children.runs:
            node.below.append(await _collect(engine, child, "child", depth=depth + 1))
        for fork in forks.runs:
            how = f"fork at step {fork.fork_seq}"
            node.below.append(await _collect(engine, fork, how, depth=depth + 1))
    return node


def _list(node: _Node, *, depth: int) -> str:
    items = "".join(_list(below, depth=depth + 1) for below in node.below)
    how = f"<small>{esc(node.how)}</small> " if depth and node.how else ""
    diff = ""
    if depth and node.run.forked_from:
        link = url("/diff", {"a": node.run.forked_from, "b": node.run.run_id})
        diff = f' <a href="{link}">diff with source</a>'
    return (
        f"<li>{how}{_node(node.run)}{diff}{f'<ul>{items}</ul>' if items else ''}</li>"
    )


def graph(top: _Node, *, focus: str) -> str:
    """The family as an SVG graph, laid out as a tree (depth across, a row per run).

    A node per run, an edge per child (solid) or fork (dashed). Built here, with
    classes only: the page's CSP allows no inline style and no script.
    """
    rows: list[tuple[int, _Node, int | None]] = []  # depth, node, parent's row

    def place(node: _Node, depth: int, parent: int | None) -> None:
        rows.append((depth, node, parent))
        me = len(rows) - 1
        for below in node.below:
            place(below, depth + 1, me)

    place(top, 0, None)
    parts = []
    for row, (depth, node, parent) in enumerate(rows):
        x, y = 10 + _STEP_X * depth, 10 + _ROW_Y * row
        if parent is not None:
            px, py = 10 + _STEP_X * rows[parent][0], 10 + _ROW_Y * parent
            kind = "fork" if node.how.startswith("fork") else "child"
            parts.append(
                f'<path class="edge e-{kind}" d="M{px + 12} {py + _BOX_H} '
                f'V{y + _BOX_H / 2} H{x}"><title>{esc(node.how)}</title></path>'
            )
            if kind == "fork":
                parts.append(
                    f'<text class=how x="{px + 16}" y="{y + _BOX_H / 2 - 3}">'
                    f"@{esc(node.run.fork_seq)}</text>"
                )
        cls = "gnode focus" if node.run.run_id == focus else "gnode"
        label = node.run.run_id
        shown = label if len(label) <= _LABEL_CHARS else label[: _LABEL_CHARS - 1] + "…"
        parts.append(
            f'<a href="{url("/run", {"id": label})}" class="{cls}">'
            f"<title>{esc(label)} ({esc(node.run.status)})</title>"
            f'<rect x="{x}" y="{y}" width="{_BOX_W}" height="{_BOX_H}" rx="4" '
            f'class="s-{esc(node.run.status)}"/>'
            f'<text x="{x + 8}" y="{y + 15}">{esc(shown)}</text></a>'
        )
    width = 20 + _BOX_W + _STEP_X * max(depth for depth, _, _ in rows)
    height = 20 + _ROW_Y * len(rows)
    return (
        f'<div class=graph><svg class=lineage width="{width}" height="{height}" '
        f'role=img aria-label="lineage graph">{"".join(parts)}</svg></div>'
        '<p class=legend><span class="key e-child">child run</span>'
        '<span class="key e-fork">fork (at step)</span></p>'
    )


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
    """Both journals side by side; rows that differ in step, args or result marked.

    A row is a step, or a `map_steps` item under its call's number and its key;
    a step one run shares with the other (a fork's prefix) is "shared".
    """
    left = {_row_key(s): s async for s in engine.export([a])}
    right = {_row_key(s): s async for s in engine.export([b])}
    rows = []
    differing = 0
    for key in sorted(left.keys() | right.keys(), key=_row_order):
        sa, sb = left.get(key), right.get(key)
        verdict = _compare(sa, sb)
        differing += verdict not in ("same", "shared")
        seq, item_key = key
        rows.append(
            [
                str(seq) if item_key is None else f"{seq} [{esc(item_key)}]",
                f'<span class="verdict v-{verdict.replace(" ", "-")}">{esc(verdict)}</span>',
                _cell(sa),
                _cell(sb),
            ]
        )
    summary = (
        f"<p>{differing} of {plural(len(rows), 'step')} "
        f"{'differs' if differing == 1 else 'differ'}.</p>"
        if rows
        else "<p class=empty>Neither run has steps.</p>"
    )
    return (
        f'<h1>Diff</h1><p>A: <a href="{url("/run", {"id": a})}">{esc(a)}</a> · '
        f'B: <a href="{url("/run", {"id": b})}">{esc(b)}</a></p>'
        + summary
        + table(["#", "Verdict", f"A: {a}", f"B: {b}"], rows, "diff")
    )


def _row_key(step: StepExport) -> tuple[int, str | None]:
    return step.seq, step.item_key


def _row_order(key: tuple[int, str | None]) -> tuple[int, bool, str]:
    """A call before its items, its items by key."""
    seq, item_key = key
    return seq, item_key is not None, item_key or ""


def _compare(a: StepExport | None, b: StepExport | None) -> str:
    if a is None or b is None:
        return "only in A" if b is None else "only in B"
    if _owner(a) == _owner(b):  # one record, read through a fork: never re-executed
        return "shared"
    if a.step != b.step:
        return "different step"
    if a.args_fingerprint != b.args_fingerprint:
        return "different args"
    if _value(a) != _value(b) or a.status != b.status:
        return "different result"
    return "same"


def _owner(step: StepExport) -> str:
    """The run that recorded the step (a fork's shared steps: its source)."""
    return step.inherited_from or step.run_id


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
