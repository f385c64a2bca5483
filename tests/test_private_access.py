"""Tests assert observable behaviour: none reads a `._private` attribute (issue 24).

An ast walk over every test module finds attribute access (read, write or
monkeypatch target) whose name starts with one underscore, except on `self` and
`cls` (a test's own helper classes). A test that needs to reach inside passes a
public hook instead (a constructor argument such as SQLiteStore's `sync_file`,
`on_connect` and `inline_lock`). The few names allowed are public API that
happens to start with an underscore.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent

ALLOWED: dict[str, str] = {
    "_exit": "os._exit: the documented way for a child process to end at once",
    "_fields": "a NamedTuple's documented field names",
    "_replace": "a NamedTuple's documented copy-with-changes (urlsplit's result)",
    "_asdict": "a NamedTuple's documented conversion to a dict",
    "_make": "a NamedTuple's documented constructor from an iterable",
}
_GETTERS = {"getattr", "setattr", "delattr", "hasattr"}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in ALLOWED


def private_accesses(source: str) -> list[tuple[int, str]]:
    """(line, `base.name`) of each private attribute access in `source`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            base = ast.unparse(node.value)
            if base not in ("self", "cls"):
                found.append((node.lineno, f"{base}.{node.attr}"))
        elif isinstance(node, ast.Call) and len(node.args) >= 2:
            name = ast.unparse(node.func).rsplit(".", 1)[-1]
            attribute = node.args[1]
            if (
                name in _GETTERS
                and isinstance(attribute, ast.Constant)
                and isinstance(attribute.value, str)
                and _is_private(attribute.value)
            ):
                found.append((node.lineno, f"{name}(..., {attribute.value!r})"))
    return found


def test_no_test_reads_a_private_attribute() -> None:
    found = [
        f"{path.relative_to(TESTS)}:{line}: {what}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, what in private_accesses(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_the_finder_sees_reads_writes_and_monkeypatch_targets() -> None:
    source = """
store._db._inline_lock
store._pool = None
monkeypatch.setattr(store, "_call", fake)
getattr(store, "_options")
self._mine, cls._ours, parts._replace(path=""), os._exit(0), obj.__dict__
"""
    assert sorted(private_accesses(source)) == [
        (2, "store._db"),
        (2, "store._db._inline_lock"),
        (3, "store._pool"),
        (4, "setattr(..., '_call')"),
        (5, "getattr(..., '_options')"),
    ]
