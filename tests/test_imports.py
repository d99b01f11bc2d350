"""attnlib's import graph, read from the source (ast: every import, at module level or inside a function):
no module imports itself through others (no import circle), and the arrows point inward only (CONTRIBUTING.md's
three rings): the core imports neither results, analysis nor the lab; results and analysis import neither the
lab, the trainer nor data loading."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import rings  # tools/rings.py: which ring a file belongs to

ROOT = Path(__file__).resolve().parents[1]


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST, name: str, is_package: bool, modules: set[str]) -> set[str]:
    """The modules of `modules` that a module's source imports, anywhere in it: `import a.b` names a.b,
    `from a import b` names a.b where that is a module (else the package a), `from . import b` resolved
    against the module's own package."""
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.update(
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names
            )
    return {m for m in found if m in modules and m != name}


def import_graph(root: Path, package: str = "attnlib") -> dict[str, set[str]]:
    """module -> the modules of `package` it imports, for every .py file under root/package."""
    files = {module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}
    return {
        name: imported(ast.parse(path.read_text(), str(path)), name, path.name == "__init__.py", set(files))
        for name, path in files.items()
    }


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle: for each set of modules that import one another (a strongly connected component,
    Tarjan's algorithm), the shortest circle through its first module, in import order, that module again at
    the end."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = set(stack[stack.index(module) :])
            del stack[stack.index(module) :]
            if len(component) > 1:
                found.append(_circle_through(min(component), graph, component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def _circle_through(start: str, graph: dict[str, set[str]], component: set[str]) -> list[str]:
    paths, seen = [[start]], {start}
    for path in paths:  # breadth first: the list grows while it is walked
        for target in sorted(graph[path[-1]] & component):
            if target == start:
                return path + [start]
            if target not in seen:
                seen.add(target)
                paths.append(path + [target])
    raise AssertionError(f"{start} is on no circle of {sorted(component)}")


def ring_of(module: str) -> str:
    path = Path(*module.split("."))
    return rings.ring_of(path / "__init__.py" if (ROOT / path).is_dir() else path.with_suffix(".py"))


# The arrows a ring must not draw (the core's parts named here by module prefix).
FORBIDDEN = {
    "core": ("attnlib.results", "attnlib.analysis", "attnlib.lab"),
    "results+analysis": ("attnlib.lab", "attnlib.train", "attnlib.data"),
}


def wrong_arrows(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        if any(target == p or target.startswith(p + ".") for p in FORBIDDEN.get(ring_of(module), ()))
    )


@pytest.fixture(scope="module")
def graph():
    return import_graph(ROOT)


def test_the_graph_is_read_from_every_import(graph):
    # a module-level import, a function-level one and a package's re-export all count
    assert "attnlib.lab.commands" in graph["attnlib.lab.cli"]  # inside main()
    assert "attnlib.experiments" in graph["attnlib.lab.cli"]  # at the top
    assert "attnlib.lab.cli" in graph["attnlib.__main__"]
    assert "attnlib.train.loop" in graph["attnlib.train"]


def test_relative_imports_are_resolved(tmp_path):
    pkg = tmp_path / "attnlib" / "sub"
    pkg.mkdir(parents=True)
    (tmp_path / "attnlib" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from . import a\n")
    (pkg / "a.py").write_text("def f():\n    from .b import g\n")
    (pkg / "b.py").write_text("from .. import sub\nfrom attnlib.sub import a\n")
    graph = import_graph(tmp_path)
    assert graph["attnlib.sub"] == {"attnlib.sub.a"}
    assert graph["attnlib.sub.a"] == {"attnlib.sub.b"}
    assert graph["attnlib.sub.b"] == {"attnlib.sub", "attnlib.sub.a"}
    assert circles(graph) == [["attnlib.sub", "attnlib.sub.a", "attnlib.sub.b", "attnlib.sub"]]


def test_every_circle_is_named():
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": set(), "d": {"e"}, "e": {"f"}, "f": {"d", "a"}}
    assert circles(graph) == [["a", "b", "a"], ["d", "e", "f", "d"]]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_circle(graph):
    found = circles(graph)
    assert not found, "import circles: " + "; ".join(" -> ".join(circle) for circle in found)


def test_arrows_point_inward(graph):
    assert ring_of("attnlib.models.cost") == ring_of("attnlib.train") == "core"
    assert ring_of("attnlib.analysis.costs") == ring_of("attnlib.results") == "results+analysis"
    assert ring_of("attnlib.__main__") == ring_of("attnlib.lab.cli") == "lab"
    wrong = wrong_arrows(graph)
    assert not wrong, "imports against the rings (CONTRIBUTING.md): " + "; ".join(wrong)


def test_an_arrow_pointing_outward_is_named():
    graph = {
        "attnlib.models.cost": {"attnlib.analysis.costs", "attnlib.experiments"},
        "attnlib.results.load": {"attnlib.train.loop", "attnlib.models"},
        "attnlib.analysis.claims": {"attnlib.lab.plan", "attnlib.results.load"},
        "attnlib.lab.run": {"attnlib.train", "attnlib.analysis.claims"},
        "attnlib.__main__": {"attnlib.lab.cli"},
    }
    assert wrong_arrows(graph) == [
        "attnlib.analysis.claims -> attnlib.lab.plan",
        "attnlib.models.cost -> attnlib.analysis.costs",
        "attnlib.results.load -> attnlib.train.loop",
    ]
