"""HTML building blocks: escaping, the page layout, values, badges and bars.

Every page is a Python function returning a string. Anything that came from the
store (run ids, step names, results, errors) goes through `esc`, and the page's
Content-Security-Policy forbids inline script, so a `<script>` in stored data is
shown as text and could not run even if an escape were missed.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final
from urllib.parse import urlencode

VALUE_CHARS: Final = 4000
"""How much of a value's JSON a page shows before truncating it."""

_NAV: Final = (
    ("/", "Runs"),
    ("/threads", "Threads"),
    ("/workers", "Workers & queues"),
    ("/schedules", "Schedules"),
)


def esc(value: object) -> str:
    """Text made safe for HTML content and quoted attribute values."""
    return html.escape(str(value), quote=True)


def url(path: str, params: Mapping[str, object] | None = None) -> str:
    """A path with its query string (values None or "" left out), escaped for href."""
    query = urlencode(
        [(k, str(v)) for k, v in (params or {}).items() if v not in (None, "")]
    )
    return esc(path + ("?" + query if query else ""))


def page(title: str, body: str, *, csrf: str) -> str:
    """A whole page: head, navigation, body."""
    nav = "".join(f'<a href="{href}">{esc(label)}</a>' for href, label in _NAV)
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{esc(title)} · resumable</title>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f'<meta name=csrf content="{esc(csrf)}">'
        '<link rel=stylesheet href="/static/ui.css">'
        '<script src="/static/ui.js" defer></script></head><body>'
        f"<header><b class=brand>resumable</b><nav>{nav}</nav></header>"
        f"<main>{body}</main></body></html>"
    )


def csrf_field(csrf: str) -> str:
    """The hidden form field every POST must carry."""
    return f'<input type=hidden name=csrf value="{esc(csrf)}">'


def badge(status: str) -> str:
    """A status as a coloured label."""
    return f'<span class="badge s-{esc(status)}">{esc(status)}</span>'


def when(moment: datetime | None) -> str:
    """A UTC time, to the second."""
    return "-" if moment is None else esc(moment.strftime("%Y-%m-%d %H:%M:%S"))


def value_text(value: Any, limit: int = VALUE_CHARS) -> str:
    """A generic view as indented JSON, cut at `limit` characters (escaped)."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    if len(text) > limit:
        text = f"{text[:limit]}\n… truncated: {len(text):,} characters in all"
    return esc(text)


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], cls: str = "") -> str:
    """A table of cells already escaped (or built from escaped parts)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f'<table class="{esc(cls)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def hbar_chart(rows: list[tuple[str, float, str]], unit: str) -> str:
    """Horizontal bars as SVG (no inline style: the CSP allows none).

    `rows`: (label, value, css class). Bars scale to the largest value.
    """
    top = max((value for _, value, _ in rows), default=0.0) or 1.0
    height = 22 * len(rows) + 4
    bars = []
    for i, (label, value, cls) in enumerate(rows):
        y = 22 * i + 2
        width = max(1.0, 300 * value / top) if value else 0.0
        bars.append(
            f'<text x="0" y="{y + 14}" class=lbl>{esc(label)}</text>'
            f'<rect x="190" y="{y}" width="{width:.1f}" height="16" class="{esc(cls)}"/>'
            f'<text x="{196 + width:.1f}" y="{y + 13}" class=num>{esc(f"{value:,.4f}".rstrip("0").rstrip(".") or "0")} {esc(unit)}</text>'
        )
    return (
        f'<svg class=chart width="620" height="{height}" role=img>{"".join(bars)}</svg>'
    )
