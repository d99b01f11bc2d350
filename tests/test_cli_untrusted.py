"""The command line and the chapters' parameter check on the reviewer's bad inputs (issue 33): each is refused
in one line with the documented exit code (2: bad input) before anything is written, never a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import bookcheck
import pytest

import attnbook as book
from attnbook.params import ParameterError
from attnlib.checks import MAX_SEED, max_threads
from attnlib.env import TRAIN_MISSING_ENV
from attnlib.errors import ConfigError
from attnlib.lab.run import run_or_load
from attnlib.train.distributed import distributed_env


def _refused(cli, argv, tmp_path, *fragments) -> None:
    results = tmp_path / "results"
    code, out, err = cli([*argv, "--results-dir", str(results)] if "--results-dir" not in argv else argv)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (code, err)
    for fragment in fragments:
        assert fragment in err, err
    assert not results.exists()


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--seed", "100000000000"], f"allowed: an integer in [0, {MAX_SEED}]"),
        (["--threads", "100000"], f"allowed: an integer in [1, {max_threads()}]"),
        (["--threads", "20000"], f"allowed: an integer in [1, {max_threads()}]"),
        (["--data", "synthetic:1000000000:10"], "sizes in [1, 200000]"),
    ],
)
def test_train_refuses_absurd_values(cli, tmp_path, argv, fragment):
    _refused(cli, ["train", "vit", "--preset", "smoke", *argv], tmp_path, fragment)


def test_queue_and_time_bound_their_numbers_too(cli, tmp_path):
    _refused(cli, ["queue", "--preset", "smoke", "--seeds", "0", str(2**40)], tmp_path, "[0, 4294967295]")
    _refused(cli, ["queue", "--preset", "smoke", "--lanes", "100000"], tmp_path, "lanes: got 100000")
    _refused(cli, ["time", "--preset", "smoke", "--threads", "100000"], tmp_path, "threads: got 100000")
    _refused(
        cli, ["queue", "--preset", "smoke", "--data", "synthetic:0:1"], tmp_path, "data: got 'synthetic:0:1'"
    )


def test_empty_results_dir_is_refused(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(["train", "vit", "--preset", "smoke", "--results-dir", ""])
    assert code == 2 and "--results-dir" in err and "not empty" in err and err.count("\n") == 1
    assert os.listdir(tmp_path) == []  # nothing written into the current folder


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"RANK": "zero"}, "RANK: got 'zero'; allowed: an integer"),
        ({"WORLD_SIZE": "two"}, "WORLD_SIZE: got 'two'"),
        ({"WORLD_SIZE": "2"}, "1 unless started by torchrun"),
        ({"WORLD_SIZE": "2", "RANK": "5", "MASTER_ADDR": "x", "MASTER_PORT": "1"}, "RANK: got '5'"),
        # ASCII digits only, quoted as given: int() reads Arabic-Indic 3 (U+0663) as 3 and '1_0' as 10
        ({"WORLD_SIZE": "\u0663"}, "WORLD_SIZE: got '\u0663'; allowed: an integer"),
        ({"RANK": "\uff11"}, "RANK: got '\uff11'"),  # a fullwidth 1
        ({"LOCAL_RANK": "1_0"}, "LOCAL_RANK: got '1_0'"),
        ({"WORLD_SIZE": "-1"}, "WORLD_SIZE: got '-1'"),
        ({"WORLD_SIZE": "0"}, "WORLD_SIZE: got '0'; allowed: an integer >= 1"),
    ],
)
def test_bad_distributed_environment_is_one_line(cli, tmp_path, monkeypatch, env, fragment):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError):
        distributed_env()
    _refused(cli, ["train", "vit", "--preset", "smoke", "--data", "synthetic:64:32"], tmp_path, fragment)


def test_ctrl_c_while_the_modules_are_imported_is_one_line(tmp_path):
    """SIGINT arrives while main() imports torch and the training modules: one line, exit 130."""
    script = textwrap.dedent(
        """
        import os, signal, sys
        import importlib.abc

        class Interrupt(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name == "attnlib.lab.machine":
                    os.kill(os.getpid(), signal.SIGINT)  # the user's Ctrl-C, during the imports
                return None

        sys.meta_path.insert(0, Interrupt())
        from attnlib.lab.cli import main
        sys.exit(main(["list"]))
        """
    )
    before = signal.getsignal(signal.SIGINT)  # (SIG_IGN when the suite itself runs in the background)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 130 and done.stderr == "python -m attnlib: interrupted\n", done.stderr
    assert signal.getsignal(signal.SIGINT) is before  # this process: untouched


def test_train_missing_accepts_only_the_documented_values(tmp_path, monkeypatch):
    monkeypatch.setenv(TRAIN_MISSING_ENV, "maybe")
    with pytest.raises(ConfigError, match="ATTNLIB_TRAIN_MISSING: got 'maybe'; allowed: 0 or 1"):
        run_or_load("vit", "smoke", results_dir=tmp_path)
    with pytest.raises(ParameterError, match="ATTNLIB_TRAIN_MISSING"):
        book.check_params(preset="smoke", results_dir=tmp_path)
    assert not any(tmp_path.iterdir())
    for value, trains in (("0", False), ("off", False), ("1", True), ("yes", True)):
        monkeypatch.setenv(TRAIN_MISSING_ENV, value)
        assert book.check_params(preset="smoke", results_dir=tmp_path).train_missing is trains


def test_chapter_parameters_refuse_a_folder_without_cifar10_and_a_file_as_results(tmp_path):
    with pytest.raises(ParameterError, match="data: got '/etc'.*no CIFAR-10 there"):
        book.check_params(preset="budget", data="/etc", results_dir=tmp_path, train_missing=False)
    a_file = tmp_path / "results.txt"
    a_file.write_text("not a folder")
    for bad in (str(a_file), ""):
        with pytest.raises(ParameterError, match="results_dir"):
            book.check_params(preset="smoke", results_dir=bad, train_missing=False)
    with pytest.raises(ParameterError, match="seed"):
        book.check_params(preset="smoke", seed=MAX_SEED + 1, train_missing=False)


def test_a_chromium_that_is_no_browser_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "index.html").write_text("<html><body><article><p>x</p></article></body></html>")
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv(bookcheck.CHROMIUM_ENV, str(fake))
    assert bookcheck.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"could not drive {fake} as Chromium" in err, err
