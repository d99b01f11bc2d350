"""What only the book uses lives beside the chapters (issue 32): book/_lib/attnbook, imported as `attnbook` from
any working directory (the editable install lists book/_lib as a second source root), the browser check as a
script in tools/, and the library itself imports none of it (the old paths attnlib.book / attnlib.viz /
attnlib.bookcheck are gone)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_attnbook_imports_from_any_folder(tmp_path):
    code = "import attnbook, attnbook.viz, attnbook.sphinx; print(attnbook.__file__); print(attnbook.params.repo_root())"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    where, root = done.stdout.split()
    assert Path(where) == ROOT / "book" / "_lib" / "attnbook" / "__init__.py"
    assert Path(root) == ROOT  # results/ and the data resolve against the checkout, whatever the folder


def test_the_source_roots_and_the_extension():
    pyproject = (ROOT / "pyproject.toml").read_text()  # (tomllib is Python 3.11+; the project runs on 3.10)
    find = pyproject.split("[tool.setuptools.packages.find]")[1].split("\n[")[0]
    assert 'where = [".", "book/_lib"]' in find and '"attnbook*"' in find
    assert "attnbook.sphinx" in (ROOT / "_config.yml").read_text()


def test_the_old_paths_are_gone():
    for old in ("attnlib.book", "attnlib.viz", "attnlib.bookcheck"):
        done = subprocess.run(
            [sys.executable, "-c", f"import {old}"], capture_output=True, text=True, timeout=300
        )
        assert done.returncode != 0 and "ModuleNotFoundError" in done.stderr, old


def test_the_library_imports_no_book_code():
    """Arrows point inward: nothing in attnlib/ names attnbook or the browser check."""
    offenders = []
    for path in sorted((ROOT / "attnlib").rglob("*.py")):
        name = str(path.relative_to(ROOT))
        text = path.read_text("utf-8")
        if "import attnbook" in text or "from attnbook" in text or "bookcheck import" in text:
            offenders.append(name)
    assert offenders == []


def test_bookcheck_runs_as_a_script_from_the_root(tmp_path):
    """`make check-book` runs `python tools/bookcheck.py`: without a built book it says what to do (exit 2)."""
    done = subprocess.run(
        [sys.executable, "tools/bookcheck.py", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and "make book" in done.stderr, done.stderr
    usage = subprocess.run(
        [sys.executable, "tools/bookcheck.py", "--help"], cwd=ROOT, capture_output=True, text=True
    )
    assert usage.returncode == 0 and usage.stdout.startswith("usage: python tools/bookcheck.py")


def _imports(path: Path) -> list[str]:
    """Every module an import statement of ``path`` names (``from attnlib import lab`` as ``attnlib.lab``)."""
    import ast

    names = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return names


def test_the_book_reads_and_never_reaches():
    """The kit and the chapters import neither the lab nor the trainer: they read saved runs through the
    results and analysis sides. The one opt-in to training is runs.py's import of attnlib.lab.run
    (``train_missing``, for a chapter allowed to train)."""
    kit = ROOT / "book" / "_lib" / "attnbook"
    reaching = {}
    for path in sorted(kit.rglob("*.py")) + sorted((ROOT / "book").glob("[0-9][0-9]_*.py")):
        found = sorted(
            {n for n in _imports(path) if n.split(".")[:2] in (["attnlib", "lab"], ["attnlib", "train"])}
        )
        if found:
            reaching[str(path.relative_to(ROOT))] = found
    assert reaching == {"book/_lib/attnbook/runs.py": ["attnlib.lab.run", "attnlib.lab.run.run_or_load"]}
