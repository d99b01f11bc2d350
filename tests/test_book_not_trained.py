"""Chapters 2 and 4 on a results folder with nothing complete in it (empty, missing, a timing file of `{}`,
a result whose provenance has the wrong types): they run to the end and say "not yet trained" / damaged,
never a KeyError. The pieces first (attnbook.below_target, attnlib.results.timing.load), then the chapters
themselves, from their jupytext sources, through papermill (slow)."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import jupytext
import pytest
from helpers import run_notebook

import attnbook as book
from attnbook import display
from attnbook.phrases import MISSING
from attnbook.tables import below_target
from attnlib.results import timing
from attnlib.results.config import run_dir
from attnlib.results.load import inspect_run
from attnlib.results.tables import attention_rows, collect, table3

ROOT = Path(__file__).resolve().parent.parent


def test_below_target_of_a_table_with_nothing_complete(tmp_path, monkeypatch):
    """The chapters' KeyError 'accuracy': an empty mask of dtype object taken for a list of columns."""
    frame = collect(tmp_path, "budget")
    assert (frame["status"] == "missing").all()
    assert below_target(frame, "budget") == [] and attention_rows(frame).empty
    shown = []
    monkeypatch.setattr(display, "note", lambda text, kind="note": shown.append(text))
    book.note_below_target(frame, "budget")
    assert shown == []


@pytest.mark.parametrize("content", ["{}", "[]", '{"machine": 1}', "not json", "[" * 100_000])
def test_a_damaged_timing_file_is_not_measured_in_one_line(tmp_path, caplog, content):
    path = timing.timing_path(tmp_path, "budget")
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with caplog.at_level(logging.WARNING, logger="attnlib"):
        assert timing.load(tmp_path, "budget") is None
    assert "is damaged" in caplog.text and "\n" not in caplog.text.strip()
    params = book.check_params(preset="budget", results_dir=tmp_path, device="cpu", train_missing=False)
    assert "not measured" in book.timing_markdown(params)
    assert table3(tmp_path, "budget")["wall_time_ms"].isna().all()


def test_the_repository_timing_file_passes():
    assert timing.load(ROOT / "results", "budget") is not None


def _run_chapter(chapter: str, results_dir: Path, out: Path):
    """The chapter's jupytext source, executed by papermill with the given results folder, never training."""
    nb = jupytext.read(ROOT / "book" / f"{chapter}.py")
    source = out.with_suffix(".in.ipynb")
    jupytext.write(nb, source)
    return run_notebook(
        source,
        out,
        parameters={
            "preset": "budget",
            "results_dir": str(results_dir),
            "train_missing": False,
            "device": "cpu",
        },
        cwd=str(ROOT / "book"),
    )


def _texts(nb) -> str:
    parts = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            parts += [o.get("text", "")] + [str(v) for v in o.get("data", {}).values()]
    return "\n".join(parts)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A results folder where nothing is usable: a timing file of `{}` and one budget result per kind of
    bad provenance (copied from the repository's results, then edited)."""
    root = tmp_path_factory.mktemp("hostile")
    (root / "timing").mkdir()
    (root / "timing" / "budget.json").write_text("{}")
    edits = {"learned_9h": ("epochs_trained", "many"), "vit": ("world_size", "2")}
    for name, (key, value) in edits.items():
        src = run_dir(ROOT / "results", name, "budget")
        if not (src / "metrics.json").exists():
            continue
        dst = run_dir(root, name, "budget")
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("checkpoints", "run.lock"))
        metrics = json.loads((dst / "metrics.json").read_text())
        metrics["provenance"][key] = value
        (dst / "metrics.json").write_text(json.dumps(metrics))
        assert inspect_run(dst)[0] == "damaged"
    return root


@pytest.mark.slow
@pytest.mark.parametrize("chapter", ["02_reproduction", "04_hierarchical"])
@pytest.mark.parametrize("folder", ["missing", "hostile"])  # an empty folder reads as a missing one
def test_chapter_says_not_yet_trained_instead_of_crashing(chapter, folder, hostile, tmp_path):
    results = {"missing": tmp_path / "absent", "hostile": hostile}[folder]
    nb = _run_chapter(chapter, results, tmp_path / f"{chapter}.ipynb")  # raises on a failing cell
    text = _texts(nb)
    assert MISSING in text or "not saved" in text
    assert "Traceback" not in text and "KeyError" not in text


@pytest.mark.parametrize("content", ["{}", '{"machine": {}, "rows": [{"dtype": 3}]}', "[" * 100_000, "null"])
def test_a_damaged_benchmark_is_left_out_in_one_line(tmp_path, caplog, content):
    bench = tmp_path / "bench"
    bench.mkdir()
    shutil.copy(ROOT / "results" / "bench" / "cpu.json", bench / "cpu.json")
    (bench / "gpu.json").write_text(content)
    params = book.check_params(preset="budget", results_dir=tmp_path, device="cpu", train_missing=False)
    with caplog.at_level(logging.WARNING, logger="attnlib"):
        reports = book.bench_reports(params)
    assert list(reports) == ["cpu"] and "gpu.json is damaged" in caplog.text
