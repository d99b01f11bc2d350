"""tools/rings.py (`make rings`): every ring within its budget of CONTRIBUTING.md, no module, class or function
too long but the known ones; and the check fails, naming the ring or the module, when one is over."""

import subprocess
import sys
import textwrap
from pathlib import Path

import rings  # tools/rings.py

ROOT = Path(__file__).resolve().parents[1]

TABLE = """Some words.
<!-- rings: budgets -->
| ring | what it holds | budget (lines) |
|------|---------------|----------------|
| core | the library | {core} |
| results+analysis | reading | 100 |
| lab | the CLI | 100 |
| book kit | the book's | 100 |
| tools | scripts | 100 |
<!-- /rings -->
| other | table | 7 |
"""


def test_every_ring_is_within_its_budget():
    out = subprocess.run(
        [sys.executable, "tools/rings.py"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.splitlines()[0].split() == ["ring", "lines", "budget"]
    assert set(rings.budgets(ROOT / "CONTRIBUTING.md")) == set(rings.RINGS)


def test_rings_hold_what_contributing_says():
    assert rings.ring_of("attnlib/models/cost.py") == rings.ring_of("attnlib/experiments.py") == "core"
    assert (
        rings.ring_of("attnlib/results/load.py")
        == rings.ring_of("attnlib/analysis/costs.py")
        == "results+analysis"
    )
    assert rings.ring_of("attnlib/lab/cli.py") == rings.ring_of("attnlib/__main__.py") == "lab"
    assert rings.ring_of("book/_lib/attnbook/tables.py") == "book kit"
    assert rings.ring_of("tools/rings.py") == "tools"
    assert rings.ring_of("tests/test_rings.py") is None and rings.ring_of("attnlib_other/x.py") is None


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_a_ring_over_its_budget_fails_naming_it(tmp_path, capsys):
    root = _tree(tmp_path, {"attnlib/a.py": "x = 1\n" * 30, "attnlib/lab/cli.py": "\n\n", "tools/t.py": "\n"})
    (tmp_path / "CONTRIBUTING.md").write_text(TABLE.format(core=30))
    assert rings.budgets(tmp_path / "CONTRIBUTING.md")["core"] == 30  # the marked table only
    assert rings.main([], root=root, known={}) == 0
    out = capsys.readouterr().out
    assert "core                   30     30" in out and "lab                     2    100" in out
    (tmp_path / "CONTRIBUTING.md").write_text(TABLE.format(core=29))
    assert rings.main([], root=root, known={}) == 1
    out, err = capsys.readouterr()
    assert "30     29  over" in out and err == "rings: ring core: 30 lines, over its budget of 29\n"
    assert rings.over_budget({"core": 5, "lab": 1}, {"core": 5, "book": 1}) == [
        "ring lab: no budget in CONTRIBUTING.md",
        "a budget for 'book': no such ring",
    ]


def test_a_long_module_class_or_function_fails_unless_known(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(150))
    root = _tree(
        tmp_path,
        {
            "attnlib/big.py": "\n" * 501,
            "attnlib/ok.py": "\n" * 500,  # at the limits: not too long
            "tools/fits.py": "def fits():\n" + "".join(body.splitlines(keepends=True)[:149]),
            "tools/t.py": "class Long:\n    def long(self):\n" + textwrap.indent(body, "    "),
        },
    )
    found = rings.too_long(root)
    assert found == {"attnlib/big.py": 501, "tools/t.py:Long": 152, "tools/t.py:long": 151}
    assert rings.size_problems(found, {}) == [
        "attnlib/big.py: 501 lines, over 500 lines for a module",
        "tools/t.py:Long: 152 lines, over 150 lines for a class or function",
        "tools/t.py:long: 151 lines, over 150 lines for a class or function",
    ]
    known = {name: "being split" for name in found}
    assert rings.size_problems(found, known) == []
    assert rings.size_problems(found, {**known, "attnlib/ok.py": "split"}) == [
        "attnlib/ok.py: no longer too long: take it off KNOWN_LONG"
    ]


def test_the_readme_table_of_where_things_are_names_real_files():
    """Issue 50: the README's 'Where things are' names each ring's folders and files; every one exists."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Where things are", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"`([\w./*]+)`", table)
    folders = [n for n in named if n.startswith(("attnlib/", "book/"))]
    assert len(folders) >= 10
    for name in folders:
        assert list(ROOT.glob(name.replace("NN", "[0-9][0-9]"))), name
    files = [n for n in named if n.endswith((".py", ".yaml")) and "/" not in n]  # in the row's folder
    for name in files:
        assert list(ROOT.glob(f"attnlib/**/{name}")), name
