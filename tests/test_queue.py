"""`python -m attnlib queue`: lanes of single-thread trainings, skipping complete results, resumable, and
stopped cleanly by SIGTERM."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from attnlib import experiments
from attnlib.analysis import plan
from attnlib.errors import ConfigError
from attnlib.lab import queue
from attnlib.lab.cli import main
from attnlib.lab.exits import EXIT_USAGE
from attnlib.lab.queue import Job, Queue


def test_default_experiments_are_the_ledger_plan_at_long_else_the_grid():
    assert queue.default_experiments("long") == list(plan.LONG_PLAN)
    assert queue.default_experiments("budget") == experiments.names()


def test_train_command_is_one_single_thread_train():
    argv = queue.train_command(Job("vit", 2), "budget", results_dir="r", data="d", force=True)
    assert argv[1:] == [
        "-m", "attnlib", "train", "vit", "--preset", "budget", "--seed", "2",
        "--threads", "1", "--no-progress", "--results-dir", "r", "--data", "d", "--force",
    ]  # fmt: skip


def test_lanes_run_side_by_side_in_the_order_given(tmp_path):
    sleep = [sys.executable, "-c", "import time; time.sleep(1.5)"]
    jobs = [Job(f"e{i}", 0) for i in range(4)]
    start = time.monotonic()
    outcomes = Queue(jobs, 2, lambda job: sleep, tmp_path).run()
    took = time.monotonic() - start
    assert [o.job for o in outcomes] == jobs and {o.status for o in outcomes} == {"trained"}
    assert 3.0 <= took < 5.5  # two lanes: two rounds of 1.5 s, not four
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"e{i}-seed0.log" for i in range(4)]


def test_a_failed_job_does_not_stop_the_others(tmp_path):
    def command(job):
        return [sys.executable, "-c", f"import sys; print('{job.name}'); sys.exit({3 if job.seed else 0})"]

    outcomes = Queue([Job("a", 1), Job("b", 0)], 1, command, tmp_path).run()
    assert [o.status for o in outcomes] == ["failed (exit 3)", "trained"]
    assert (tmp_path / "a-seed1.log").read_text().strip() == "a@1"


def test_stop_sends_sigterm_to_running_jobs_and_starts_no_more(tmp_path):
    # the job catches SIGTERM the way `train` does (saves, then exits non-zero)
    script = (
        "import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(130))\ntime.sleep(60)"
    )
    runner = Queue(
        [Job("a", 0), Job("b", 0), Job("c", 0)], 2, lambda job: [sys.executable, "-c", script], tmp_path
    )
    threading.Timer(1.5, runner.stop).start()
    start = time.monotonic()
    outcomes = runner.run()
    assert time.monotonic() - start < 20
    assert [o.status for o in outcomes] == ["stopped", "stopped", "not started"]


def test_runs_get_their_own_session_so_a_terminal_ctrl_c_reaches_only_the_queue(tmp_path):
    import os

    Queue(
        [Job("a", 0)], 1, lambda job: [sys.executable, "-c", "import os; print(os.getsid(0))"], tmp_path
    ).run()
    assert int((tmp_path / "a-seed0.log").read_text()) != os.getsid(0)


def test_lanes_must_be_positive(tmp_path):
    with pytest.raises(ConfigError, match=r"lanes: got 0; allowed: an integer in \[1, "):
        Queue([Job("a", 0)], 0, lambda job: [], tmp_path)


@pytest.mark.parametrize(
    "argv,parameter",
    [
        (["queue", "--lanes", "0"], "error: lanes: got 0"),
        (["queue", "--seeds", "-1"], "error: seed: got -1"),
        (["queue", "--experiments", "resnet50"], "error: experiment: got 'resnet50'"),
    ],
)
def test_bad_queue_arguments_name_the_parameter(argv, parameter, capsys, tmp_path):
    assert main([*argv, "--results-dir", str(tmp_path)]) == EXIT_USAGE
    assert parameter in capsys.readouterr().err and not any(tmp_path.iterdir())


@pytest.mark.slow
def test_queue_trains_what_is_missing_and_skips_what_is_complete(tmp_path, capsys):
    argv = ["queue", "--preset", "smoke", "--experiments", "vit", "resnet18", "--seeds", "0", "1"]
    argv += ["--results-dir", str(tmp_path), "--lanes", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "smoke: 4 runs, 0 complete, 4 to train or resume" in out and out.count(": trained") == 4
    assert {p.name for p in (tmp_path / "logs" / "smoke").iterdir()} == {
        f"{n}-seed{s}.log" for n in ("vit", "resnet18") for s in (0, 1)
    }
    assert (tmp_path / "vit" / "smoke-seed1" / "metrics.json").exists()
    assert main(argv) == 0
    assert "smoke: 4 runs, 4 complete, 0 to train or resume" in capsys.readouterr().out


def test_asked_chooses_its_own_experiments_and_seeds(capsys):
    for extra, parameter in ((["--seeds", "3"], "--seeds"), (["--experiments", "vit"], "--experiments")):
        assert main(["queue", "--asked", *extra]) == EXIT_USAGE
        assert f"{parameter}: got" in capsys.readouterr().err


def test_asked_queues_the_seeds_the_comparisons_lack(tmp_path, monkeypatch, capsys):
    asked = [("vit", 4), ("vit_ha", 3)]
    monkeypatch.setattr(plan, "seeds_asked", lambda results_dir, preset, data: asked)
    seen = []

    def pending(jobs, preset, results_dir, data=None):
        seen.extend(jobs)
        return [], list(jobs)  # all complete: nothing trains

    monkeypatch.setattr(queue, "pending", pending)
    assert main(["queue", "--asked", "--results-dir", str(tmp_path)]) == 0
    assert seen == [Job("vit", 4), Job("vit_ha", 3)]
    assert "budget: 2 runs, 2 complete" in capsys.readouterr().out


def test_dry_run_lists_what_would_train_and_starts_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(plan, "seeds_asked", lambda results_dir, preset, data: [("vit", 4), ("vit_ha", 3)])
    monkeypatch.setattr(queue, "Queue", None)  # starting anything would fail
    assert main(["queue", "--asked", "--dry-run", "--preset", "smoke", "--results-dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["smoke: 2 runs, 0 complete, 2 to train or resume", "- vit@4", "- vit_ha@3"]
    assert not any(tmp_path.iterdir())


def test_seeds_asked_follow_the_standard(monkeypatch):
    """MIN_SEEDS per side, MORE_SEEDS while the pair is inconclusive within the family of HA pairs (after
    Holm's adjustment, as the book judges it); each side's lowest unused seeds."""
    from attnlib.analysis import stats as compare
    from attnlib.results import tables

    saved = {name: {} for base in plan.HA_PAIRS for name in (base, base + "_ha")}
    saved["vit"] = {0: 0.40, 1: 0.42, 2: 0.44, 3: 0.41}  # inconclusive at 4/4: one more each
    saved["vit_ha"] = {0: 0.41, 1: 0.43, 2: 0.42, 5: 0.45}
    saved["san_pairwise"] = {0: 0.50, 1: 0.51, 2: 0.50}  # clear at 3/3: none
    saved["san_pairwise_ha"] = {0: 0.60, 1: 0.61, 2: 0.60}
    saved["san_patchwise"] = {0: 0.50, 1: 0.51}  # 2/1: up to 3 per side
    saved["san_patchwise_ha"] = {0: 0.60}
    # its own interval excludes 0 (p 0.027), Holm's adjustment over the three pairs with a p does not (0.055)
    saved["learned_content_9h"] = {0: 0.50, 1: 0.52, 2: 0.51}
    saved["learned_content_9h_ha"] = {0: 0.53, 1: 0.55, 2: 0.535}
    monkeypatch.setattr(
        tables, "seed_accuracies", lambda results_dir, preset, name, data=None: (saved[name], [])
    )
    assert compare.welch(list(saved["vit"].values()), list(saved["vit_ha"].values())).seeds_wanted == 5
    jobs = plan.seeds_asked("unused")
    assert [j for j in jobs if j[0].startswith(("vit", "san"))] == [
        ("san_patchwise", 2),
        ("san_patchwise_ha", 1),
        ("san_patchwise_ha", 2),
        ("vit", 4),
        ("vit_ha", 3),
    ]
    lone = compare.welch(
        list(saved["learned_content_9h"].values()), list(saved["learned_content_9h_ha"].values())
    )
    assert lone.verdict == "higher" and lone.seeds_wanted == 0
    assert [j for j in jobs if j[0].startswith("learned_content_9h")] == [
        ("learned_content_9h", 3),
        ("learned_content_9h", 4),
        ("learned_content_9h_ha", 3),
        ("learned_content_9h_ha", 4),
    ]
    empty = [n for n in saved if not saved[n]]  # no seed saved: MIN_SEEDS each, seeds 0, 1, 2
    assert [j for j in jobs if j[0] in empty] == [(n, s) for n in empty for s in range(compare.MIN_SEEDS)]
