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
