"""`make rings`: each ring's size against its line budget, and the modules, classes and functions grown too long.

    python tools/rings.py    # prints each ring's lines and budget, then the sizes; exit 1 naming what is over

A ring's size is the physical lines (what `wc -l` counts) of its .py files. The rings are CONTRIBUTING.md's three
(the core, results + analysis, the lab with the CLI's entry), the book kit and tools/; their budgets are the table
between CONTRIBUTING.md's `rings:` markers, the one place they are written. Besides the budgets: no module over
MAX_MODULE lines and no class or function over MAX_DEF lines (its `def` or `class` line to its last), but for
KNOWN_LONG; one of those no longer too long fails too, so that the list only shrinks.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_MODULE, MAX_DEF = 500, 150
TOPS = ("attnlib", "book/_lib/attnbook", "tools")  # the folders whose .py files the rings hold

# Which ring a file is in (its path from the repository root): the first rule whose folder or file holds it.
RULES = (
    ("attnlib/results", "results+analysis"),
    ("attnlib/analysis", "results+analysis"),
    ("attnlib/lab", "lab"),
    ("attnlib/__main__.py", "lab"),  # `python -m attnlib`: the CLI's entry
    ("attnlib", "core"),
    ("book/_lib/attnbook", "book kit"),
    ("tools", "tools"),
)
RINGS = ("core", "results+analysis", "lab", "book kit", "tools")

# Modules ('path') and classes or functions ('path:Name') allowed over the limits, each with its reason: none
# since issue 50 split the last ones (analysis/claims.py, train/loop.py:_Run, Learned2DEncoding).
KNOWN_LONG: dict[str, str] = {}

_MARKED = re.compile(r"<!-- rings:.*?-->(.*?)<!-- /rings -->", re.S)
_ROW = re.compile(r"^\|\s*([^|]+?)\s*\|[^|\n]*\|\s*(\d+)\s*\|", re.M)  # | ring | what it holds | budget |


def ring_of(path: Path | str) -> str | None:
    """The ring of a file given by its path from the repository root (None: in no ring)."""
    path = Path(path).as_posix()
    return next((ring for top, ring in RULES if path == top or path.startswith(top + "/")), None)


def budgets(contributing: Path) -> dict[str, int]:
    """ring -> its budget in lines: the table between CONTRIBUTING.md's `rings:` markers."""
    marked = _MARKED.search(contributing.read_text())
    if not marked:
        raise SystemExit(f"{contributing}: no table between '<!-- rings: ... -->' and '<!-- /rings -->'")
    return {ring: int(lines) for ring, lines in _ROW.findall(marked.group(1))}


def files(root: Path = ROOT) -> dict[str, list[Path]]:
    """ring -> its .py files, as paths from root."""
    rings: dict[str, list[Path]] = {ring: [] for ring in RINGS}
    for top in TOPS:
        for path in sorted((root / top).rglob("*.py")):
            rings[ring_of(path.relative_to(root))].append(path.relative_to(root))
    return rings


def ring_sizes(root: Path = ROOT) -> dict[str, int]:
    return {
        ring: sum((root / p).read_bytes().count(b"\n") for p in paths) for ring, paths in files(root).items()
    }


def over_budget(sizes: dict[str, int], limits: dict[str, int]) -> list[str]:
    """A line for each ring over its budget, or without one, and for each budget of no ring."""
    problems = [
        f"ring {r}: {n} lines, over its budget of {limits[r]}"
        for r, n in sizes.items()
        if n > limits.get(r, n)
    ]
    problems += [f"ring {ring}: no budget in CONTRIBUTING.md" for ring in sizes if ring not in limits]
    return problems + [f"a budget for {ring!r}: no such ring" for ring in limits if ring not in sizes]


def too_long(root: Path = ROOT) -> dict[str, int]:
    """'path' -> lines of each module over MAX_MODULE; 'path:Name' -> lines of each class or function (methods
    and nested ones too) over MAX_DEF."""
    found = {}
    for rel in (p for paths in files(root).values() for p in paths):
        text = (root / rel).read_text()
        if text.count("\n") > MAX_MODULE:
            found[rel.as_posix()] = text.count("\n")
        for node in ast.walk(ast.parse(text, str(rel))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if (n := node.end_lineno - node.lineno + 1) > MAX_DEF:
                    found[f"{rel.as_posix()}:{node.name}"] = n
    return found


def size_problems(found: dict[str, int], known: dict[str, str]) -> list[str]:
    """A line for each one too long that is not known, and for each known one no longer too long."""
    limit = {
        True: f"over {MAX_DEF} lines for a class or function",
        False: f"over {MAX_MODULE} lines for a module",
    }
    problems = [f"{name}: {n} lines, {limit[':' in name]}" for name, n in found.items() if name not in known]
    return problems + [
        f"{name}: no longer too long: take it off KNOWN_LONG" for name in known if name not in found
    ]


def main(argv: list[str] | None = None, root: Path = ROOT, known: dict[str, str] = KNOWN_LONG) -> int:
    parser = argparse.ArgumentParser(prog="python tools/rings.py", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--budgets", type=Path, default=root / "CONTRIBUTING.md", help="the file of the budgets"
    )
    args = parser.parse_args(argv)
    sizes, limits, found = ring_sizes(root), budgets(args.budgets), too_long(root)
    print(f"{'ring':18} {'lines':>6} {'budget':>6}")
    for ring, n in sizes.items():
        print(f"{ring:18} {n:>6} {limits.get(ring, '-'):>6}{'  over' if n > limits.get(ring, n) else ''}")
    print(f"\nmodules over {MAX_MODULE} lines, classes and functions over {MAX_DEF}:")
    for name, n in found.items():
        print(f"  {name:52} {n:>5}  {known.get(name, 'over')}")
    if not found:
        print("  none")
    problems = over_budget(sizes, limits) + size_problems(found, known)
    for problem in problems:
        print(f"rings: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
