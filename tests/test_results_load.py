"""attnlib.results.load (issue 32): reading a saved run without the trainer. What `read` returns equals what the
run wrote (read back independently from the files), each status of a folder, and that the results and
analysis sides import neither the trainer, data loading nor the lab."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from attnlib.errors import ConfigError
from attnlib.results import load
from attnlib.results.config import run_config, run_dir


def _npz(path) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(path.read_bytes())) as z:
        return dict(z)


def test_a_saved_run_reads_back_as_written(trained):
    """Every part of a complete run equals its file read here with plain json / pandas / numpy."""
    saved = load.read("vit", "smoke", results_dir=trained)
    folder = run_dir(trained, "vit", "smoke")
    assert (saved.status, saved.detail, saved.path) == ("complete", "", folder)
    metrics = json.loads((folder / "metrics.json").read_text())
    config = json.loads((folder / "config.json").read_text())
    assert saved.run.metrics == metrics and saved.run.config == config
    assert saved.run.test_accuracy == metrics["test_accuracy"]
    assert saved.fingerprint == config["fingerprint"] == run_config("vit", "smoke")["fingerprint"]
    assert saved.run.history.equals(pd.read_csv(folder / "history.csv"))
    for name, arrays in (("attention.npz", saved.run.attention), ("probe.npz", saved.run.probe)):
        expected = _npz(folder / name)
        assert arrays.keys() == expected.keys()
        for k in expected:  # NaN where a measure is undefined (a layer without a grid): equal as NaN
            np.testing.assert_array_equal(arrays[k], expected[k])
    assert saved.run.centers is None  # no quadratic encoding in a ViT


def test_read_matches_the_labs_reader(trained):
    """`read` and `load_run` (the lab's reader of a folder it wrote, which reads every file twice) agree."""
    saved = load.read("vit_ha", "smoke", results_dir=trained)
    run = load.load_run(run_dir(trained, "vit_ha", "smoke"), saved.fingerprint)
    assert saved.run.metrics == run.metrics and saved.run.history.equals(run.history)
    for k in run.attention:
        np.testing.assert_array_equal(saved.run.attention[k], run.attention[k])


def test_not_trained_damaged_and_other_configuration(copy):
    assert load.read("resnet18", "smoke", results_dir=copy).status == "missing"
    other = load.read("vit", "smoke", results_dir=copy, epochs=3)  # the saved run trained 1 epoch
    assert (other.status, other.run) == ("stale", None)
    assert "train.epochs: 1 saved, 3 now" in other.detail
    npz = run_dir(copy, "vit", "smoke") / "attention.npz"
    npz.write_bytes(npz.read_bytes()[:-10])
    damaged = load.read("vit", "smoke", results_dir=copy)
    assert (damaged.status, damaged.run) == ("damaged", None)
    assert "does not match its checksum" in damaged.detail and "\n" not in damaged.detail


def test_a_forged_checksum_that_does_not_parse_is_damaged(copy):
    """A history.csv rewritten with a matching checksum in metrics.json but no table inside: damaged, in
    one line, never an exception."""
    folder = run_dir(copy, "vit", "smoke")
    metrics = json.loads((folder / "metrics.json").read_text())
    (folder / "attention.npz").write_bytes(b"PK\x03\x04 not a zip")
    import hashlib

    metrics["files"]["attention.npz"] = hashlib.sha256((folder / "attention.npz").read_bytes()).hexdigest()
    (folder / "metrics.json").write_text(json.dumps(metrics))
    saved = load.read("vit", "smoke", results_dir=copy)
    assert saved.status == "damaged" and "\n" not in saved.detail


def test_bad_arguments_raise_config_error_and_nothing_else(trained):
    with pytest.raises(ConfigError):
        load.read("no_such_model", "smoke", results_dir=trained)
    with pytest.raises(ConfigError):
        load.read("vit", "no_such_preset", results_dir=trained)
    with pytest.raises(ConfigError):
        load.read("vit", "smoke", seed=-1, results_dir=trained)


def test_read_seeds_and_read_runs(copy):
    import shutil

    base = run_dir(copy, "vit", "smoke")
    shutil.copytree(
        base, run_dir(copy, "vit", "smoke", 3)
    )  # seed 0's files under seed 3: another fingerprint
    seeds = load.read_seeds("vit", "smoke", results_dir=copy)
    assert list(seeds) == [0, 3] and seeds[0].complete and seeds[3].status == "stale"
    assert list(load.read_seeds("vit", "smoke", results_dir=copy, seeds=[0])) == [0]
    runs = load.read_runs(["vit", "resnet18"], "smoke", results_dir=copy)
    assert runs["resnet18"] is None and runs.status["resnet18"][0] == "missing"
    assert runs["vit"].metrics == seeds[0].run.metrics and runs.status["vit"] == ("complete", "")


def test_results_and_analysis_import_no_trainer_data_loading_or_lab(trained):
    """Importing every module of the results and analysis sides, reading runs, building the tables and the
    claims ledger imports neither attnlib.train, attnlib.data nor attnlib.lab."""
    script = f"""
import importlib, pkgutil, sys
import attnlib.results, attnlib.analysis
for package in (attnlib.results, attnlib.analysis):
    for module in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        importlib.import_module(module.name)
from attnlib.analysis import claims
from attnlib.results import load, tables
assert load.read("vit", "smoke", results_dir={str(trained)!r}).complete
tables.table3({str(trained)!r}, "smoke")
claims.ledger(claims.gather({str(trained)!r}, "smoke"))
bad = sorted(m for m in sys.modules if m.startswith(("attnlib.train", "attnlib.data", "attnlib.lab")))
print(bad)
assert not bad, bad
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
