"""No import cycles among resumable's modules, nor among its packages (issue 24).

Every import counts: at module level, under `if TYPE_CHECKING:`, and inside a
function (a lazy import still ties two modules together). `from pkg import name`
points at the submodule `pkg.name` when there is one, otherwise at `pkg` itself.
Packages are compared one level below `resumable` (`resumable._engine`,
`resumable.stores`, `resumable.pricing`, ...), where imports must point down the
stack: cli and integrations to the Engine, the engine to stores and serde, never
back (CONTRIBUTING.md, "How it is built").
"""

from __future__ import annotations

import ast
from pathlib import Path

import resumable

SOURCE = Path(resumable.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """Each module of resumable and the modules of resumable it imports."""
    paths = {_module_name(path): path for path in sorted(SOURCE.rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                graph[name].update(a.name for a in node.names if a.name in paths)
            elif isinstance(node, ast.ImportFrom) and node.module in paths:
                assert node.level == 0, f"{name}: relative import"
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    graph[name].add(sub if sub in paths else node.module)
        graph[name].discard(name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_module_imports_itself_back_through_others() -> None:
    assert cycles(import_graph()) == []


def test_no_package_imports_itself_back_through_others() -> None:
    packages: dict[str, set[str]] = {}
    for module, imported in import_graph().items():
        mine = _package(module)
        packages.setdefault(mine, set()).update(
            _package(other) for other in imported if _package(other) != mine
        )
    assert cycles(packages) == []


def test_the_graph_counts_lazy_and_type_checking_imports() -> None:
    graph = import_graph()
    # create_store imports the offload wrapper only when a URL asks for it
    assert "resumable.stores.offload" in graph["resumable.stores"]
    # archiving names the records it moves only under TYPE_CHECKING
    assert "resumable.stores.protocol" in graph["resumable.stores.stubs"]


def test_the_cycle_finder_finds_a_cycle_and_only_its_members() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
