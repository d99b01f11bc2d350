"""`python -m attnlib`: help, list, train, tables; bad input gives one line, a non-zero exit, no files.

Its reliability tests (issue 9): interrupted runs, damaged results, bad parameters, concurrent runs, nothing
overwritten or leaked. Every one works in its own tmp_path results folder, on synthetic data at the smoke
preset, with one CPU thread. The subprocess tests run the real command line (`python -m attnlib train ...`)
and kill or stop it with real signals; the kill points are random (the seed is printed in every failure
message; set ATTNLIB_RELIABILITY_SEED to replay one).
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
from helpers import assert_intact, files, history, image_folder

from attnlib.experiments import PRESETS, names
from attnlib.lab.run import train_run
from attnlib.results.config import run_config, run_dir
from attnlib.results.load import inspect_run, load_run
from attnlib.train import CHECKPOINT_SECONDS_ENV

ROOT = Path(__file__).resolve().parent.parent


def test_help_lists_experiments_and_presets(cli):
    for argv in (["--help"], ["train", "--help"]):
        code, out, _ = cli(argv)
        assert code == 0
        assert all(n in out for n in names(variants=True)) and all(p in out for p in PRESETS)


def test_list_budget_prints_the_grid_total(cli):
    code, out, _ = cli(["list", "--preset", "budget"])
    assert code == 0
    assert f"estimated total for the grid ({len(names())} runs, variants not counted):" in out
    assert "unmeasured" not in out and "4x4 space-to-depth" in out  # reasons are shown
    assert all(n in out for n in names(variants=True))


@pytest.mark.parametrize(
    "argv,parameter",
    [
        (["train", "resnet50", "--preset", "smoke"], "resnet18, resnet18_narrow, resnet18_narrow_s2d, quadratic_iso_9h"),
        (["train", "vit", "--preset", "fast"], "paper, budget, smoke"),
        (["train", "vit", "--preset", "smoke", "--epochs", "-1"], "an integer >= 1"),
        (
            ["train", "vit", "--preset", "smoke", "--epochs", "2.5"],
            "argument --epochs: invalid int value: '2.5'",
        ),
        (["train", "vit", "--preset", "smoke", "--seed", "x"], "argument --seed: invalid int value: 'x'"),
        (
            ["train", "vit", "--preset", "smoke", "--seed", "-1"],
            "seed: got -1; allowed: an integer in [0, 4294967295]",
        ),
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
    # no ratio on a model's own row, no accuracy where nothing is saved: "—"
    assert "NaN" not in out and "None" not in out
    code, out, _ = cli(["table1", "--results-dir", results, "--preset", "smoke"])
    assert code == 0 and "ResNet18" in out and "NaN" not in out and "None" not in out


def test_locked_run_is_refused(cli, tmp_path):
    from attnlib.lab.lock import RunLock
    from attnlib.results.config import run_dir

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


# ---------------------------------------------------------------------------------- reliability: interruption
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


# ------------------------------------------------------------------------------- reliability: concurrent runs
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


# -------------------------------------------------------------------------------- reliability: damaged inputs
def test_damaged_result_is_retrained_by_the_cli(damaged, cli, caplog):
    with caplog.at_level(logging.WARNING, logger="attnlib"):
        code, out, err = cli(["train", "vit_ha", "--preset", "smoke", "--results-dir", str(damaged)])
    assert code == 0 and "test accuracy" in out and "already complete" not in out
    assert "is damaged" in caplog.text and "retraining it" in caplog.text
    folder = run_dir(damaged, "vit_ha", "smoke")
    assert_intact(folder, run_config("vit_ha", "smoke"))


# -------------------------------------------------------------------------------- reliability: bad parameters
@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        # heads that the encoding does not come with: the experiment names fix encoding and heads
        (["train", "quadratic_iso_16h"], "error: experiment: got 'quadratic_iso_16h'; allowed: resnet18, "),
        (["train", "learned_7h"], "error: experiment: got 'learned_7h'; allowed: resnet18, "),
        (["train", "vit", "--preset", "tiny"], "error: preset: got 'tiny'; allowed: paper, budget, smoke"),
        (["train", "vit", "--epochs", "0"], "error: epochs: got 0; allowed: an integer >= 1"),
        (["train", "vit", "--epochs", "-3"], "error: epochs: got -3; allowed: an integer >= 1"),
        (["train", "vit", "--epochs", "1.5"], "error: argument --epochs: invalid int value: '1.5'"),
        (["train", "vit", "--data", "missing/folder"], "error: data: got 'missing/folder', which is not"),
        (["table3", "--preset", "tiny"], "error: preset: got 'tiny'; allowed: paper, budget, smoke"),
        (["probe", "learned_7h"], "error: experiment: got 'learned_7h'; allowed: resnet18, "),
    ],
)
def test_bad_parameter_through_the_cli(argv, expected, tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results"
    code, out, err = cli([*argv, "--results-dir", str(results)])
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("python -m attnlib: error: ") and expected in err, err
    assert not any(tmp_path.iterdir())  # nothing written, not even the results folder


# ----------------------------------------------------------- reliability: nothing overwritten, nothing leaked
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
    the data is loaded and nothing written."""
    import attnlib.lab.run as run

    loads = []
    monkeypatch.setattr(run, "_load_data", lambda spec: loads.append(spec))
    data = image_folder(tmp_path / "cifar")
    (tmp_path / "notes").write_text("a file")
    results = tmp_path / "notes" / "results"
    code, out, err = cli(
        ["train", "resnet18", "--preset", "smoke", "--data", str(data), "--results-dir", str(results)]
    )
    assert code == 5 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"python -m attnlib: error: {tmp_path / 'notes'}: is a file, not a folder")
    assert loads == []


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


def test_table3_verdicts_follow_holm_over_the_saved_pairs(cli):
    """table3's Welch lines (the saved budget runs) give each pair's Holm-adjusted p and the verdict within the
    family, as the book and the ledger do (`attnlib.analysis.stats.family`), not the unadjusted interval's."""
    from attnlib import experiments
    from attnlib.analysis import stats
    from attnlib.results.tables import seed_accuracies

    code, out, _ = cli(["table3", "--results-dir", "results", "--preset", "budget"])
    assert code == 0
    saved = {n: seed_accuracies("results", "budget", n)[0] for n in experiments.EXPERIMENTS}
    pairs = {
        e.title: (saved[e.baseline], saved[e.name]) for e in experiments.EXPERIMENTS.values() if e.baseline
    }
    tested = {
        t: r for t, r in stats.family(pairs).items() if r.welch is not None and r.adjusted_p is not None
    }
    assert len(tested) >= 2  # a family, not one test
    for title, (w, adjusted, verdict, _) in tested.items():
        line = next(x for x in out.splitlines() if x.startswith(f"- {title}: "))
        assert f"Holm p = {stats.p_text(adjusted)}: {verdict}" in line and f"p = {stats.p_text(w.p)}" in line


def test_tables_print_saved_runs_as_a_reader_reads_them(cli):
    """table1 and table3 over the saved budget runs: one spelling of a one-thread CPU ("(1 thread)", though
    older runs saved "(1 threads)"), accuracies to four decimals (table3's seed means too), times to the
    microsecond, "—" where nothing is saved."""
    import re

    from attnlib.results import tables

    for command in ("table1", "table3"):
        code, out, _ = cli([command, "--results-dir", "results", "--preset", "budget"])
        assert code == 0 and "(1 threads)" not in out and "NaN" not in out and "None" not in out
        assert not re.search(r"\b0\.\d{5,}\b", out), command  # no raw float (0.516033)
    means = tables.table3("results", "budget")["accuracy"].dropna()
    assert len(means) and all(f"{a:.4f}" in out for a in means)
    assert any("(1 threads)" in str(d) for d in tables.table1("results", "budget", 0)["wall_time_device"])
