"""Every test the docs name (`tests/...py::test_name`) exists, so no link can rot."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`")


def named_tests() -> set[tuple[str, str | None]]:
    found: set[tuple[str, str | None]] = set()
    for page in (ROOT / "docs").rglob("*.md"):
        for match in REFERENCE.finditer(page.read_text(encoding="utf-8")):
            found.add((match.group(1), match.group(2)))
    return found


def defined(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def test_every_test_the_docs_name_exists() -> None:
    references = named_tests()
    assert len(references) >= 25  # the failure-modes table alone names ~25
    missing = []
    for file, name in sorted(references, key=str):
        path = ROOT / file
        if not path.exists():
            missing.append(file)
        elif name is not None and name not in defined(path):
            missing.append(f"{file}::{name}")
    assert missing == []


def test_every_failure_mode_links_a_test() -> None:
    text = (ROOT / "docs" / "guide" / "failure-modes.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| ")][2:]
    assert len(rows) >= 15
    for row in rows:
        assert REFERENCE.search(row.split("|")[-2]), row
