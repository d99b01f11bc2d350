"""The one-off move of the former `converge` runs that trained every epoch to the `long` preset
(attnlib.migrate), on smoke-sized runs made to look like them, and the moved runs saved in results/."""

import dataclasses
import hashlib
import json
import os
from pathlib import Path

import pytest
import torch

from attnlib import experiments
from attnlib.lab.run import train_run
from attnlib.migrate import MigrationRefused, migrate_all, migrate_run
from attnlib.results.config import RESOLVED, run_config, run_dir
from attnlib.results.load import inspect_run, load_run
from attnlib.results.store import sha256
from attnlib.store import write_json

RESULTS = Path(__file__).resolve().parent.parent / "results"


@pytest.fixture
def tiny_long(monkeypatch):
    """`long` trains the smoke models for 2 epochs (LONG_EPOCHS = 2), logging measures every epoch."""
    smoke = experiments.PRESET_TABLE["smoke"]
    tiny = {
        k: dataclasses.replace(p, probe_images=4, train=p.train.replace(epochs=2)) for k, p in smoke.items()
    }
    monkeypatch.setitem(experiments.PRESET_TABLE, "long", tiny)
    monkeypatch.setitem(experiments.MODELS_OF, "long", "smoke")
    monkeypatch.setattr(experiments, "LONG_EPOCHS", 2)


def as_converge(root: Path, name: str, **train) -> str:
    """Turn the saved `long` run of `name` into what the former `converge` preset saved: its folder, preset,
    plateau settings (and `train` changes), fingerprint over them, checksums, checkpoint tag. -> old fingerprint"""
    src, dst = run_dir(root, name, "long"), run_dir(root, name, "converge")
    os.rename(src, dst)
    config = json.loads((dst / "config.json").read_text())
    config["preset"] = "converge"
    config["train"].update(plateau=0.005, plateau_lr=0.25, **train)
    hashed = {k: v for k, v in config.items() if k not in ("fingerprint", RESOLVED)}
    config["fingerprint"] = hashlib.sha256(json.dumps(hashed, sort_keys=True).encode()).hexdigest()[:16]
    write_json(dst / "config.json", config)
    metrics = json.loads((dst / "metrics.json").read_text())
    metrics["fingerprint"] = config["fingerprint"]
    metrics["provenance"]["preset"] = "converge"
    metrics["files"] = {f: sha256(dst / f) for f in metrics["files"]}
    write_json(dst / "metrics.json", metrics)
    state = torch.load(dst / "checkpoints" / "last.pt", weights_only=True)
    torch.save({**state, "fingerprint": config["fingerprint"]}, dst / "checkpoints" / "last.pt")
    assert inspect_run(dst)[0] == "complete"
    return config["fingerprint"]


def test_a_run_that_trained_every_epoch_moves_to_long(tiny_long, tmp_path):
    train_run("learned_9h", "long", results_dir=tmp_path, progress=False)
    old = as_converge(tmp_path, "learned_9h")
    src = run_dir(tmp_path, "learned_9h", "converge")
    kept = {f: (src / f).read_bytes() for f in ("history.csv", "attention.npz")}
    dest = migrate_run(src)
    assert dest == run_dir(tmp_path, "learned_9h", "long") and not src.exists()
    today = run_config("learned_9h", "long", data="synthetic:64:32")
    assert inspect_run(dest, expected=today) == ("complete", "")
    assert json.loads((dest / "config.json").read_text()) == json.loads(json.dumps(today))
    run = load_run(dest)
    assert run.metrics["fingerprint"] == today["fingerprint"] != old
    prov = run.metrics["provenance"]
    assert prov["preset"] == "long" and prov["epochs_trained"] == 2
    assert prov["migrated_from"]["preset"] == "converge" and prov["migrated_from"]["fingerprint"] == old
    assert prov["migrated_from"]["why"].startswith("the plateau rule never stopped it: 2 epochs trained")
    assert all((dest / f).read_bytes() == b for f, b in kept.items())  # the record itself is unchanged
    assert sum(p.numel() for p in run.model().parameters()) == run.metrics["params"]  # checkpoint retagged
    assert not (dest / "run.lock").exists()


def test_runs_that_are_not_the_fixed_protocol_are_refused(tiny_long, tmp_path, monkeypatch):
    for name in ("learned_9h", "vit"):
        train_run(name, "long", results_dir=tmp_path, progress=False)
    as_converge(tmp_path, "learned_9h")
    as_converge(tmp_path, "vit", lr=0.01234)  # another protocol than today's long one
    stopped = run_dir(tmp_path, "learned_9h", "converge")
    monkeypatch.setattr(experiments, "LONG_EPOCHS", 3)  # the run stopped before the cap: retrain it
    with pytest.raises(MigrationRefused, match="trained 2 epochs .* not the 3 of the long preset"):
        migrate_run(stopped)
    assert inspect_run(stopped)[0] == "complete"  # nothing changed
    monkeypatch.setattr(experiments, "LONG_EPOCHS", 2)
    with pytest.raises(MigrationRefused, match="not today's long one .*train"):
        migrate_run(run_dir(tmp_path, "vit", "converge"))
    run_dir(tmp_path, "learned_9h", "long").mkdir()
    with pytest.raises(MigrationRefused, match="exists"):
        migrate_run(stopped)
    run_dir(tmp_path, "learned_9h", "long").rmdir()
    moved, refused = migrate_all(tmp_path)
    assert moved == [run_dir(tmp_path, "learned_9h", "long")] and len(refused) == 1 and "vit" in refused[0]
    with pytest.raises(MigrationRefused, match="not a complete result"):
        migrate_run(tmp_path / "nothing" / "converge")


def test_the_moved_runs_in_results_trained_every_epoch():
    """The runs moved from `converge` (results/*/long*): each trained all LONG_EPOCHS epochs and is intact."""
    moved = [
        p.parent
        for p in RESULTS.glob("*/long*/metrics.json")
        if "migrated_from" in json.loads(p.read_text())["provenance"]
    ]
    for path in moved:
        metrics = json.loads((path / "metrics.json").read_text())
        assert metrics["provenance"]["epochs_trained"] == experiments.LONG_EPOCHS == 60, path
        assert metrics["provenance"]["migrated_from"]["preset"] == "converge"
        assert inspect_run(path)[0] == "complete", path
        assert json.loads((path / "config.json").read_text())["preset"] == "long"
    assert not [p for p in RESULTS.glob("*/converge*") if p.parent.name != "resnet18"]
