"""Runs on disk (attnlib.util's writers, attnlib.lab.run): atomic writes, locks, run_or_load (load vs train, damaged and
stale results), the writable-folder check and the refusal of bad arguments before anything is written."""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch
from helpers import files, leftovers

from attnlib.lab.lock import RunLock, RunLocked
from attnlib.lab.run import ResultExists, run_or_load, train_run, trained_model
from attnlib.results.config import run_config, run_dir
from attnlib.results.load import DamagedResult, MissingResult, inspect_run, read_runs
from attnlib.results.store import sha256
from attnlib.results.tables import table3
from attnlib.util import atomic_write, check_writable, write_json, write_npz


# ----------------------------------------------------------------------------------------- atomic writes
def test_atomic_write_keeps_old_file_on_error(tmp_path):
    target = tmp_path / "metrics.json"
    write_json(target, {"a": 1})
    with pytest.raises(TypeError):
        write_json(target, {"a": object()})  # not serialisable: fails before the rename
    assert json.loads(target.read_text()) == {"a": 1}
    with pytest.raises(ValueError):
        write_npz(tmp_path / "x.npz", {"a": np.zeros(2), "b": object()})  # pickling refused
    with pytest.raises(OSError):
        with atomic_write(tmp_path / "y.bin") as f:
            f.write(b"partial")
            raise OSError("disk full")
    assert not (tmp_path / "x.npz").exists() and not (tmp_path / "y.bin").exists()
    assert leftovers(tmp_path) == []


def test_stray_temporary_files_are_removed(tmp_path):
    folder = run_dir(tmp_path, "resnet18", "smoke")
    (folder / "checkpoints").mkdir(parents=True)
    for stray in (folder / ".metrics.json.tmp99", folder / "checkpoints" / ".last.pt.tmp99"):
        stray.write_bytes(b"partial, from a killed writer")
    train_run("resnet18", "smoke", results_dir=tmp_path, progress=False)
    assert leftovers(folder) == [] and inspect_run(folder)[0] == "complete"


def test_crashed_run_writes_no_result(tmp_path):
    def crash(epoch, step, x, y):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        train_run("resnet18", "smoke", results_dir=tmp_path, progress=False, on_step=crash)
    folder = run_dir(tmp_path, "resnet18", "smoke")
    assert sorted(p.name for p in folder.iterdir()) == []  # no result files, no lock, no temporary files
    assert inspect_run(folder)[0] == "missing"


# ------------------------------------------------------------------------------------------------- locks
def test_second_run_is_refused_while_first_holds_the_lock(tmp_path):
    folder = run_dir(tmp_path, "resnet18", "smoke")
    with RunLock(folder):
        with pytest.raises(RunLocked, match=f"pid {os.getpid()}"):
            RunLock(folder).acquire()
        with pytest.raises(RunLocked, match="being trained by another process"):
            train_run("resnet18", "smoke", results_dir=tmp_path, progress=False)
        assert sorted(p.name for p in folder.iterdir()) == ["run.lock"]  # the refused run wrote nothing
    assert not (folder / "run.lock").exists()
    RunLock(folder).acquire().release()  # free again


def test_a_lock_on_a_run_lock_just_removed_is_refused(tmp_path, monkeypatch):
    """`queue` and `train` on one run: A releases (unlinks run.lock, then unlocks) while B has opened the old
    file and locks it after, and C creates and locks a new run.lock; B's lock guards nothing. The release is
    injected between B's open and its lock (B's claim runs on the old, removed file): B is refused."""
    folder = tmp_path / "run"
    claim = RunLock._claim

    def released_meanwhile(self, fd):
        if self is b:
            self.path.unlink()  # A's release, after B opened run.lock and before B's flock
            held.append(RunLock(folder).acquire())  # C takes a new run.lock, and keeps it: it trains
        claim(self, fd)

    held: list[RunLock] = []
    monkeypatch.setattr(RunLock, "_claim", released_meanwhile)
    b = RunLock(folder)
    with pytest.raises(RunLocked, match="has just released it; rerun"):
        b.acquire()
    assert not b._lock.is_locked and held[0]._lock.is_locked  # C alone holds the lock
    held[0].release()


def test_release_leaves_a_run_lock_it_does_not_hold(tmp_path):
    """A run.lock removed by hand while its run trains (a user clearing 'stale' locks), and a second run
    started on the folder: when the first finishes, its release must not remove the second's lock."""
    folder = tmp_path / "run"
    first = RunLock(folder).acquire()
    (folder / "run.lock").unlink()
    second = RunLock(folder).acquire()  # a new file: its lock is not the first's
    first.release()
    assert (folder / "run.lock").exists() and second._lock.is_locked
    with pytest.raises(RunLocked, match=f"pid {os.getpid()}"):
        RunLock(folder).acquire()  # the second run still guards its folder
    second.release()
    assert not (folder / "run.lock").exists()


def test_a_run_completed_by_another_process_meanwhile_is_not_trained_again(copy, monkeypatch, caplog):
    """`queue` and `train` on one run: one read it as not trained, the other finished it before the first took
    the lock. Under the lock the complete result is found and kept: not trained again, not rewritten."""
    from attnlib import train as trainer

    folder = run_dir(copy, "vit", "smoke")
    before = files(folder)
    monkeypatch.setattr(trainer, "fit", lambda *a, **k: pytest.fail("trained a complete run again"))
    with caplog.at_level(logging.WARNING, logger="attnlib"):
        result = train_run("vit", "smoke", results_dir=copy, progress=False)  # past run_or_load's read
    assert not result.trained and result.path == folder and files(folder) == before
    assert "completed by another process meanwhile" in caplog.text
    assert not (folder / "run.lock").exists()


def test_stale_lock_file_is_taken_over(tmp_path, caplog):
    (tmp_path / "run.lock").write_text(json.dumps({"pid": 2**22 + 12345, "host": "elsewhere"}))
    with caplog.at_level(logging.WARNING, logger="attnlib"):
        with RunLock(tmp_path) as lock:
            assert json.loads(lock.path.read_text())["pid"] == os.getpid()
    assert "taking over" in caplog.text and "pid 4206649" in caplog.text


@pytest.mark.slow
def test_lock_of_a_killed_process_does_not_block(tmp_path, caplog):
    code = (
        "import sys, time; from attnlib.lab.lock import RunLock; RunLock(sys.argv[1]).acquire(); "
        "print('locked', flush=True); time.sleep(600)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(RunLocked, match=f"pid {proc.pid}"):
            RunLock(tmp_path).acquire()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with caplog.at_level(logging.WARNING, logger="attnlib"):
        RunLock(tmp_path).acquire().release()
    assert f"pid {proc.pid}" in caplog.text


# ------------------------------------------------------------------------------------------ run_or_load
def test_result_folder_is_complete(trained):
    res = run_or_load("vit", "smoke", results_dir=trained)
    assert not res.trained
    assert {p.name for p in res.path.iterdir()} >= {
        "config.json",
        "metrics.json",
        "history.csv",
        "attention.npz",
    }
    m = res.metrics
    assert 0 <= m["test_accuracy"] <= 1 and m["params"] == sum(
        p.numel() for p in trained_model(res).parameters()
    )
    assert m["wall_time_ms"] > 0 and m["wall_time_reps"] == 3 and m["wall_time_device"]
    prov = m["provenance"]
    for key in (
        "dataset",
        "test_images",
        "preset",
        "seed",
        "epochs",
        "device",
        "torch",
        "git",
        "train_seconds",
    ):
        assert key in prov
    assert prov["test_images"] == 32 and prov["dataset"].startswith("synthetic")
    assert prov["threads"] == torch.get_num_threads()
    # "(1 thread)"; runs saved before wrote "(1 threads)"
    assert re.search(rf"\({prov['threads']} threads?\)$", prov["device"])
    assert list(res.history.columns)[:5] == ["epoch", "train_loss", "train_acc", "test_loss", "test_acc"]
    assert res.config["model"]["hierarchical"] is False and res.config["train"]["epochs"] == 1
    assert (
        not (res.path / "checkpoints" / "previous.pt").exists()
        and (res.path / "checkpoints" / "last.pt").exists()
    )


def test_run_or_load_loads_instead_of_retraining(copy):
    metrics = run_dir(copy, "vit", "smoke") / "metrics.json"
    before = metrics.stat().st_mtime_ns
    res = run_or_load("vit", "smoke", results_dir=copy)
    assert not res.trained and metrics.stat().st_mtime_ns == before


def test_other_configuration_is_kept_unless_replace(copy):
    """A complete result of another configuration (here: trained for 1 epoch, asked for 2) is never
    trained over silently: run_or_load and train_run raise ResultExists naming the settings that differ
    and write nothing; replace=True retrains it."""
    folder = run_dir(copy, "vit", "smoke")
    before = {p: p.stat().st_mtime_ns for p in folder.rglob("*")}
    for call in (run_or_load, train_run):
        with pytest.raises(ResultExists, match=r"train.epochs: 1 saved, 2 now\); it is kept .*replace=True"):
            call("vit", "smoke", results_dir=copy, epochs=2)
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*")} == before
    assert inspect_run(folder, expected=run_config("vit", "smoke"))[0] == "complete"
    res = run_or_load("vit", "smoke", results_dir=copy, epochs=2, replace=True)
    assert res.trained and len(res.history) == 2


def test_book_retrains_a_result_of_another_configuration(copy):
    """The book's documented rule (attnbook.runs.load_status): a chapter allowed to train retrains a result of an
    older configuration, so its parameters pass replace=True."""
    import attnbook as book

    params = book.check_params(preset="smoke", data=None, device="cpu", results_dir=copy, train_missing=True)
    assert params.run_kwargs()["replace"] is True


# --------------------------------------------------------------------------------- changed model defaults
def change_vit_default(monkeypatch, **metadata):
    """The vit family's config dataclass as it would be after a change of defaults: attn_dropout 0.1 -> 0.3
    (a field the registry does not set), or, with `metadata`, a new field `extra` (default True) so
    declared."""
    import dataclasses

    from attnlib.models import vit

    if metadata:
        field = ("extra", bool, dataclasses.field(default=True, metadata=metadata))
    else:
        field = ("attn_dropout", float, dataclasses.field(default=0.3))
    monkeypatch.setattr(
        vit, "ViTConfig", dataclasses.make_dataclass("ViTConfig", [field], bases=(vit.ViTConfig,))
    )


def old_style(folder) -> None:
    """Make `folder`'s config.json as runs saved it before it recorded the resolved model (checksum kept)."""
    config = json.loads((folder / "config.json").read_text())
    del config["model_resolved"]
    write_json(folder / "config.json", config)
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics["files"]["config.json"] = sha256(folder / "config.json")
    write_json(folder / "metrics.json", metrics)


def test_changed_model_default_makes_a_result_stale(copy, monkeypatch):
    """config.json records the resolved model (every field of the family's config dataclass) outside the
    fingerprint: a result trained before a default changed keeps its fingerprint but is stale, the detail
    names the field, and it is kept unless replaced; replacing it trains afresh (the end-of-training
    checkpoint of the old model is not resumed)."""
    folder = run_dir(copy, "vit", "smoke")
    config = json.loads((folder / "config.json").read_text())
    assert config["model_resolved"]["attn_dropout"] == 0.1 and config["model_resolved"]["layers"] == 2
    change_vit_default(monkeypatch)
    expected = run_config("vit", "smoke")
    assert expected["fingerprint"] == config["fingerprint"]  # the fingerprint does not see defaults
    message = (
        f"{folder} holds a result for another configuration (model_resolved.attn_dropout: 0.1 saved, 0.3 now: "
        "a model default changed since it was trained)"
    )
    assert inspect_run(folder, expected=expected) == ("stale", message)
    assert read_runs(["vit"], "smoke", results_dir=copy).status["vit"] == ("stale", message)
    with pytest.raises(MissingResult) as err:
        run_or_load("vit", "smoke", results_dir=copy, train_missing=False)
    assert err.value.status == "stale" and err.value.detail == message
    before = {p: p.stat().st_mtime_ns for p in folder.rglob("*")}
    for call in (run_or_load, train_run):
        with pytest.raises(ResultExists, match=r"attn_dropout: 0.1 saved, 0.3 now.*; it is kept"):
            call("vit", "smoke", results_dir=copy)
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*")} == before
    res = run_or_load("vit", "smoke", results_dir=copy, replace=True)
    assert res.trained and res.metrics["provenance"]["resumed_from"] is None
    prov = res.metrics["provenance"]  # every epoch's precision in words, agreeing with this machine's policy
    assert prov["precision"] == ("bf16" if prov["bf16"] else "float32")
    assert res.config["model_resolved"]["attn_dropout"] == 0.3
    assert inspect_run(folder, expected=run_config("vit", "smoke"))[0] == "complete"


def test_new_field_is_stale_unless_it_declares_the_network_before_it(copy, monkeypatch):
    """A field added to a config dataclass changes the network unless declared otherwise: a saved record
    without it differs ('-' saved), except when the field says which value reproduces the network it had
    before it existed (metadata "before")."""
    folder = run_dir(copy, "vit", "smoke")
    change_vit_default(monkeypatch, doc="a new switch")
    status, detail = inspect_run(folder, expected=run_config("vit", "smoke"))
    assert status == "stale" and "(model_resolved.extra: - saved, True now:" in detail
    change_vit_default(monkeypatch, before=True)
    assert inspect_run(folder, expected=run_config("vit", "smoke")) == ("complete", "")
    change_vit_default(monkeypatch, before=False)
    detail = inspect_run(folder, expected=run_config("vit", "smoke"))[1]
    assert "model_resolved.extra: False saved, True now" in detail


def test_result_saved_without_the_resolved_model_stays_current(copy, monkeypatch):
    """Runs saved before config.json recorded the resolved model cannot tell a changed default: they stay
    complete, and their fingerprint is what run_config computes (model_resolved is not hashed)."""
    import hashlib

    folder = run_dir(copy, "vit", "smoke")
    old_style(folder)
    config = json.loads((folder / "config.json").read_text())
    body = {k: v for k, v in config.items() if k != "fingerprint"}
    assert hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16] == config["fingerprint"]
    assert inspect_run(folder, expected=run_config("vit", "smoke")) == ("complete", "")
    change_vit_default(monkeypatch)
    assert run_config("vit", "smoke")["fingerprint"] == config["fingerprint"]
    assert inspect_run(folder, expected=run_config("vit", "smoke")) == ("complete", "")
    assert not run_or_load("vit", "smoke", results_dir=copy).trained


def test_stale_detail_lists_a_resolved_field_once(copy):
    """Another configuration in the registry (fingerprint differs): the detail names model.<field>, not
    model_resolved.<field> as well; a default changed at the same time is named as model_resolved."""
    folder = run_dir(copy, "vit", "smoke")
    config = json.loads((folder / "config.json").read_text())
    config["model"]["layers"], config["model_resolved"]["layers"] = 3, 3
    config["model_resolved"]["mlp"], config["model_resolved"]["dropout"] = 16, 0.5
    write_json(folder / "config.json", config)  # the detail is read after the checksums: keep them
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics["files"]["config.json"] = sha256(folder / "config.json")
    metrics["fingerprint"] = "0123456789abcdef"
    write_json(folder / "metrics.json", metrics)
    status, detail = inspect_run(folder, expected=run_config("vit", "smoke"))
    assert status == "stale" and detail.endswith(
        "(model.layers: 3 saved, 2 now; model_resolved.dropout: 0.5 saved, 0.0 now)"
    ), detail


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("test_accuracy", "abc", "test_accuracy is 'abc', not a number in [0, 1]"),
        ("test_accuracy", 1.5, "test_accuracy is 1.5, not a number in [0, 1]"),
        ("test_accuracy", float("nan"), "test_accuracy is nan, not a number in [0, 1]"),
        ("params", "23226", "params is '23226', not an integer in [0, 1e+10]"),
        ("params", True, "params is True, not an integer in [0, 1e+10]"),
        ("wall_time_ms", None, "wall_time_ms is None, not a number in [0, 1e+06]"),
        ("provenance", [], "provenance is [], not an object"),
        ("files", {"config.json": 1}, "files is {'config.json': 1}, not an object of file names"),
        ("wall_time_device", 3, "wall_time_device is 3, not a string"),
        ("provenance.epochs", "1", "provenance.epochs is '1', not an integer in [1, 100000]"),
        ("provenance.threads", 0, "provenance.threads is 0, not an integer in [1, 4096] or null"),
    ],
)
def test_hand_edited_metrics_are_damaged(copy, key, value, message):
    """metrics.json carries no checksum of itself: a value of the wrong type is reported as damaged (not
    counted as complete, not printed), so that no reader (tables, book, CLI) meets it."""
    folder = run_dir(copy, "vit", "smoke")
    metrics = json.loads((folder / "metrics.json").read_text())
    if key.startswith("provenance."):
        metrics["provenance"][key.split(".")[1]] = value
    else:
        metrics[key] = value
    (folder / "metrics.json").write_text(json.dumps(metrics))
    status, detail = inspect_run(folder)
    assert status == "damaged" and detail.startswith(f"{folder / 'metrics.json'}: {message}"), detail
    row = table3(copy, "smoke").set_index("experiment").loc["vit"]
    assert row["status"] == "damaged" and row[["accuracy", "params", "wall_time_ms"]].isna().all()
    with pytest.raises(DamagedResult):
        run_or_load("vit", "smoke", results_dir=copy, train_missing=False)


@pytest.mark.parametrize(
    "damage,said",
    [
        ("truncated", "Error"),
        ("another configuration", "(it belongs to another configuration)"),
        ("mid-epoch", "(step is 2, not an integer in [0, "),
        (
            "an earlier epoch",
            "(it is not the end of training (epoch 0, step 0; the run ended after epoch 1))",
        ),
    ],
)
def test_model_of_a_damaged_checkpoint(copy, damage, said):
    """trained_model on a truncated last.pt (or one of another run, or not of the end of training):
    DamagedResult naming the file and what is wrong, with the command that retrains it, not a raw error from
    the zip reader."""
    res = run_or_load("vit", "smoke", results_dir=copy)
    last = res.path / "checkpoints" / "last.pt"
    if damage == "truncated":
        last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])
    else:
        state = torch.load(last, weights_only=True)
        if damage == "another configuration":
            state["fingerprint"] = "0123456789abcdef"
        elif damage == "mid-epoch":
            state["step"] = 2
        else:  # a checkpoint of epoch 0 (no history row yet), the run trained 1 epoch
            state["epoch"], state["history"] = 0, []
        torch.save(state, last)
    with pytest.raises(DamagedResult) as err:
        trained_model(res)
    assert err.value.status == "damaged" and str(last) in str(err.value) and "\n" not in str(err.value)
    assert f"{last} is damaged (" in str(err.value) and said in err.value.detail
    assert "retrain with: python -m attnlib train vit --preset smoke" in str(err.value)


def test_model_is_built_from_the_resolved_fields_it_was_trained_with(copy):
    """trained_model builds the network from config.json's `model_resolved` (every field), not from
    the registry's overrides over today's defaults: with the overrides gone it still loads the trained
    weights; a recorded field the model no longer has is a stale result naming the field."""
    res = run_or_load("vit", "smoke", results_dir=copy)
    expected = {k: v.clone() for k, v in trained_model(res).state_dict().items()}
    res.config["model"] = {}  # as if the registry's overrides had changed: the record still rules
    assert all(torch.equal(v, expected[k]) for k, v in trained_model(res).state_dict().items())
    res.config["model_resolved"] = {**res.config["model_resolved"], "retired_field": 3}
    with pytest.raises(MissingResult) as err:
        trained_model(res)
    assert err.value.status == "stale" and "retired_field" in str(err.value)


def test_provenance_names_the_commit_training_started_from(tmp_path, monkeypatch):
    """provenance.git is the code the run trained with (read before training); when the tree changed
    before the result was written, provenance.git_at_write says to what."""
    from attnlib.lab import run as runs

    states = iter([{"commit": "a" * 40, "dirty": False}, {"commit": "b" * 40, "dirty": True}])
    monkeypatch.setattr(runs, "git_state", lambda: next(states))
    prov = run_or_load("vit", "smoke", results_dir=tmp_path).metrics["provenance"]
    assert prov["git"] == {"commit": "a" * 40, "dirty": False}
    assert prov["git_at_write"] == {"commit": "b" * 40, "dirty": True}


def test_write_on_a_full_disk_names_the_file_and_keeps_the_old_one(tmp_path, monkeypatch):
    """An atomic write that hits ENOSPC (its fsync fails so; a temporary file linked to /dev/full is no
    longer written through: test_store): an OSError naming the file meant, the old file intact, no
    temporary file left. The real full disk: test_cli's tmpfs cases."""
    target = tmp_path / "metrics.json"
    write_json(target, {"old": 1})

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("attnlib.util.os.fsync", full)
    with pytest.raises(OSError) as err:
        write_json(target, {"new": 2})
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(target)
    assert json.loads(target.read_text()) == {"old": 1} and sorted(os.listdir(tmp_path)) == ["metrics.json"]


def test_check_writable(tmp_path):
    (tmp_path / "file").write_text("x")
    check_writable(tmp_path / "new" / "vit" / "smoke")  # creatable: fine, and nothing created
    assert sorted(os.listdir(tmp_path)) == ["file"]
    with pytest.raises(NotADirectoryError) as err:
        check_writable(tmp_path / "file" / "vit" / "smoke")
    assert err.value.filename == str(tmp_path / "file") and "is a file, not a folder" in err.value.strerror
    if os.geteuid() != 0:  # root may write anywhere; the read-only file system is tested in test_cli
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        with pytest.raises(PermissionError, match="cannot write results here"):
            check_writable(locked / "vit")


def test_batch_larger_than_the_data_is_refused_before_anything_is_written(tmp_path):
    from attnlib.errors import ConfigError

    with pytest.raises(ConfigError, match=r"data: got 'synthetic:8:4'; allowed: at least 16 training images"):
        train_run("vit", "smoke", data="synthetic:8:4", results_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_missing_result_without_training(tmp_path, monkeypatch):
    with pytest.raises(MissingResult, match="python -m attnlib train resnet18 --preset smoke"):
        run_or_load("resnet18", "smoke", results_dir=tmp_path, train_missing=False)
    monkeypatch.setenv("ATTNLIB_TRAIN_MISSING", "0")  # what the book build sets
    with pytest.raises(MissingResult):
        run_or_load("resnet18", "smoke", results_dir=tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("damage", ["truncate", "garbage", "history"])
def test_damaged_result_is_reported_and_retrained(copy, damage, caplog):
    folder = run_dir(copy, "vit_ha", "smoke")
    if damage == "truncate":
        text = (folder / "metrics.json").read_text()
        (folder / "metrics.json").write_text(text[: len(text) // 2])
    elif damage == "garbage":
        (folder / "metrics.json").write_text('{"test_accuracy": 0.5}')
    else:
        (folder / "history.csv").write_text(
            "epoch,train_loss\n1,0.0\n"
        )  # no longer what metrics.json vouches for
    assert inspect_run(folder)[0] == "damaged"
    assert table3(copy, "smoke").set_index("experiment").loc["vit_ha", "status"] == "damaged"
    with pytest.raises(DamagedResult):
        run_or_load("vit_ha", "smoke", results_dir=copy, train_missing=False)
    with caplog.at_level(logging.WARNING, logger="attnlib"):
        res = run_or_load("vit_ha", "smoke", results_dir=copy)
    assert res.trained and "damaged" in caplog.text and inspect_run(folder)[0] == "complete"


def test_run_dir_per_seed(tmp_path):
    assert run_dir(tmp_path, "vit", "budget") == tmp_path / "vit" / "budget"
    assert run_dir(tmp_path, "vit", "budget", seed=2) == tmp_path / "vit" / "budget-seed2"


def test_bad_arguments_write_nothing(tmp_path):
    from attnlib.errors import ConfigError

    for kwargs in ({"seed": -1}, {"epochs": 0}, {"data": str(tmp_path / "nope")}):
        with pytest.raises(ConfigError):
            train_run("vit", "smoke", results_dir=tmp_path / "r", **kwargs)
    with pytest.raises(ConfigError, match="preset"):
        run_or_load("vit", "fast", results_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()


# --------------------------------------------------- reliability (issue 9): bad run arguments through the API
def test_bad_run_arguments_through_the_api_write_nothing(tmp_path):
    from attnlib.errors import ConfigError

    for kwargs in ({"epochs": -1}, {"epochs": 1.5}, {"epochs": "2"}):
        with pytest.raises(ConfigError, match="epochs: got .*; allowed: an integer >= 1"):
            run_or_load("vit", "smoke", results_dir=tmp_path / "r", **kwargs)
    with pytest.raises(ConfigError, match="experiment: got 'vit_huge'; allowed: resnet18"):
        run_or_load("vit_huge", "smoke", results_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_cpu_time_is_the_process_time_else_wall_time_times_threads(trained):
    """A run's CPU time (the budget accounting's unit) is the CPU time its process recorded, times its
    processes; for runs saved before that was recorded, its training wall time times its CPU threads: from
    provenance.threads, else from the device name runs saved before that field carry; none on a GPU."""
    from attnlib.results.tables import _cpu_seconds, collect

    assert _cpu_seconds({"train_seconds": 10.0, "threads": 2, "device": "AMD EPYC (1 threads)"}) == 20.0
    assert _cpu_seconds({"train_seconds": 10.0, "device": "AMD EPYC (1 threads)"}) == 10.0
    assert _cpu_seconds({"train_seconds": 1.0, "device": "Xeon (16 threads)", "threads": None}) == 16
    assert _cpu_seconds({"train_seconds": 10.0, "device": "NVIDIA H200", "threads": None}) is None
    assert _cpu_seconds({"train_seconds": 10.0, "device": "X (2 threads)", "world_size": 2}) == 40.0
    assert _cpu_seconds({"train_seconds": 10.0, "device": "NVIDIA H200", "world_size": 1}) is None
    recorded = {"train_seconds": 10.0, "threads": 2, "device": "X (2 threads)", "train_cpu_seconds": 12.5}
    assert _cpu_seconds(recorded) == 12.5  # what the process used, not wall time x threads (20)
    assert _cpu_seconds({**recorded, "world_size": 2}) == 25.0
    assert _cpu_seconds({**recorded, "train_cpu_seconds": None}) == 20.0  # resumed from an older checkpoint
    assert _cpu_seconds({**recorded, "threads": None, "device": "NVIDIA H200"}) is None
    row = collect(trained, "smoke", ["vit"]).iloc[0]
    cpu = json.loads((trained / "vit" / "smoke" / "metrics.json").read_text())["provenance"][
        "train_cpu_seconds"
    ]
    assert 0 < cpu and row["cpu_seconds"] == pytest.approx(cpu)
