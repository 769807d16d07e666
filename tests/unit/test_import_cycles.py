"""No import cycle anywhere in elastic_controller, webhook, certs or hack (the box): the import
graph, built from the source with ``ast`` (every ``import``: top level, inside functions, under
``TYPE_CHECKING``), has no strongly connected component of more than one module. import-linter's
contracts see only what they name; this sees every module, and a function-level import that hides
a cycle counts as one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("elastic_controller", "webhook", "certs", "hack")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_lines(tree: ast.Module) -> set[int]:
    """Line numbers of the statements under ``if TYPE_CHECKING:`` blocks."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (
                (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
                or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")):
            for stmt in node.body:
                lines.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return lines


def imports_of(path: Path, modules: set[str]) -> dict[str, bool]:
    """The project modules ``path`` imports -> whether only under TYPE_CHECKING. ``from pkg import x``
    counts as importing ``pkg.x`` when that is a module, else ``pkg``."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    typing_only = _type_checking_lines(tree)
    out: dict[str, bool] = {}

    def add(target: str, lineno: int) -> None:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            out[target] = out.get(target, True) and lineno in typing_only

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for alias in node.names:
                full = f"{prefix}.{alias.name}"
                add(full if full in modules else prefix, node.lineno)
    return out


def import_graph() -> dict[str, dict[str, bool]]:
    files = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]
    modules = {module_name(p) for p in files}
    return {module_name(p): imports_of(p, modules) for p in files}


def cycles(graph: dict[str, dict[str, bool]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_anywhere() -> None:
    graph = import_graph()
    assert len(graph) > 80  # every module was read (a wrong root would find none and pass)
    assert cycles(graph) == []  # type-only edges count too: no exemptions


def test_function_level_imports_are_edges() -> None:
    """The graph sees an import inside a function (the way a cycle hides) and one under TYPE_CHECKING."""
    graph = import_graph()
    # cli/controller.py imports the agent inside its command function
    assert "elastic_controller.agent" in graph["elastic_controller.cli.controller"]
    assert graph["elastic_controller.policy.ordering"]["elastic_controller.policy.world"] is True


@pytest.mark.parametrize(("graph", "expected"), [
    pytest.param({"a": {"b": False}, "b": {"a": False}}, [["a", "b"]], id="two-module-circle"),
    pytest.param({"a": {"b": False}, "b": {"c": True}, "c": {"a": False}}, [["a", "b", "c"]], id="three"),
    pytest.param({"a": {"b": False}, "b": {}, "c": {"a": False}}, [], id="no-cycle"),
])
def test_cycles_finds_circles(graph: dict[str, dict[str, bool]], expected: list[list[str]]) -> None:
    assert cycles(graph) == expected
