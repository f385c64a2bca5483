"""Every ```python block in README.md and docs/ runs, or is marked as a fragment.

A block runs as its own script, in a fresh temporary directory (so the default
`./.resumable/state.db` lands there), with the interpreter running the tests. A
block that cannot run alone (a piece of a larger program) is preceded by an HTML
comment `<!-- not-run: reason -->`; FRAGMENTS pins how many each file has, so
marked blocks cannot silently grow.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
_NOT_RUN = re.compile(r"^<!--\s*not-run:\s*(\S.*?)\s*-->$")

FRAGMENTS = {
    "README.md": 3,
    "docs/capabilities/langgraph.md": 0,
    "docs/capabilities/pydantic-ai.md": 1,
    "docs/capabilities/openai-agents.md": 3,
    "docs/concepts.md": 1,
    "docs/guide/testing.md": 1,
    "docs/migrating.md": 2,
    "docs/stores.md": 1,
}
"""How many blocks each file marks `not-run` (files not listed: none)."""


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    code: str
    not_run: str | None


def blocks(path: Path) -> list[Block]:
    """The ```python blocks of a Markdown file, with their not-run reasons."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    page = path.relative_to(ROOT).as_posix()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            start = i
            previous = next(
                (lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()),
                "",
            )
            marked = _NOT_RUN.match(previous)
            i += 1
            body: list[str] = []
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            found.append(
                Block(
                    page, start + 1, "\n".join(body) + "\n", marked and marked.group(1)
                )
            )
        i += 1
    return found


ALL = [block for page in PAGES for block in blocks(page)]
RUNNABLE = [block for block in ALL if block.not_run is None]


@pytest.mark.parametrize(
    "block", RUNNABLE, ids=[f"{block.page}:{block.line}" for block in RUNNABLE]
)
def test_the_example_runs(block: Block, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(block.code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (
        f"{block.page}:{block.line} failed:\n{done.stderr.decode()[-4000:]}"
    )


def test_fragments_are_counted_so_they_cannot_silently_grow() -> None:
    counted: dict[str, int] = {}
    for block in ALL:
        if block.not_run is not None:
            counted[block.page] = counted.get(block.page, 0) + 1
    assert counted == {page: n for page, n in FRAGMENTS.items() if n}


def test_the_collector_finds_blocks_in_readme_and_docs() -> None:
    pages = {block.page for block in RUNNABLE}
    assert "README.md" in pages
    assert len(RUNNABLE) >= 20
    assert sum(1 for page in pages if page.startswith("docs/")) >= 10
