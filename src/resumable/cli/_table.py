"""Plain-text tables and human units for the CLI."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from urllib.parse import urlsplit

from resumable.errors import StoreError
from resumable.stores.sqlite import parse_url
from resumable.stores.urls import redact


def table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int] = ()
) -> str:
    """Columns padded to their widest cell; indexes in `right` are right-aligned."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def size(n: int) -> str:
    """Bytes as B / KB / MB."""
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / 1024 / 1024:.1f} MB"


def duration(ms: int) -> str:
    """Milliseconds as ms / s / min."""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 120_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms / 60_000:.1f} min"


def when(moment: datetime) -> str:
    """A UTC timestamp to the second."""
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def clip(text: str, width: int) -> str:
    """One line of at most `width` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def store_label(url: str) -> str:
    """A store as a reader should see it: a SQLite file's absolute path, else its URL.

    `sqlite:///state.db` is relative to the current folder: the path says which
    file that was. Secrets in other URLs are masked.
    """
    if urlsplit(url).scheme == "sqlite":
        try:
            return str(parse_url(url).path.absolute())
        except StoreError:  # options of a wrapper (?blobs=...): the URL says enough
            pass
    return redact(url)
