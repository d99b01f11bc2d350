"""attnlib.timing (`python -m attnlib time`): interleaved timing in one process, the load check, the file
Table 3 reads, and what Table 3 shows when the file lacks a model or measured another configuration."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest
import torch
from torch import nn

from attnlib.checks import max_threads
from attnlib.errors import ConfigError
from attnlib.lab import timing
from attnlib.results.tables import table3, timing_columns
from attnlib.results.timing import core_sharing, machine_line, wall_times

IDLE, BUSY = (0.1, 0.2, 0.3), (7.5, 7.0, 6.0)


@pytest.fixture
def idle(monkeypatch):
    """The machine as idle as the load check can see (os.getloadavg and /proc/loadavg)."""
    monkeypatch.setattr(os, "getloadavg", lambda: IDLE)
    monkeypatch.setattr(timing, "_running_others", lambda: 0)


class Recorder(nn.Module):
    """Appends its name to a shared log on every forward pass."""

    def __init__(self, name: str, log: list):
        super().__init__()
        self.name, self.log = name, log
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        self.log.append(self.name)
        return x


def test_interleaved_rounds_rotate_and_count_every_pass():
    log: list[str] = []
    models = {n: Recorder(n, log) for n in ("a", "b", "c")}
    times, busy = timing.interleaved(models, warmup=2, reps=7, rounds=3)
    assert log[:6] == ["a", "a", "b", "b", "c", "c"]  # warm-up, model by model
    timed = log[6:]
    # rounds of 3, 2, 2 passes; the first model rotates: a b c | b c a | c a b
    assert (
        timed
        == ["a"] * 3
        + ["b"] * 3
        + ["c"] * 3
        + ["b"] * 2
        + ["c"] * 2
        + ["a"] * 2
        + ["c"] * 2
        + ["a"] * 2
        + ["b"] * 2
    )
    assert all([len(r) for r in t] == [3, 2, 2] for t in times.values())  # passes per round
    assert all(t > 0 for rounds in times.values() for got in rounds for t in got)
    assert not models["a"].training  # eval mode
    with pytest.raises(ConfigError, match="rounds"):
        timing.interleaved(models, warmup=0, reps=2, rounds=3)


def test_ratio_is_paired_by_round():
    """HA / model: the median of the per-round ratios, not of all passes pooled; quartiles as spread."""
    base = dict(median_ms=2.0, round_medians_ms=[1.0, 2.0, 4.0, 8.0, 16.0])
    ha = dict(median_ms=1.0, round_medians_ms=[0.5, 1.0, 2.0, 4.0, 12.0])  # 0.5 each round but the last
    r = timing.ratios({"vit": base, "vit_ha": ha, "resnet18": base})["vit_ha"]
    assert r["baseline"] == "vit" and r["ratio"] == pytest.approx(0.5)
    assert r["round_ratio_p25"] == pytest.approx(0.5) and r["round_ratio_p75"] == pytest.approx(0.625)
    assert set(timing.ratios({"vit": base, "vit_ha": ha, "resnet18": base})) == {"vit_ha"}
    assert timing.ratios({"vit_ha": ha}) == {}  # no baseline timed: no ratio


def test_core_sharing_reads_the_load():
    assert core_sharing(1, [0.3, 0.2, 0.1], usable=2)["shared"] is False
    assert core_sharing(1, [1.4, 1, 1], usable=2)["shared"] is False  # the other core is busy
    assert core_sharing(1, [3.0, 3, 3], usable=2)["shared"] is True  # the load 3–4
    assert core_sharing(2, [0.8, 0, 0], usable=2)["shared"] is True  # both cores needed
    after = core_sharing(1, [0.2, 0, 0], [1.1, 1, 1], usable=2)
    assert after["other_load"] == pytest.approx(0.2) and after["shared"] is False  # own thread subtracted
    assert core_sharing(1, [0.2, 0, 0], usable=2, running=[2, 3, 2])["shared"] is True
    assert core_sharing(1, None, usable=2)["shared"] is None


def test_time_command_writes_the_file_table3_reads(idle, cli, tmp_path):
    results = tmp_path / "r"
    argv = ["time", "--preset", "smoke", "--experiments", "vit", "vit_ha", "san_pairwise"]
    code, out, err = cli([*argv, "--results-dir", str(results), "--quick"])
    assert code == 0 and "HA / model" in out
    assert (results / "timing" / "smoke-quick.json").exists()  # a quick run never replaces a measurement
    assert not (results / "timing" / "smoke.json").exists()
    assert not timing_columns(results, "smoke", ["vit"]).loc[0, "wall_time_measured"]
    report, path = timing.run(
        "smoke", ["vit", "vit_ha", "san_pairwise"], results_dir=results, warmup=1, reps=4, rounds=2
    )
    assert path == results / "timing" / "smoke.json" and not list(path.parent.glob(".*tmp*"))
    saved = json.loads(path.read_text())
    assert saved["protocol"]["reps"] == 4 and saved["protocol"]["threads"] == 1
    assert saved["load"]["shared"] is False and saved["load"]["load_before"] == list(IDLE)
    m = saved["machine"]
    assert m["cpu"] and m["torch"] == torch.__version__ and isinstance(m["cpu_flags"], list)
    assert set(saved["models"]) == {"vit", "vit_ha", "san_pairwise"}
    vit = saved["models"]["vit"]
    assert vit["reps"] == 4 and len(vit["round_medians_ms"]) == 2 and vit["p25_ms"] <= vit["median_ms"]
    assert vit["params"] > saved["models"]["vit_ha"]["params"]  # HA shares its block
    assert set(saved["ratios"]) == {"vit_ha"}
    df = table3(results, "smoke").set_index("experiment")
    assert df.loc["vit", "wall_time_ms"] == pytest.approx(vit["median_ms"])
    assert df.loc["vit_ha", "time_ratio"] == pytest.approx(saved["ratios"]["vit_ha"]["ratio"])
    assert pd.isna(df.loc["vit", "time_ratio"])  # the normal model has no ratio
    for name in ("san_pairwise_ha", "learned_content_9h"):  # not in the file: not measured, no ratio
        assert pd.isna(df.loc[name, "wall_time_ms"]) and pd.isna(df.loc[name, "time_ratio"])
    assert df.loc["san_pairwise", "wall_time_ms"] > 0
    code, out, _ = cli(["table3", "--results-dir", str(results), "--preset", "smoke"])
    assert code == 0 and "not measured" in out and "Wall times measured together" in out


def test_a_timing_of_another_configuration_is_not_used(idle, tmp_path):
    report, path = timing.run("smoke", ["vit", "vit_ha"], results_dir=tmp_path, warmup=1, reps=2, rounds=1)
    report["models"]["vit"]["model"]["layers"] = 99  # e.g. measured before the registry changed
    path.write_text(json.dumps(report))
    columns = timing_columns(tmp_path, "smoke", ["vit", "vit_ha"]).set_index("experiment")
    assert pd.isna(columns.loc["vit", "wall_time_ms"]) and columns.loc["vit_ha", "wall_time_ms"] > 0
    assert not columns.loc["vit", "wall_time_measured"] and columns.loc["vit_ha", "wall_time_measured"]
    assert pd.isna(columns.loc["vit_ha", "time_ratio"])  # its model's time is not usable
    assert wall_times(report, "budget") == {}  # another preset


def test_busy_machine_is_refused_unless_forced(monkeypatch, cli, tmp_path):
    monkeypatch.setattr(os, "getloadavg", lambda: BUSY)
    built = []
    monkeypatch.setattr(timing.experiments, "build_model", lambda *a: built.append(a) or nn.Identity())
    code, out, err = cli(["time", "--preset", "smoke", "--results-dir", str(tmp_path)])
    assert code == 6 and err.count("\n") == 1 and "refused: the load average" in err and "--force" in err
    assert not built and not any(tmp_path.iterdir())  # nothing built, nothing written
    monkeypatch.undo()
    monkeypatch.setattr(os, "getloadavg", lambda: BUSY)
    report, _ = timing.run("smoke", ["vit"], results_dir=tmp_path, force=True, warmup=1, reps=2, rounds=1)
    assert report["load"]["shared"] is True
    assert "shared with other work" in machine_line(report)
    threads = report["protocol"]["threads"]  # in words: "1 thread", "2 threads", never "thread(s)"
    line = machine_line(report)
    assert f"), {threads} thread{'s' * (threads != 1)}, " in line and "(s)" not in line


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--experiments", "resnet50"], "error: experiment: got 'resnet50'; allowed:"),
        (["--threads", "0"], f"error: threads: got 0; allowed: an integer in [1, {max_threads()}]"),
        (["--preset", "huge"], "error: preset: got 'huge'; allowed: paper, budget, smoke"),
        (["--device", "tpu"], "error: device: got 'tpu'; allowed: auto, cpu, cuda"),
    ],
)
def test_bad_input_one_line(argv, message, cli, tmp_path):
    code, _, err = cli(["time", *argv, "--results-dir", str(tmp_path)])
    assert code == 2 and err.count("\n") == 1 and message in err
    assert not any(tmp_path.iterdir())


def test_measure_rejects_bad_arguments_before_building():
    with pytest.raises(ConfigError, match="experiment"):
        timing.measure("smoke", ["nope"])
    with pytest.raises(ConfigError, match="experiments"):
        timing.measure("smoke", ["vit", "vit"])
    with pytest.raises(ConfigError, match="threads"):
        timing.measure("smoke", ["vit"], threads=0)
