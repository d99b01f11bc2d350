"""Reliability (issue 9): interrupted runs, damaged files, bad parameters, concurrent runs.

Every test works in its own tmp_path results folder, on synthetic data at the smoke preset, with one CPU
thread. The subprocess tests run the real command line (`python -m attnlib train ...`) and kill or stop it
with real signals; the kill points are random (the seed is printed in every failure message; set
ATTNLIB_RELIABILITY_SEED to replay one).
"""

from __future__ import annotations

import logging
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from attnlib import book
from attnlib.book import display
from attnlib.runs import (
    DamagedResult,
    MissingResult,
    inspect_run,
    load_run,
    run_config,
    run_dir,
    run_or_load,
    train_run,
)
from attnlib.tables import collect, table1, table3
from attnlib.train import CHECKPOINT_SECONDS_ENV

ROOT = Path(__file__).resolve().parent.parent
TIMING = ["seconds", "images_per_s"]  # history columns that legitimately differ between runs


def files(folder: Path) -> dict[str, int]:
    """Every file under `folder` with its modification time (to show that nothing was written)."""
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob("*") if ".tmp" in p.name]


def history(result) -> pd.DataFrame:
    return result.history.drop(columns=TIMING)


def assert_intact(folder: Path, config: dict) -> None:
    """A complete result of `config`: checksums match, no lock, no temporary file, last.pt readable."""
    assert inspect_run(folder, expected=config) == ("complete", "")
    assert not (folder / "run.lock").exists() and leftovers(folder) == []
    state = torch.load(folder / "checkpoints" / "last.pt", weights_only=True)
    assert state["epoch"] == config["train"]["epochs"] and state["step"] == 0
    assert not (folder / "checkpoints" / "previous.pt").exists()


# ------------------------------------------------------------------------------------ 1. interruption
SEED = int(os.environ.get("ATTNLIB_RELIABILITY_SEED", time.time_ns() % 2**31))
KILLED = dict(experiment="quadratic_iso_9h", data="synthetic:256:64", epochs=8)  # 16 steps, ~0.2 s/epoch
EPOCH_LINE = re.compile(r"epoch (\d+)/\d+: train loss")


def _start_training(results: Path, log: Path, extra=(), checkpoint_seconds: float = 3600) -> subprocess.Popen:
    """The CLI in a child; end-of-epoch checkpoints only unless `checkpoint_seconds` is short."""
    command = [sys.executable, "-m", "attnlib", "train", KILLED["experiment"], "--preset", "smoke"]
    command += ["--data", KILLED["data"], "--epochs", str(KILLED["epochs"]), "--results-dir", str(results)]
    command += ["--threads", "1", "--no-progress", *extra]
    env = {**os.environ, CHECKPOINT_SECONDS_ENV: str(checkpoint_seconds)}
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log.open("w"), env=env)


def _checkpoint_epoch(folder: Path) -> int:
    """Epoch of last.pt (0 when no checkpoint was saved yet); it must always be readable."""
    last = folder / "checkpoints" / "last.pt"
    if not last.exists():
        assert not (folder / "checkpoints" / "previous.pt").exists(), "previous.pt without last.pt"
        return 0
    state = torch.load(last, weights_only=True)
    assert state["step"] == 0  # SIGKILL leaves no mid-epoch checkpoint (only SIGINT / SIGTERM do)
    return state["epoch"]


def _epochs_logged(log: Path) -> list[int]:
    return [int(m) for m in EPOCH_LINE.findall(log.read_text())]


def _wait_for_epoch(proc, log: Path, after: int, timeout: float = 120) -> int:
    """Wait until the run has logged an epoch > `after`; return the newest epoch logged."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        logged = _epochs_logged(log)
        if logged and logged[-1] > after:
            return logged[-1]
        assert proc.poll() is None, f"the run ended early (exit {proc.returncode}): {log.read_text()}"
        time.sleep(0.01)
    raise AssertionError(f"no epoch > {after} logged within {timeout} s: {log.read_text()}")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The same run trained in one go, in this process (the reference for the interrupted ones)."""
    root = tmp_path_factory.mktemp("uninterrupted")
    return train_run(
        KILLED["experiment"], "smoke", data=KILLED["data"], epochs=KILLED["epochs"], results_dir=root
    )


@pytest.mark.slow
def test_sigkill_twice_at_random_points_then_resume(tmp_path, uninterrupted, caplog, cli, capsys):
    """`python -m attnlib train` killed by SIGKILL at two random points (after 1 or 2 more epochs, a random
    time into the next one: mid-step, mid-evaluation or mid-checkpoint) loses at most the epoch it was in;
    a third run takes over the dead run's lock, resumes and ends with the uninterrupted run's history,
    weights and metrics, and an intact result folder."""
    rng = random.Random(SEED)
    why = f"(ATTNLIB_RELIABILITY_SEED={SEED})"
    epoch_seconds = float(np.median(uninterrupted.history["seconds"]))  # on this machine, now
    results = tmp_path / "results"
    folder = run_dir(results, KILLED["experiment"], "smoke")
    saved = 0  # epoch of the newest checkpoint
    for attempt in (1, 2):
        log = tmp_path / f"run{attempt}.log"
        proc = _start_training(results, log)
        try:
            newest = _wait_for_epoch(proc, log, after=saved + rng.randint(0, 1))
            time.sleep(rng.uniform(0.0, 1.0) * epoch_seconds)  # anywhere in the next epoch
            assert proc.poll() is None, f"run {attempt} finished before it could be killed {why}"
            proc.send_signal(signal.SIGKILL)
            assert proc.wait() == -signal.SIGKILL
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        text = log.read_text()
        if attempt == 2:  # the second run took over the first one's lock and resumed from its checkpoint
            assert "taking over the lock of a run that no longer runs" in text, why
            assert (f"resuming from last.pt (epoch {saved}" in text) == (saved > 0), why
        logged = max(_epochs_logged(log))
        assert logged >= newest
        epoch = _checkpoint_epoch(folder)
        # the epoch being trained or evaluated when the kill came is lost, nothing before it
        assert epoch in (logged - 1, logged) and epoch >= saved, (epoch, logged, why)
        why += f"; kill {attempt}: {logged} epochs logged, checkpoint at epoch {epoch}"
        if os.environ.get("ATTNLIB_RELIABILITY_VERBOSE"):
            with capsys.disabled():
                print(why)
        saved = epoch
        assert inspect_run(folder)[0] == "missing", why  # no metrics.json: never counted as complete
        assert (folder / "run.lock").exists()  # left behind by the killed run
        assert saved < KILLED["epochs"], why
    with caplog.at_level(logging.INFO, logger="attnlib"):
        code, out, err = cli(
            ["train", KILLED["experiment"], "--preset", "smoke", "--data", KILLED["data"]]
            + ["--epochs", str(KILLED["epochs"]), "--results-dir", str(results), "--no-progress"]
        )
    assert code == 0, err
    assert "taking over the lock" in caplog.text, why
    assert (f"resuming from last.pt (epoch {saved}" in caplog.text) == (saved > 0), why
    config = run_config(KILLED["experiment"], "smoke", data=KILLED["data"], epochs=KILLED["epochs"])
    assert_intact(folder, config)
    result = load_run(folder, config["fingerprint"])
    resumed = result.metrics["provenance"]["resumed_from"]
    assert resumed.startswith(f"last.pt (epoch {saved}") if saved else resumed is None, why
    pd.testing.assert_frame_equal(history(result), history(uninterrupted), check_exact=True)
    assert result.metrics["test_accuracy"] == uninterrupted.metrics["test_accuracy"]
    for name in ("centers.npz", "attention.npz"):  # the quadratic log survived both kills too
        with np.load(folder / name) as a, np.load(uninterrupted.path / name) as b:
            assert a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files), name
    ours = torch.load(folder / "checkpoints" / "last.pt", weights_only=True)["model"]
    ref = torch.load(uninterrupted.path / "checkpoints" / "last.pt", weights_only=True)["model"]
    assert all(torch.equal(ours[k], ref[k]) for k in ref)


# ------------------------------------------------------------------------------ 4. concurrent runs
@pytest.mark.slow
def test_second_concurrent_run_is_refused_while_the_first_finishes(tmp_path, cli):
    """A real training process holds the run (stopped with SIGSTOP mid-training so that the timing is
    certain); a second run of the same experiment and preset is refused with one line naming the first
    one's pid, writes nothing, and the first then finishes with an intact result."""
    results = tmp_path / "results"
    folder = run_dir(results, KILLED["experiment"], "smoke")
    log = tmp_path / "first.log"
    first = _start_training(results, log)
    try:
        _wait_for_epoch(first, log, after=0)
        first.send_signal(signal.SIGSTOP)
        before = files(folder)
        code, out, err = cli(
            ["train", KILLED["experiment"], "--preset", "smoke", "--data", KILLED["data"]]
            + ["--epochs", str(KILLED["epochs"]), "--results-dir", str(results)]
        )
        assert code == 3 and err.count("\n") == 1 and "Traceback" not in err, err
        assert err.startswith("python -m attnlib: refused: ") and "being trained by another process" in err
        assert f"pid {first.pid}" in err
        assert files(folder) == before  # the refused run wrote nothing
        first.send_signal(signal.SIGCONT)
        assert first.wait(timeout=120) == 0, log.read_text()
    finally:
        if first.poll() is None:
            first.send_signal(signal.SIGCONT)
            first.kill()
            first.wait()
    config = run_config(KILLED["experiment"], "smoke", data=KILLED["data"], epochs=KILLED["epochs"])
    assert_intact(folder, config)
    assert len(load_run(folder, config["fingerprint"]).history) == KILLED["epochs"]
    assert "taking over" not in log.read_text()


# ----------------------------------------------------------------------------- 2. damaged inputs
def _crash_in_epoch(n: int):
    def crash(epoch, step, x, y):
        if epoch == n:
            raise RuntimeError("simulated crash")

    return crash


@pytest.mark.parametrize("damaged", [("last.pt",), ("last.pt", "previous.pt")])
def test_truncated_checkpoint_falls_back_or_restarts_saying_so(tmp_path, damaged, caplog):
    """A run that crashed in epoch 3 left last.pt (epoch 2) and previous.pt (epoch 1). With last.pt
    truncated the rerun resumes from previous.pt; with both truncated it trains from scratch; either way it
    says so and ends with the uninterrupted history."""
    ref = train_run("resnet18", "smoke", epochs=3, results_dir=tmp_path / "ref")
    with pytest.raises(RuntimeError, match="simulated"):
        train_run("resnet18", "smoke", epochs=3, results_dir=tmp_path, on_step=_crash_in_epoch(2))
    checkpoints = run_dir(tmp_path, "resnet18", "smoke") / "checkpoints"
    for name in damaged:
        raw = (checkpoints / name).read_bytes()
        (checkpoints / name).write_bytes(raw[: len(raw) // 3])  # as by a full disk
    with caplog.at_level(logging.INFO, logger="attnlib"):
        result = train_run("resnet18", "smoke", epochs=3, results_dir=tmp_path)
    assert "checkpoint" in caplog.text and "last.pt is damaged" in caplog.text
    resumed = result.metrics["provenance"]["resumed_from"]
    if len(damaged) == 1:
        assert "falling back to the previous checkpoint previous.pt (epoch 1)" in caplog.text
        assert resumed.startswith("previous.pt (epoch 1")
    else:
        assert "previous.pt is damaged" in caplog.text and "training from scratch" in caplog.text
        assert resumed is None
    pd.testing.assert_frame_equal(history(result), history(ref), check_exact=True)
    assert_intact(result.path, result.config)


def test_checkpoint_rotation_always_leaves_a_last_checkpoint(tmp_path, monkeypatch):
    """Killed between keeping the old last.pt as previous.pt and renaming the new one onto last.pt, the
    folder still holds a complete last.pt (the old one): nothing to fall back from."""
    from attnlib.train import Checkpoints

    def state(epoch):
        return {"model": {}, "optimizer": {}, "scheduler": {}, "epoch": epoch, "step": 0, "history": []}

    checkpoints = Checkpoints(tmp_path, "f")
    checkpoints.save(state(1))
    replace = os.replace

    def killed_before_the_last_rename(src, dst):
        if Path(dst).name == "last.pt":
            raise KeyboardInterrupt("killed")
        replace(src, dst)

    monkeypatch.setattr(os, "replace", killed_before_the_last_rename)
    with pytest.raises(KeyboardInterrupt):
        checkpoints.save(state(2))
    monkeypatch.undo()
    loaded, where = checkpoints.load()
    assert loaded["epoch"] == 1 and where == "last.pt (epoch 1)"
    assert leftovers(tmp_path) == []
    checkpoints.save(state(2))
    assert checkpoints.load()[0]["epoch"] == 2
    assert torch.load(checkpoints.previous, weights_only=True)["epoch"] == 1


@pytest.fixture
def damaged(trained, tmp_path):
    """A copy where vit_ha's metrics.json is cut in half and vit holds a result of another configuration
    (trained for 2 epochs; the smoke preset says 1)."""
    root = tmp_path / "results"
    shutil.copytree(trained, root)
    metrics = run_dir(root, "vit_ha", "smoke") / "metrics.json"
    metrics.write_text(metrics.read_text()[:200])
    shutil.rmtree(run_dir(root, "vit", "smoke"))
    train_run("vit", "smoke", epochs=2, results_dir=root)
    return root


def test_damaged_and_stale_results_in_tables(damaged, cli):
    """collect / table3 / `python -m attnlib table3`: a damaged metrics.json and a result of another
    configuration are reported as such, with no numbers, never as current results."""
    df = table3(damaged, "smoke").set_index("experiment")
    assert df.loc["vit_ha", "status"] == "damaged" and "metrics.json" in df.loc["vit_ha", "detail"]
    assert df.loc["vit", "status"] == "stale" and "train.epochs: 2 saved, 1 now" in df.loc["vit", "detail"]
    assert df.loc[["vit", "vit_ha"], ["accuracy", "params", "wall_time_ms"]].isna().all().all()
    assert (df.drop(index=["vit", "vit_ha"])["status"] == "missing").all()
    assert collect(damaged, "smoke", ["vit"], data="synthetic:64:32").loc[0, "status"] == "stale"
    assert set(table1(damaged, "smoke")["status"]) == {"missing"}
    # the stale result is still what it was: complete for its own configuration
    assert inspect_run(run_dir(damaged, "vit", "smoke"), expected=run_config("vit", "smoke", epochs=2))[
        0
    ] == ("complete")
    for command in ("table3", "table1"):
        code, out, err = cli([command, "--results-dir", str(damaged), "--preset", "smoke"])
        assert code == 0 and err == "" and "Traceback" not in out
    code, out, err = cli(["table3", "--results-dir", str(damaged), "--preset", "smoke"])
    rows = {line.split()[-1]: line for line in out.splitlines() if line.split()[-1:] in (["vit"], ["vit_ha"])}
    assert " damaged " in rows["vit_ha"] and " stale " in rows["vit"]
    assert "- vit_ha: damaged: " in out and "metrics.json" in out
    assert "- vit: stale: " in out and "train.epochs: 2 saved, 1 now" in out


def test_damaged_and_stale_results_in_the_book(damaged, monkeypatch):
    """The book's tables mark a damaged or stale result as such (not a crash, not its numbers, not "not
    yet trained") when it may not train; with training allowed it retrains both."""
    monkeypatch.delenv(book.TRAIN_MISSING_ENV, raising=False)
    names = ["vit", "vit_ha", "resnet18"]
    params = book.check_params(
        preset="smoke", data=None, device="cpu", results_dir=damaged, train_missing=False
    )
    runs = book.load_all(names, params)
    assert all(runs[n] is None for n in names)
    assert runs.status["vit_ha"][0] == "damaged" and runs.status["vit"][0] == "stale"
    frame = book.results_frame(runs).set_index("experiment")
    assert list(frame["status"]) == ["stale", "damaged", "missing"]
    assert frame.loc[["vit", "vit_ha"], ["accuracy", "params"]].isna().all().all()
    table = book.results_table(frame.reset_index(), "smoke", pairs=True)
    cells = table.set_index(table["model"] + "/" + table["variant"])
    assert cells.loc["ViT/HA", "accuracy (smoke)"] == book.NOT_USED["damaged"]
    assert cells.loc["ViT/normal", "params (smoke)"] == book.NOT_USED["stale"]
    assert cells.loc["ResNet18/normal", "wall time"] == book.MISSING
    prose = book.provenance_markdown(frame.reset_index())
    assert "`vit_ha` is damaged" in prose and "`vit` was trained with another configuration" in prose
    assert "train.epochs: 2 saved, 1 now" in prose
    notes = []
    monkeypatch.setattr(display, "note", lambda text, kind="note": notes.append(text))
    book.note_missing("Table 3", "smoke", names, runs.status)
    assert "`vit` (other configuration (not used)), `vit_ha` (damaged (not used)), `resnet18`" in notes[0]
    with pytest.raises(DamagedResult) as err:  # what book.load caught: status and detail for the table
        run_or_load("vit_ha", **params.run_kwargs())
    assert err.value.status == "damaged" and "metrics.json" in err.value.detail
    with pytest.raises(MissingResult) as err:
        run_or_load("vit", **params.run_kwargs())
    assert err.value.status == "stale"
    # allowed to train: both are retrained and become current results
    retrain = book.check_params(
        preset="smoke", data=None, device="cpu", results_dir=damaged, train_missing=True
    )
    again = book.load_all(["vit", "vit_ha"], retrain)
    assert all(again[n] is not None and again[n].trained for n in ("vit", "vit_ha"))
    assert set(table3(damaged, "smoke").set_index("experiment").loc[["vit", "vit_ha"], "status"]) == {
        "complete"
    }


def test_damaged_result_is_retrained_by_the_cli(damaged, cli, caplog):
    with caplog.at_level(logging.WARNING, logger="attnlib"):
        code, out, err = cli(["train", "vit_ha", "--preset", "smoke", "--results-dir", str(damaged)])
    assert code == 0 and "test accuracy" in out and "already complete" not in out
    assert "is damaged" in caplog.text and "retraining it" in caplog.text
    folder = run_dir(damaged, "vit_ha", "smoke")
    assert_intact(folder, run_config("vit_ha", "smoke"))


def _image_folder(root: Path) -> Path:
    """A tiny CIFAR-10 ImageFolder: train/<class>/0.png and test/<class>/0.png for the ten classes."""
    from attnlib.data import CLASSES

    pixels = np.zeros((32, 32, 3), dtype=np.uint8)
    for split in ("train", "test"):
        for name in CLASSES:
            (root / split / name).mkdir(parents=True)
            Image.fromarray(pixels).save(root / split / name / "0.png")
    return root


@pytest.mark.parametrize("fault", ["non-image file", "missing class"])
def test_bad_image_folder_through_the_cli(tmp_path, fault, cli, monkeypatch):
    """`train --data FOLDER` with a non-image file or a missing class: one line naming the file or the
    class, exit 2, no results folder and no cache written."""
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path / "cache"))
    data = _image_folder(tmp_path / "cifar")
    if fault == "non-image file":
        (data / "train" / "cat" / "notes.txt").write_text("not an image")
        named = "notes.txt"
    else:
        shutil.rmtree(data / "test" / "dog")
        named = "dog"
    results = tmp_path / "results"
    code, out, err = cli(
        ["train", "resnet18", "--preset", "smoke", "--data", str(data), "--results-dir", str(results)]
    )
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("python -m attnlib: error: data: ") and named in err
    assert not results.exists() and not list((tmp_path / "cache").glob("*.pt"))


# --------------------------------------------------------------------------- 3. bad parameters (CLI)
@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        # heads that the encoding does not come with: the experiment names fix encoding and heads
        (["train", "quadratic_iso_16h"], "argument EXPERIMENT: got 'quadratic_iso_16h'; allowed: resnet18, "),
        (["train", "learned_7h"], "argument EXPERIMENT: got 'learned_7h'; allowed: resnet18, "),
        (
            ["train", "vit", "--preset", "tiny"],
            "argument --preset: got 'tiny'; allowed: paper, budget, smoke",
        ),
        (["train", "vit", "--epochs", "0"], "argument --epochs: got '0'; allowed: an integer >= 1"),
        (["train", "vit", "--epochs", "-3"], "argument --epochs: got '-3'; allowed: an integer >= 1"),
        (["train", "vit", "--epochs", "1.5"], "argument --epochs: got '1.5'; allowed: an integer >= 1"),
        (["train", "vit", "--data", "missing/folder"], "argument --data: got 'missing/folder', which is not"),
        (["table3", "--preset", "tiny"], "argument --preset: got 'tiny'; allowed: paper, budget, smoke"),
    ],
)
def test_bad_parameter_through_the_cli(argv, expected, tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results"
    code, out, err = cli([*argv, "--results-dir", str(results)])
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("python -m attnlib: error: ") and expected in err, err
    assert not any(tmp_path.iterdir())  # nothing written, not even the results folder


@pytest.mark.parametrize(
    ("counts", "message"),
    [({"steps": -3}, "steps: got -3; allowed: an integer >= 1"), ({"steps": 2.5}, "steps: got 2.5; allowed")],
)
def test_bad_count_parameter_of_a_chapter(counts, message):
    """Negative or non-integer step counts of a chapter (01_theory's `steps`); papermill: tests/test_book.py."""
    with pytest.raises(book.ParameterError, match=re.escape(message)):
        book.check_params(counts=counts)


def test_bad_run_arguments_through_the_api_write_nothing(tmp_path):
    from attnlib.errors import ConfigError

    for kwargs in ({"epochs": -1}, {"epochs": 1.5}, {"epochs": "2"}):
        with pytest.raises(ConfigError, match="epochs: got .*; allowed: an integer >= 1"):
            run_or_load("vit", "smoke", results_dir=tmp_path / "r", **kwargs)
    with pytest.raises(ConfigError, match="experiment: got 'vit_huge'; allowed: resnet18"):
        run_or_load("vit_huge", "smoke", results_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()


# ------------------------------------------------------------------- 5. nothing overwritten, nothing leaked
def test_complete_result_of_another_configuration_is_kept_by_the_cli(trained, tmp_path, cli):
    """`train vit --epochs 2` over a complete 1-epoch result: refused with one line that names the
    settings and --force, nothing touched (weights included); with --force it is replaced."""
    root = tmp_path / "results"
    shutil.copytree(trained, root)
    folder = run_dir(root, "vit", "smoke")
    before = files(folder)
    argv = ["train", "vit", "--preset", "smoke", "--epochs", "2", "--results-dir", str(root), "--no-progress"]
    code, out, err = cli(argv)
    assert code == 3 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"python -m attnlib: refused: {folder} holds a result for another configuration")
    assert "(train.epochs: 1 saved, 2 now); it is kept: rerun with --force to replace it" in err
    assert files(folder) == before
    code, out, err = cli([*argv, "--force"])
    assert code == 0 and "test accuracy" in out, err
    assert_intact(folder, run_config("vit", "smoke", epochs=2))


def test_hand_edited_metrics_through_the_cli(trained, tmp_path, cli):
    """`"test_accuracy": "abc"`: table3 reports vit as damaged (never prints abc), and `train` retrains
    it as any damaged result, without a traceback."""
    root = tmp_path / "results"
    shutil.copytree(trained, root)
    metrics = run_dir(root, "vit", "smoke") / "metrics.json"
    metrics.write_text(re.sub(r'"test_accuracy": [^,]+', '"test_accuracy": "abc"', metrics.read_text()))
    code, out, err = cli(["table3", "--results-dir", str(root), "--preset", "smoke"])
    assert code == 0 and err == ""
    assert "- vit: damaged: " in out and "test_accuracy is 'abc', not a number in [0, 1]" in out
    assert " abc " not in out.replace("'abc'", "")
    code, out, err = cli(["train", "vit", "--preset", "smoke", "--results-dir", str(root), "--no-progress"])
    assert code == 0 and "Traceback" not in err and "test accuracy" in out
    assert_intact(metrics.parent, run_config("vit", "smoke"))


def test_results_dir_under_a_regular_file(tmp_path, cli, monkeypatch):
    """--results-dir below a regular file: one line naming the file and the reason, exit 5, checked before
    the data is loaded (no data cache written) and nothing written."""
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path / "cache"))
    data = _image_folder(tmp_path / "cifar")
    (tmp_path / "notes").write_text("a file")
    results = tmp_path / "notes" / "results"
    code, out, err = cli(
        ["train", "resnet18", "--preset", "smoke", "--data", str(data), "--results-dir", str(results)]
    )
    assert code == 5 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"python -m attnlib: error: {tmp_path / 'notes'}: is a file, not a folder")
    assert not (tmp_path / "cache").exists()


def _cli_in_namespace(mount_namespace, mount: str, argv: list[str]):
    """`python -m attnlib ARGV` after the bash commands `mount` in a private mount namespace."""
    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "attnlib", *argv])
    return mount_namespace(
        f"{mount}; cd {shlex.quote(str(ROOT))}; set +e; {command}; echo EXIT=$?; find {argv[-1]} -name '*.tmp*' 2>/dev/null"
    )


def test_read_only_results_dir(tmp_path, mount_namespace):
    """A results folder on a read-only file system: one line naming it and the reason, exit 5."""
    mnt = tmp_path / "ro"
    mnt.mkdir()
    out = _cli_in_namespace(
        mount_namespace,
        f"mount -t tmpfs -o size=1m,ro tmpfs {mnt}",
        ["train", "vit", "--preset", "smoke", "--no-progress", "--results-dir", str(mnt / "results")],
    )
    assert "EXIT=5" in out.stdout, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert lines == [
        f"python -m attnlib: error: {mnt}: Read-only file system: cannot write results here "
        f"(the results go to {mnt / 'results' / 'vit' / 'smoke'})"
    ], out.stderr


def test_results_dir_that_fills_up(tmp_path, mount_namespace):
    """A results folder on a 32 kB tmpfs: the first checkpoint does not fit. One line naming last.pt and
    'No space left on device', exit 5, no temporary file left behind."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    out = _cli_in_namespace(
        mount_namespace,
        f"mount -t tmpfs -o size=32k tmpfs {mnt}",
        ["train", "vit", "--preset", "smoke", "--no-progress", "--results-dir", str(mnt)],
    )
    assert "EXIT=5" in out.stdout, out.stdout + out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("python -m attnlib")]
    last = run_dir(mnt, "vit", "smoke") / "checkpoints" / "last.pt"
    assert errors == [f"python -m attnlib: error: {last}: No space left on device"], out.stderr
    assert "Traceback" not in out.stderr
    assert out.stdout.split("EXIT=5")[1].strip() == ""  # find: no temporary file


@pytest.mark.parametrize("command", ["table1", "table3"])
@pytest.mark.parametrize("what", ["missing", "file"])
def test_table_of_a_results_dir_that_does_not_exist(tmp_path, cli, command, what):
    path = tmp_path / "nowhere"
    if what == "file":
        path.write_text("x")
    code, out, err = cli([command, "--results-dir", str(path), "--preset", "smoke"])
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert f"--results-dir: got '{path}'; allowed: a folder of saved results ({path} does not exist" in err


def test_batch_larger_than_the_data_through_the_cli(tmp_path, cli):
    results = tmp_path / "results"
    code, out, err = cli(
        ["train", "vit", "--preset", "smoke", "--data", "synthetic:8:4", "--results-dir", str(results)]
    )
    assert code == 2 and err.count("\n") == 1 and "at least 16 training images" in err and "has 8" in err
    assert not results.exists()
