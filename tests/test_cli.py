"""`python -m attnlib`: help, list, train, tables; bad input gives one line, a non-zero exit, no files."""

from __future__ import annotations

import subprocess
import sys

import pytest

from attnlib.experiments import PRESETS, names


def test_help_lists_experiments_and_presets(cli):
    for argv in (["--help"], ["train", "--help"]):
        code, out, _ = cli(argv)
        assert code == 0
        assert all(n in out for n in names()) and all(p in out for p in PRESETS)


def test_list_budget_prints_the_grid_total(cli):
    code, out, _ = cli(["list", "--preset", "budget"])
    assert code == 0
    assert "estimated total for the grid:" in out and "unmeasured" not in out
    assert all(n in out for n in names()) and "4x4 space-to-depth" in out  # reasons are shown


@pytest.mark.parametrize(
    "argv,parameter",
    [
        (["train", "resnet50", "--preset", "smoke"], "resnet18, quadratic_iso_9h"),
        (["train", "vit", "--preset", "fast"], "paper, budget, smoke"),
        (["train", "vit", "--preset", "smoke", "--epochs", "-1"], "an integer >= 1"),
        (["train", "vit", "--preset", "smoke", "--epochs", "2.5"], "an integer >= 1"),
        (["train", "vit", "--preset", "smoke", "--seed", "x"], "an integer >= 0"),
        (["train", "vit", "--preset", "smoke", "--data", "/no/such/folder"], "not an existing folder"),
        (["train", "vit", "--preset", "smoke", "--device", "tpu"], "device: got 'tpu'; allowed"),
        (["train", "vit", "--preset", "smoke", "--data", "synthetic:x"], "data: got 'synthetic:x'"),
        (["list", "--preset", "huge"], "paper, budget, smoke"),
        (["table3", "--preset", "huge"], "paper, budget, smoke"),
        (["fly"], "invalid choice"),
    ],
)
def test_bad_input_one_line_nothing_written(argv, parameter, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(argv + (["--results-dir", str(tmp_path / "r")] if argv[0] == "train" else []))
    assert code == 2
    assert err.count("\n") == 1 and parameter in err and "Traceback" not in err, err
    assert not any(tmp_path.iterdir())  # nothing written


def test_train_then_tables(cli, tmp_path):
    results = str(tmp_path / "r")
    code, out, _ = cli(["train", "vit_ha", "--preset", "smoke", "--results-dir", results, "--no-progress"])
    assert code == 0 and "test accuracy" in out
    metrics = tmp_path / "r" / "vit_ha" / "smoke" / "metrics.json"
    before = metrics.stat().st_mtime_ns
    code, out, _ = cli(["train", "vit_ha", "--preset", "smoke", "--results-dir", results])
    assert code == 0 and "already complete" in out and metrics.stat().st_mtime_ns == before
    code, out, _ = cli(["table3", "--results-dir", results, "--preset", "smoke"])
    assert code == 0 and "ViT" in out and "complete" in out and "missing" in out
    code, out, _ = cli(["table1", "--results-dir", results, "--preset", "smoke"])
    assert code == 0 and "ResNet18" in out


def test_locked_run_is_refused(cli, tmp_path):
    from attnlib.runs import run_dir
    from attnlib.store import RunLock

    with RunLock(run_dir(tmp_path, "vit", "smoke")):
        code, _, err = cli(["train", "vit", "--preset", "smoke", "--results-dir", str(tmp_path)])
    assert code == 3 and err.count("\n") == 1 and "being trained by another process" in err


@pytest.mark.slow
def test_entry_point_never_prints_a_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "attnlib", "train", "vit", "--preset", "smoke", "--epochs", "0"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0 and "epochs" in proc.stderr
    assert not any(tmp_path.iterdir())
