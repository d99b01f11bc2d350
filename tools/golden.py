"""The book's golden snapshot: every value the book shows, pinned, so that a restructure can prove it changed nothing.

What it pins, at the chapters' default parameters (the budget preset, `results/`, nothing trained):

- every glued value (``{glue:text}`` names) of every chapter, by name;
- every table and note a chapter shows (Markdown / HTML / plain-text outputs), in order, as text;
- every figure, in order, as the SHA-256 of its PNG (same machine and matplotlib: the bytes repeat);
- the output of ``python -m attnlib table1`` and ``table3`` at the budget preset;
- the fingerprint of every experiment at every preset (``attnlib.results.config.run_config``).

    python tools/golden.py write            # (re)write tests/golden/book.json, after a change made on purpose
    python tools/golden.py check            # compare with tests/golden/book.json; exit 1 and list what differs
    python tools/golden.py check --figures  # ... figures by hash too (on the machine that wrote it)

Figures are compared by hash with ``check --figures`` on the machine that wrote the snapshot (PNG bytes depend on
the matplotlib version and, through the last bits of the plotted numbers, on the machine); a plain ``check``
compares which figures a chapter shows (their names, and how many unnamed ones). CI runs the plain check.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "golden" / "book.json"
CHAPTERS = sorted(p.stem for p in (ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
_RECORD = "application/papermill.record/"
_TEXT_KINDS = ("text/markdown", "text/html", "text/plain")


def _chapter(name: str, workdir: Path) -> dict:
    """Execute one chapter at its default parameters and collect what it shows."""
    import papermill

    nb = papermill.execute_notebook(
        str(ROOT / "book" / f"{name}.ipynb"),
        str(workdir / f"{name}.ipynb"),
        kernel_name="python3",
        cwd=str(ROOT),
        progress_bar=False,
    )
    glued, glued_figures, shown, figures = {}, {}, [], []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            record = next((k for k in data if k.startswith(_RECORD)), None)
            if record is not None:
                key = out["metadata"]["scrapbook"]["name"]
                kind = record[len(_RECORD) :]
                value = data[record]
                if kind.startswith("image/"):
                    glued_figures[key] = _digest(value)
                else:
                    glued[key] = value
                continue
            if "image/png" in data:
                figures.append(_digest(data["image/png"]))
            text = next((data[k] for k in _TEXT_KINDS if k in data), None)
            if text is not None and "image/png" not in data:
                shown.append("".join(text) if isinstance(text, list) else text)
            if out.get("output_type") == "stream":
                shown.append("".join(out.get("text", "")))
    return {"glued": glued, "glued_figures": glued_figures, "shown": shown, "figures": figures}


def _digest(value) -> str:
    text = "".join(value) if isinstance(value, list) else str(value)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "attnlib", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )
    return f"exit {done.returncode}\n{done.stdout}{done.stderr}"


def _fingerprints() -> dict:
    from attnlib import experiments
    from attnlib.results.config import run_config

    return {
        f"{name}@{preset}": run_config(name, preset)["fingerprint"]
        for preset in experiments.PRESETS
        for name in experiments.names(variants=True)
    }


def snapshot() -> dict:
    import matplotlib

    os.environ["ATTNLIB_TRAIN_MISSING"] = "0"  # read saved results only, as the book build does
    with tempfile.TemporaryDirectory() as tmp:
        chapters = {name: _chapter(name, Path(tmp)) for name in CHAPTERS}
    return {
        "matplotlib": matplotlib.__version__,
        "chapters": chapters,
        "cli": {cmd: _cli(cmd, "--preset", "budget") for cmd in ("table1", "table3")},
        "fingerprints": _fingerprints(),
    }


FIGURES = ("figures", "glued_figures")
#: pandas' Styler names each HTML table it writes ``T_<5 hex digits>`` from a fresh uuid4 (its ids and CSS
#: selectors), different at every run: compared as one placeholder, so that only what a reader sees counts.
STYLER_ID = re.compile(r"(?<![0-9A-Za-z])T_[0-9a-f]{5}(?![0-9a-f])")


def _without_styler_ids(value):
    if isinstance(value, dict):
        return {k: _without_styler_ids(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_styler_ids(v) for v in value]
    return STYLER_ID.sub("T_id", value) if isinstance(value, str) else value


def differences(old: dict, new: dict, figures: bool = False) -> list[str]:
    """Where `new` differs from `old`, one line each; figures by hash only with `figures` and the same
    matplotlib, otherwise by name (glued) and count; pandas' random table ids (``STYLER_ID``) never count."""
    by_hash = figures and old.get("matplotlib") == new.get("matplotlib")
    old, new = _without_styler_ids(old), _without_styler_ids(new)
    out = []

    def walk(a, b, where: str):
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(a.keys() | b.keys()):
                if key == "matplotlib":
                    continue
                if key not in a or key not in b:
                    out.append(f"{where}/{key}: {'added' if key not in a else 'removed'}")
                elif key in FIGURES and not by_hash:
                    if isinstance(a[key], dict):  # glued figures: the same names
                        walk(dict.fromkeys(a[key], ""), dict.fromkeys(b[key], ""), f"{where}/{key}")
                    elif len(a[key]) != len(b[key]):
                        out.append(f"{where}/{key}: {len(a[key])} figures, now {len(b[key])}")
                else:
                    walk(a[key], b[key], f"{where}/{key}")
        elif isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                out.append(f"{where}: {len(a)} items, now {len(b)}")
            for i, (x, y) in enumerate(zip(a, b, strict=False)):
                walk(x, y, f"{where}[{i}]")
        elif a != b:
            out.append(f"{where}: {str(a)[:200]!r} -> {str(b)[:200]!r}")

    walk(old, new, "")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("write", "check"))
    parser.add_argument("--figures", action="store_true", help="check: compare figures by hash too")
    args = parser.parse_args(argv)
    new = snapshot()
    if args.action == "write":
        SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
        tmp = SNAPSHOT.with_suffix(".tmp")
        tmp.write_text(json.dumps(new, indent=1, sort_keys=True, ensure_ascii=False) + "\n", "utf-8")
        tmp.replace(SNAPSHOT)
        print(f"wrote {SNAPSHOT.relative_to(ROOT)}")
        return 0
    if not SNAPSHOT.exists():
        print(
            f"golden: no snapshot at {SNAPSHOT.relative_to(ROOT)}; write one with: python tools/golden.py write"
        )
        return 1
    diffs = differences(json.loads(SNAPSHOT.read_text("utf-8")), new, figures=args.figures)
    for line in diffs:
        print(line)
    print(f"golden: {'unchanged' if not diffs else f'{len(diffs)} differences'}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
