"""No import cycle anywhere in elastic_controller, webhook, certs, hack (the box), tests or bench: the
import graph, built from the source with ``ast`` (every ``import``: top level, inside functions, under
``TYPE_CHECKING``), has no strongly connected component of more than one module. import-linter's
contracts see only what they name; this sees every module, and a function-level import that hides
a cycle counts as one.

The same graph holds the test harness's contract (tests/harness/__init__.py): no module imports a
test module (``test_*.py``: what two tests share lives in tests/harness), the harness imports no
test tier, and bench/ imports nothing of tests/ but the harness. bench/ is not a package: its
scripts import each other by bare name through ``sys.path``, and those names are resolved to
``bench.NAME`` here (as are a test's bare imports of a benchmark)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("elastic_controller", "webhook", "certs", "hack", "tests", "bench")


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
        if f"bench.{target}" in modules and target.partition(".")[0] not in PACKAGES:
            target = f"bench.{target}"  # a benchmark imported by bare name (bench/ on sys.path)
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


def is_test_module(module: str) -> bool:
    """A pytest module of a tier (``tests/**/test_*.py``): something pytest runs, never a library."""
    return module.startswith("tests.") and module.rpartition(".")[2].startswith("test_")


def harness_violations(graph: dict[str, dict[str, bool]]) -> list[str]:
    """Every import that breaks the harness contract, as ``importer -> imported: why``."""
    tiers = ("tests.unit", "tests.integration", "tests.e2e", "tests.real")
    out = []
    for importer, targets in sorted(graph.items()):
        for target in sorted(targets):
            if is_test_module(target):
                out.append(f"{importer} -> {target}: a test module is not a library (move it to tests/harness)")
            elif importer.startswith("tests.harness") and target.startswith(tiers):
                out.append(f"{importer} -> {target}: the harness imports no test tier")
            elif importer.startswith("bench") and target.startswith("tests") and not target.startswith("tests.harness"):
                out.append(f"{importer} -> {target}: bench/ imports only tests/harness of tests/")
    return out


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


def test_no_test_module_is_imported_and_bench_uses_only_the_harness() -> None:
    graph = import_graph()
    assert any(m.startswith("tests.harness.") for m in graph) and any(m.startswith("bench.") for m in graph)
    assert "tests.harness.builders" in graph["bench.agent_cycle"]  # bench's imports are read
    assert "bench.restart_costs" in graph["bench.restart_classes"]  # a bare sibling import resolves
    assert harness_violations(graph) == []


TEST_MODULE = "a test module is not a library (move it to tests/harness)"


@pytest.mark.parametrize(("importer", "imported", "why"), [
    ("tests.unit.test_b", "tests.unit.test_a", TEST_MODULE),
    ("bench.x", "tests.e2e.test_a", TEST_MODULE),
    ("bench.x", "tests.e2e.conftest", "bench/ imports only tests/harness of tests/"),
    ("tests.harness.x", "tests.unit.helpers", "the harness imports no test tier"),
    ("bench.x", "tests.harness.builders", None),
    ("tests.unit.test_a", "tests.harness.stack", None),
    ("tests.unit.test_a", "elastic_controller.agent", None),
])
def test_harness_violations(importer: str, imported: str, why: str | None) -> None:
    expected = [f"{importer} -> {imported}: {why}"] if why else []
    assert harness_violations({importer: {imported: False}}) == expected


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
