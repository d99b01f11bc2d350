"""attnlib.lab.engine_bench: the earlier commit's engine really runs from its own tree, the report holds both
engines' rounds, bad input is one clear error, and the epoch breakdown accounts for every phase."""

import subprocess

import pytest

from attnlib.errors import ConfigError
from attnlib.lab import engine_bench


def test_bad_base_and_models_are_refused_before_any_run(tmp_path):
    with pytest.raises(ConfigError, match="base"):
        engine_bench.unpack("no-such-revision", tmp_path, engine_bench.Path(__file__).parents[1])
    with pytest.raises(ConfigError, match="models"):
        engine_bench.compare("HEAD", models=("no_such_model",))
    with pytest.raises(ConfigError, match="images"):
        engine_bench.compare("HEAD", models=("vit",), images="10:x")


def test_unpack_holds_the_commits_attnlib(tmp_path):
    repo = engine_bench.Path(__file__).parents[1]
    tree = engine_bench.unpack("HEAD", tmp_path, repo)
    want = subprocess.run(["git", "-C", str(repo), "show", "HEAD:attnlib/lab/run.py"], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    assert (tree / "attnlib" / "lab" / "run.py").read_text() == want
    assert not (tree / "tests").exists()


@pytest.mark.slow
def test_compare_runs_both_engines_interleaved():
    report = engine_bench.compare("HEAD", models=("learned_9h",), images="200:100", rounds=2)
    (row,) = report["rows"]
    assert row["model"] == "learned_9h" and len(row["rounds"]["base"]) == len(row["rounds"]["new"]) == 2
    for engine in ("base", "new"):  # every run timed its epoch inside its whole run, and used memory
        for r in row["rounds"][engine]:
            assert 0 < r["epoch_s"] < r["wall_s"] and r["peak_mib"] > 0 and r["train_images_per_s"] > 0
    assert row["ratio_run"] == pytest.approx(row["base"]["wall_s"] / row["new"]["wall_s"])
    assert report["settings"]["images"] == [200, 100] and report["settings"]["epoch_fraction"] == 0.004


@pytest.mark.slow
def test_breakdown_accounts_for_every_phase():
    out = engine_bench.breakdown("learned_9h", steps=5, test_images=200)
    assert set(out["seconds"]) == {*engine_bench.PHASES, "evaluation", "probe"}
    assert out["epoch_seconds"] == pytest.approx(sum(out["seconds"].values()))
    assert sum(out["shares"].values()) == pytest.approx(1.0)
    assert out["seconds"]["forward"] > 0 and out["seconds"]["backward"] > 0
    assert out["operators"] and all(op["ms_per_step"] >= 0 for op in out["operators"])


def test_throughput_counts_images_by_cpu_time(monkeypatch):
    # a train step that burns a known CPU time: 16 images in 0.05 s of CPU are about 320 images/s (every
    # reading of the clock adds 1 ms, so that the evaluation takes some time too)
    clock = {"t": 0.0}

    def process_time():
        clock["t"] += 0.001
        return clock["t"]

    monkeypatch.setattr(engine_bench.time, "process_time", process_time)

    def step(*args, **kwargs):
        clock["t"] += 0.05

    monkeypatch.setattr("attnlib.train.loop.train_step", step)
    out = engine_bench.throughput("learned_9h", steps=3, rounds=2, preset="smoke")
    assert out["model"] == "learned_9h" and out["steps"] == 3 and out["rounds"] == 2
    assert out["train_images_per_s"] == pytest.approx(3 * 16 / (3 * 0.05 + 0.001))  # smoke batch 16
    assert out["eval_images_per_s"] > 0
    with pytest.raises(ConfigError, match="steps"):
        engine_bench.throughput("learned_9h", steps=0)


def test_engine_tables_show_every_model_and_phase(tmp_path):
    import json
    from types import SimpleNamespace

    from attnbook import benchmarks

    run = {"epoch_s": 10.0, "wall_s": 12.0, "peak_mib": 100.0, "train_images_per_s": 50.0}
    report = {
        "machine": {"cpu": "Some CPU", "device": "cpu", "cpu_flags": ["amx_bf16"], "torch_threads": 1,
                    "usable_cores": 2},
        "settings": {"base_commit": "a" * 40, "new": "b" * 40, "epoch_fraction": 0.1},
        "rows": [{"model": "vit", "base": {**run, "epoch_s": 20.0}, "new": run, "ratio_epoch": 2.0,
                  "ratio_run": 1.5}],
        "geometry_rows": [{"model": "learned_9h", "geometry": "16x16", "base_step_s": 1.0, "new_step_s": 0.5,
                           "ratio_step": 2.0}],
        "breakdown": [{"model": "vit", "epoch_seconds": 100.0, "operators": [
            {"name": "aten::mm", "share": 0.5}, {"name": "aten::bmm", "share": 0.2}, {"name": "aten::add", "share": 0.3}],
            "shares": {"forward": 0.3, "backward": 0.5, "optimiser": 0.05, "evaluation": 0.1, "data": 0.03,
                       "bookkeeping": 0.02, "probe": 0.0}}],
    }  # fmt: skip
    parts = benchmarks.engine_tables(report)
    assert list(parts["runs"]["epoch ×"]) == ["2.00"] and list(parts["steps"]["×"]) == ["2.00"]
    assert parts["gemm"] == {"vit": pytest.approx(0.7)}
    assert list(parts["epoch"].iloc[0][["forward", "other"]]) == [
        "30%",
        "10%",
    ]  # other: optimiser, data, bookkeeping
    (tmp_path / "bench").mkdir()
    params = SimpleNamespace(results_dir=tmp_path)
    assert benchmarks.engine_report(params) is None  # none saved
    (tmp_path / "bench" / "engine.json").write_text(json.dumps(report))
    assert benchmarks.engine_report(params)["rows"][0]["model"] == "vit"
    assert benchmarks.bench_reports(params) == {}  # not a `bench` report: read by its own reader only
    (tmp_path / "bench" / "engine.json").write_text(json.dumps({**report, "rows": [{"model": "vit"}]}))
    assert benchmarks.engine_report(params) is None  # damaged: not shown
