"""The files a newcomer opens first exist, and what they name is real."""

from __future__ import annotations

import hashlib
import importlib
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APACHE_2_0_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
"""Of the text at https://www.apache.org/licenses/LICENSE-2.0.txt."""


def test_the_license_is_the_apache_2_0_text_pyproject_declares() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_bytes()
    assert hashlib.sha256(text).hexdigest() == APACHE_2_0_SHA256


def test_the_changelog_starts_with_an_unreleased_section() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert headings[0] == "[Unreleased]"
    assert all(
        re.fullmatch(r"\[\d+\.\d+\.\d+\] - \d{4}-\d\d-\d\d", h) for h in headings[1:]
    )


def test_every_function_and_file_contributing_md_names_exists() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    names = set(re.findall(r"`(resumable(?:\.\w+)+)`", text))
    assert len(names) >= 15  # the life of a step names each function on the way
    missing = [name for name in sorted(names) if not resolves(name)]
    files = set(re.findall(r"`((?:tests|src|docs|examples|\.ci)/[\w./-]+)`", text))
    missing += [path for path in sorted(files) if not (ROOT / path).exists()]
    assert missing == []


def resolves(dotted: str) -> bool:
    """Whether `dotted` is a module, or an attribute path inside one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_no_test_cites_a_document_the_repository_lacks() -> None:
    cited = {
        (path.relative_to(ROOT).as_posix(), name)
        for path in (ROOT / "tests").rglob("*.py")
        for name in re.findall(
            r"\b([A-Z][A-Z_]+\.md)\b", path.read_text(encoding="utf-8")
        )
    }
    missing = [
        (test, name)
        for test, name in sorted(cited)
        if not (ROOT / name).exists() and not (ROOT / "docs" / name).exists()
    ]
    assert missing == []


def test_the_readme_names_every_example() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    examples = sorted(path.name for path in (ROOT / "examples").glob("*.py"))
    assert len(examples) == 7
    assert [name for name in examples if f"examples/{name}" not in readme] == []
