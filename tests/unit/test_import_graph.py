"""The package shows its stages: autotune/ imports form no circle, and no stage imports a later one.

The graph is built from the source (every `import` and `from ... import`, at module level and inside functions, as
`ast` sees them), so a lazy import inside a function counts like any other. docs/architecture.md "Packages" gives
the order and why each stage sits where it does."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "autotune"
# lower to higher: a module may import its own package and any earlier one, never a later one
LAYERS = (
    "core",
    "spec",
    "predict",
    "layouts",
    "results",
    "search",
    "run",
    "analyse",
    "interop",
    "fitting",
    "validation",
    "cli",
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PKG.rglob("*.py")}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module `name` refers to (`from a.b import c` may name module a.b.c or an attribute of a.b)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for mod, path in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: resolve against this module's package
                    base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                targets = [f"{stem}.{a.name}" for a in node.names] or [stem]
            else:
                continue
            for t in targets:
                if t.split(".")[0] == "autotune" and (dep := _resolve(t, modules)) and dep != mod:
                    deps.add(dep)
        graph[mod] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(u: str) -> list[str] | None:
        state[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                return stack[stack.index(v) :] + [v]
            if not state.get(v) and (found := visit(v)):
                return found
        stack.pop()
        state[u] = 2
        return None

    for u in sorted(graph):
        if not state.get(u) and (found := visit(u)):
            return found
    return None


def _layer(mod: str) -> int | None:
    parts = mod.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_no_stage_imports_a_later_one():
    upward = []
    for mod, deps in import_graph().items():
        for dep in deps:
            a, b = _layer(mod), _layer(dep)
            if b is not None and (a is None or b > a):
                upward.append(f"{mod} -> {dep}")
    assert not upward, "imports that run up the stages:\n" + "\n".join(sorted(upward))


def test_every_package_has_a_stage():
    """A new folder under autotune/ must be placed in LAYERS (and in docs/architecture.md's folder table)."""
    folders = sorted(p.name for p in PKG.iterdir() if (p / "__init__.py").exists())
    assert sorted(LAYERS) == folders


@pytest.mark.parametrize(
    "graph, cycle",
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"b"}, "b": set(), "c": {"b"}}, None),
    ],
)
def test_cycle_finder(graph, cycle):
    assert find_cycle(graph) == cycle


def test_function_level_imports_count(tmp_path, monkeypatch):
    """A lazy import inside a function is an edge too (the circle memory <-> frameworks ran through one)."""
    pkg = tmp_path / "autotune"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "a.py").write_text("def f():\n    from autotune.core.b import g\n")
    (pkg / "core" / "b.py").write_text("from autotune.core import a\n")
    monkeypatch.setattr(__import__(__name__), "PKG", pkg)
    assert find_cycle(import_graph()) == ["autotune.core.a", "autotune.core.b", "autotune.core.a"]


def test_architecture_doc_lists_the_packages_in_stage_order():
    """docs/architecture.md's folder table names every package, in the order LAYERS enforces."""
    doc = (PKG.parent / "docs" / "architecture.md").read_text()
    rows = [line.split("|")[1].strip() for line in doc.splitlines() if line.startswith("| `autotune/")]
    assert rows == [f"`autotune/{p}/`" for p in LAYERS]
