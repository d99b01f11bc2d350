"""HA's cost rows of the ledger (attnlib.analysis.costs) and the measure behind one of them (attnlib.lab.train_cost),
and the best model by seed mean (attnlib.analysis.stats.best_by_seed_mean)."""

import json
import math

import pytest

from attnlib.analysis import claims, costs, stats
from attnlib.analysis.rules import INCONCLUSIVE, NOT_MEASURED, NOT_REPRODUCED, REPRODUCED, Evidence
from attnlib.results.timing import threads_words, train_cost_path, train_cost_report


def test_wall_ratio_is_the_ratio_of_seed_means_with_per_seed_ratios_of_common_seeds():
    model = {0: (2.0, "cpu A"), 1: (4.0, "cpu A"), 2: (6.0, "cpu A")}
    ha = {0: (1.0, "cpu A"), 1: (3.0, "cpu B")}
    mean, paired, machines = costs.wall_ratio(model, ha)
    assert mean == pytest.approx(2.0 / 4.0) and paired == [0.5, 0.75] and machines == {"cpu A", "cpu B"}
    assert costs.wall_ratio({}, ha) is None


@pytest.mark.parametrize(
    "ha_ms,verdict",
    [((1.0, 1.5), REPRODUCED), ((3.0, 5.0), NOT_REPRODUCED), ((1.0, 5.0), INCONCLUSIVE)],
)
def test_inference_time_verdict_follows_the_per_seed_ratios(ha_ms, verdict):
    ev = Evidence("budget")
    ev.wall_times = {
        "vit": {0: (2.0, "x"), 1: (2.0, "x")},
        "vit_ha": {0: (ha_ms[0], "x"), 1: (ha_ms[1], "x")},
    }
    text, got = claims.by_key("ha_inference_time").test(ev)
    assert got == verdict and "ViT:" in text and "n = 2/2" in text


def test_machines_are_named_with_their_thread_count_in_words():
    assert [threads_words(n) for n in (1, 2)] == ["1 thread", "2 threads"]
    ev = Evidence("budget")  # runs saved their device as "AMD EPYC (1 threads)"
    ev.wall_times = {"vit": {0: (2.0, "AMD EPYC (1 threads)")}, "vit_ha": {0: (1.0, "AMD EPYC (2 threads)")}}
    text = claims.by_key("ha_inference_time").test(ev)[0]
    assert "timed on AMD EPYC (1 thread), AMD EPYC (2 threads) (the runs" in text and "1 threads" not in text


def test_inference_time_with_one_common_seed_is_inconclusive_and_nothing_saved_is_not_measured():
    ev = Evidence("budget")
    ev.wall_times = {"vit": {0: (2.0, "x")}, "vit_ha": {0: (1.0, "x")}}
    assert claims.by_key("ha_inference_time").test(ev)[1] == INCONCLUSIVE
    assert claims.by_key("ha_inference_time").test(Evidence("budget"))[1] == NOT_MEASURED


ENTRY = dict(step_s=0.5, epoch_s=250.0, peak_mib=60.0, weights_mib=10.0, optimizer_mib=10.0, gradients_mib=20.0,
             total_mib=100.0, params=10, bf16=False, batch=100)  # one model's  # fmt: skip


def _report(memory_ha: float) -> dict:
    return dict(
        preset="budget",
        protocol=dict(threads=1),
        machine=dict(cpu="Test CPU", cpu_flags=["avx2"], torch="2", cpu_capability="AVX2"),
        git=dict(commit="abcdef0123"),
        models={"vit": ENTRY, "vit_ha": {**ENTRY, "peak_mib": memory_ha - 40, "total_mib": memory_ha}},
        ratios={"vit_ha": dict(time=1.0, memory=memory_ha / 100.0, step_memory=(memory_ha - 40) / 60)},
    )


@pytest.mark.parametrize("memory_ha,verdict", [(50.0, REPRODUCED), (100.0, NOT_REPRODUCED)])
def test_train_cost_row_reads_the_saved_report(tmp_path, memory_ha, verdict):
    ev = Evidence("budget")
    assert claims.by_key("ha_train_cost").test(ev)[1] == NOT_MEASURED
    path = train_cost_path(tmp_path, "budget")
    assert path == tmp_path / "train_cost" / "budget.json"
    path.parent.mkdir()
    path.write_text(json.dumps(_report(memory_ha)))
    ev.train_cost = train_cost_report(tmp_path, "budget")
    text, got = claims.by_key("ha_train_cost").test(ev)
    assert got == verdict and f"memory {memory_ha / 100:.2f}×" in text
    # the machine in the words of Table 3's timing (one home: attnlib.results.timing.machine_words), then commit
    assert "Test CPU (instruction sets: avx2; torch 2, CPU capability AVX2), 1 thread, commit abcdef0" in text
    path.write_text("{")
    assert train_cost_report(tmp_path, "budget") is None


@pytest.mark.parametrize(
    "damage,said",
    [
        (dict(protocol=[1]), "(protocol is [1], not an object)"),
        (dict(load="shared"), "(load is 'shared', not an object)"),
        (dict(machine=dict(cpu_flags="avx2")), "(machine.cpu_flags is 'avx2', not a list of strings)"),
        (dict(ratios={"vit_ha": 0.5}), "(ratios.vit_ha is 0.5, not an object)"),
        (dict(ratios={"vit_ha": dict(time=1.0, step_memory=1.0)}), "(ratios.vit_ha lacks memory)"),
        (
            dict(ratios={"vit_ha": dict(time=1.0, memory="half", step_memory=1.0)}),
            "(ratios.vit_ha.memory is 'half', not a number",
        ),
        (dict(models={"vit_ha": ENTRY}), "(models lacks vit)"),  # the pair's model, which the ledger reads
        (dict(models={"vit": ENTRY, "vit_ha": "100 MiB"}), "(models.vit_ha is '100 MiB', not an object)"),
        (
            dict(models={"vit": {**ENTRY, "epoch_s": None}, "vit_ha": ENTRY}),
            "(models.vit.epoch_s is None, not a",
        ),
        (
            dict(models={"vit": ENTRY, "vit_ha": {**ENTRY, "peak_mib": "x"}}),
            "(models.vit_ha.peak_mib is 'x', not",
        ),
    ],
)
def test_a_damaged_train_cost_report_is_not_measured_and_said_in_one_line(tmp_path, caplog, damage, said):
    path = train_cost_path(tmp_path, "budget")
    path.parent.mkdir()
    path.write_text(json.dumps(_report(50.0) | damage))
    assert train_cost_report(tmp_path, "budget") is None
    assert said in caplog.text and "the ledger's training cost is not measured" in caplog.text


def test_the_ledger_has_the_cost_rows_with_their_scale():
    ev = Evidence("budget")
    ev.train_cost = _report(50.0)
    frame = claims.ledger(ev, [c for c in claims.CLAIMS if c.key in ("ha_train_cost", "ha_inference_time")])
    rows = frame.set_index("claim")
    assert rows.loc["ha_train_cost", "verdict"] == REPRODUCED
    assert "one measured training step" in rows.loc["ha_train_cost", "label"]
    assert rows.loc["ha_inference_time", "verdict"] == NOT_MEASURED


def test_train_cost_measures_each_pair_on_one_batch_and_the_ratios_are_its_numbers():
    import torch

    from attnlib.lab import train_cost

    models, ratios = train_cost.measure_pair("vit", "smoke", torch.device("cpu"), rounds=1, min_run_time=0.01)
    ha, base = models["vit_ha"], models["vit"]
    assert ratios["memory"] == pytest.approx(ha["total_mib"] / base["total_mib"])
    assert ratios["step_memory"] == pytest.approx(ha["peak_mib"] / base["peak_mib"])
    for m in (ha, base):  # the sum of its parts; the weights are the parameters' and buffers' bytes
        parts = ("weights_mib", "optimizer_mib", "gradients_mib", "peak_mib")
        assert m["total_mib"] == pytest.approx(sum(m[k] for k in parts))
        assert m["weights_mib"] >= m["params"] * 4 / 2**20 and m["optimizer_mib"] > 0 and m["gradients_mib"] > 0
    # HA shares one layer's weights: it holds fewer weights, less momentum and fewer gradients
    assert all(ha[k] < base[k] for k in ("weights_mib", "optimizer_mib", "gradients_mib"))
    assert ratios["time"] == pytest.approx(ha["round_step_s"][0] / base["round_step_s"][0])
    assert base["epoch_s"] == pytest.approx(math.ceil(50_000 / base["batch"]) * base["step_s"])
    assert ha["params"] < base["params"] and base["peak_mib"] > 0


def test_best_by_seed_mean_names_only_models_with_the_full_seed_count():
    acc = {"a": [0.50, 0.52, 0.54], "b": [0.60], "c": [0.51, 0.53, 0.58]}
    assert stats.best_by_seed_mean(acc) == ("c", pytest.approx(0.54), 3)  # b: one seed, not named
    assert stats.best_by_seed_mean({"a": []}) is None


def test_inference_time_prefers_table3_timing_of_the_pair(tmp_path):
    """Both models timed together (Table 3's report) are judged on the quartiles of their per-round ratios; the
    runs' own timing stays beside it."""
    ev = Evidence("budget")
    ev.wall_times = {"vit": {0: (2.0, "x")}, "vit_ha": {0: (4.0, "x")}}  # one seed: alone, inconclusive
    ev.timing = {"vit_ha": dict(ratio=0.80, round_ratio_p25=0.78, round_ratio_p75=0.82, cpu="Test CPU")}
    text, verdict = claims.by_key("ha_inference_time").test(ev)
    assert verdict == REPRODUCED and "Table 3's timing 0.80× (quartiles over rounds 0.78–0.82)" in text
    assert "the runs' 2.00× (n = 1/1)" in text and "Test CPU (Table 3)" in text
    assert costs.table3_timing(tmp_path, "budget") == {}


@pytest.mark.slow  # a real measurement: seconds on idle cores, a minute or more on shared ones
def test_train_cost_command_writes_the_report_the_ledger_reads(tmp_path, capsys):
    from attnlib.lab.cli import main

    argv = ["train-cost", "--preset", "smoke", "--pairs", "vit", "--rounds", "1"]
    argv += ["--results-dir", str(tmp_path)]
    assert main(argv) == 0
    report = train_cost_report(tmp_path, "smoke")
    assert set(report["models"]) == {"vit", "vit_ha"} and set(report["ratios"]) == {"vit_ha"}
    assert {"cpu", "cpu_flags", "torch", "torch_threads"} <= set(report["machine"])
    assert "commit" in report["git"] and report["protocol"]["threads"] == 1
    assert "vit_ha: step" in capsys.readouterr().out
    assert main([*argv[:3], "--pairs", "resnet18", "--results-dir", str(tmp_path)]) == 2  # not an HA pair
    assert "pairs: got 'resnet18'" in capsys.readouterr().err
