"""The guide's cost tables are what `resumable cost-model` prints today.

Each table in docs/ sits under a marker naming the command's arguments:

    <!-- cost-model: --steps 10 --failure-rate 0.01 -->
    ```text
    (the command's output)
    ```

`make docs-tables` (this file run as a script) rewrites them; this test fails when
a page and the model (its formulas, or the figures `make bench` measured) disagree.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import sys
from pathlib import Path

from resumable.cli import main
from resumable.costmodel import load_overheads

ROOT = Path(__file__).resolve().parents[2]
TABLE = re.compile(r"(<!-- cost-model: (.*?) -->\n```text\n)(.*?)(```\n)", re.S)


def printed(arguments: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["cost-model", *shlex.split(arguments)])
    if status != 0:
        raise AssertionError(f"resumable cost-model {arguments} exited {status}")
    return out.getvalue()


def regenerated(text: str) -> str:
    return TABLE.sub(
        lambda m: m.group(1) + printed(m.group(2)) + m.group(4),
        text,
    )


def pages() -> list[Path]:
    return sorted(
        p for p in (ROOT / "docs").rglob("*.md") if TABLE.search(p.read_text())
    )


def test_every_cost_table_is_the_models_current_output() -> None:
    found = pages()
    assert len(found) >= 2  # the cost analysis and the break-even page
    for page in found:
        text = page.read_text()
        assert regenerated(text) == text, (
            f"{page.relative_to(ROOT)} is stale: run `make docs-tables`"
        )


def test_the_tables_cover_1k_10k_and_100k_requests_a_day() -> None:
    text = (ROOT / "docs" / "guide" / "cost.md").read_text()
    tables = TABLE.findall(text)
    assert len(tables) >= 3
    for _, _, body, _ in tables:
        header = next(line for line in body.splitlines() if "1K/day" in line)
        assert header.split() == ["1K/day", "10K/day", "100K/day"]


def shell_commands() -> list[str]:
    """`resumable cost-model ...` lines of the shell blocks in README and docs."""
    commands = []
    for page in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        joined = page.read_text().replace("\\\n", " ")
        for line in joined.splitlines():
            command = line.split("#")[0].strip()
            if command.startswith("resumable cost-model") and "..." not in command:
                commands.append(command.removeprefix("resumable cost-model").strip())
    return commands


def test_the_cost_model_commands_shown_in_the_docs_run() -> None:
    commands = [c for c in shell_commands() if "--from-store" not in c]
    assert len(commands) >= 2
    for arguments in commands:
        assert "break-even LLM $/request" in printed(arguments)


STORE_ROWS = {
    "| `sqlite` (full) |": "sqlite",
    "| `sqlite?durability=normal` |": "sqlite-normal",
    "| `postgresql` (local) |": "postgres",
    "| `redis` (local, no persistence) |": "redis",
}


def test_the_stores_page_quotes_the_measured_overheads() -> None:
    shipped = load_overheads()
    rows = (ROOT / "docs" / "stores.md").read_text().splitlines()
    for start, kind in STORE_ROWS.items():
        (row,) = [line for line in rows if line.startswith(start)]
        figures = shipped[kind]
        cells = [cell.strip() for cell in row.split("|")]
        assert cells[2] == f"{figures.us_per_step:.0f} µs", (
            kind,
            "update docs/stores.md",
        )
        assert cells[4] == f"{figures.bytes_per_step:.0f}", kind
        assert cells[5] == f"{figures.bytes_per_run:.0f}", kind


if __name__ == "__main__":
    for page in pages():
        page.write_text(regenerated(page.read_text()))
        sys.stderr.write(f"regenerated {page.relative_to(ROOT)}\n")
