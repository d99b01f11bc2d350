"""The book's HA comparisons and Table 3 figures: Welch's test over every saved seed (never a single seed, never
2 standard errors), wall times from the timing file, and benchmark notes that name the machine and say when
a matmul peak was measured on shared cores."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import attnbook as book
from attnbook.ha import INIT_FORMS, paired_cell
from attnbook.phrases import NOT_MEASURED, VERDICT_SHORT, escaped, ledger_markdown
from attnbook.tables import group, short_label
from attnlib.analysis import stats as compare
from attnlib.lab import timing
from attnlib.lab.run import train_run
from attnlib.results.tables import seed_accuracies


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    """vit and vit_ha at the smoke preset, seeds 0 and 1 each, and san_pairwise seed 0 alone."""
    root = tmp_path_factory.mktemp("results")
    for name in ("vit", "vit_ha"):
        for seed in (0, 1):
            train_run(name, "smoke", results_dir=root, seed=seed, progress=False)
    train_run("san_pairwise", "smoke", results_dir=root, progress=False)
    return root


@pytest.fixture
def params(seeds):
    return book.check_params(preset="smoke", data=None, device="cpu", results_dir=seeds, train_missing=False)


def test_ha_effects_is_welch_over_every_saved_seed(params, seeds):
    effects = book.ha_effects(["vit", "san_pairwise"], params).set_index("model")
    a, b = (list(seed_accuracies(seeds, "smoke", n)[0].values()) for n in ("vit", "vit_ha"))
    assert len(a) == len(b) == 2
    w = compare.welch(a, b)
    vit = effects.loc["ViT"]
    assert vit["seeds (model / HA)"] == "2 / 2"
    assert vit["HA − model [95% CI]"].startswith(f"{w.points:+.1f}")
    if w.interval is not None:
        low, high = w.interval
        assert vit["HA − model [95% CI]"] == f"{w.points:+.1f} [{low:+.1f}, {high:+.1f}]"
        assert vit["p"] == f"{w.p:.3f}" and vit["ν"] == f"{w.df:.1f}"
        # SAN's HA side is not saved: a family of one test, whose Holm-adjusted p is its own
        assert vit["p (Holm)"] == f"{w.p:.3f}"
    assert vit["verdict"] == VERDICT_SHORT[w.verdict] and vit["seeds asked"] == "3 per side"
    pair = compare.paired(*(seed_accuracies(seeds, "smoke", n)[0] for n in ("vit", "vit_ha")))
    assert pair.seeds == (0, 1) and vit["paired by seed"] == paired_cell(pair)
    assert effects.loc["SAN pairwise", "p (Holm)"] == "—"
    san = effects.loc["SAN pairwise"]  # HA variant not trained: no comparison, but the model's seeds show
    assert san["verdict"] == "no saved pair" and san["seeds (model / HA)"] == "1 / 0"
    assert san["model acc."] != "—" and san["HA acc."] == "—"
    assert "standard error" not in " ".join(effects.columns)


def test_ha_family_adjusts_over_the_pairs_and_labels_follow_it(params, seeds, monkeypatch):
    """Holm over the pairs given, the family verdict from the adjusted p, and the introduction's labels
    carrying the adjusted p; a pair without its HA side stays out of the family."""
    family = book.ha_family(["vit", "san_pairwise"], params)
    w, adjusted, verdict, pair = family["vit"]
    assert adjusted == pytest.approx(w.p) and family["san_pairwise"] == (None, None, "no interval", None)
    assert verdict == compare.family_verdict(w, adjusted)
    assert pair.seeds == (0, 1)
    label = book.welch_labels(["vit", "san_pairwise"], params)
    assert label == {"vit_ha": f"{w.difference}\nHolm p {adjusted:.2f}"}


def _table3_cells(frame):
    """Table 3 as the book shows it (``results_table``), indexed by experiment."""
    table = book.results_table(frame, "smoke", pairs=True)
    table.index = list(frame["experiment"])
    return table


def test_table3_frame_shows_seed_means_and_measured_wall_times(params, seeds, monkeypatch):
    names = ["vit", "vit_ha", "san_pairwise", "san_pairwise_ha"]
    runs = book.load_all(names, params)
    frame = book.table3_frame(runs, params).set_index("experiment")
    a = list(seed_accuracies(seeds, "smoke", "vit")[0].values())
    assert frame.loc["vit", "seeds"] == 2 and frame.loc["vit", "accuracy"] == pytest.approx(sum(a) / 2)
    cells = _table3_cells(frame.reset_index())
    accuracy = ("test accuracy (%), smoke", "mean ± sd (n)")
    mean, sd = 100 * frame.loc["vit", "accuracy"], 100 * frame.loc["vit", "accuracy_sd"]
    assert cells.loc["vit", accuracy] == f"{mean:.1f}\u00a0±\u00a0{sd:.1f} (2)"  # %, mean ± sd (n seeds)
    assert cells.loc["san_pairwise", accuracy] == f"{100 * frame.loc['san_pairwise', 'accuracy']:.1f} (1)"
    assert cells.loc["san_pairwise_ha", accuracy] == "—"
    assert (cells["wall time, median", "ms"] == NOT_MEASURED).all()  # no timing file yet
    assert "python -m attnlib time --preset smoke" in book.timing_markdown(params)

    monkeypatch.setattr(os, "getloadavg", lambda: (0.1, 0.1, 0.1))  # an idle machine, as the check sees it
    monkeypatch.setattr(timing, "_running_others", lambda: 0)
    report, _ = timing.run("smoke", ["vit", "vit_ha"], results_dir=seeds, warmup=1, reps=2, rounds=1)
    cells = _table3_cells(book.table3_frame(runs, params))
    assert cells.loc["vit", ("wall time, median", "ms")] == f"{report['models']['vit']['median_ms']:.2f}"
    assert (
        cells.loc["vit_ha", ("wall time, median", "HA / model")]
        == f"{report['ratios']['vit_ha']['ratio']:.2f}×"
    )
    assert cells.loc["san_pairwise_ha", ("wall time, median", "ms")] == NOT_MEASURED  # trained or not
    assert book.timing_markdown(params).startswith("Wall times measured together in one process on ")
    (seeds / "timing" / "smoke.json").unlink()


def _bench_report(load, flags=("avx2", "avx512_bf16"), peak=None, peak_shared=None):
    machine = dict(
        device="cpu", cpu="Test CPU", cpu_flags=list(flags), usable_cores=2, torch_threads=1, torch="2.x",
        cpu_capability="AVX512", load_average_start=load,
    )  # fmt: skip
    row = dict(
        dtype="bf16", achieved_gflops=50.0, images_per_s=10.0, model_gflop_per_image=6.0, peak_gflops=100.0,
        utilisation=0.5, model_utilisation=0.6,
    )  # fmt: skip
    report = dict(machine=machine, rows=[row], matmul_peak={"bf16": {"start": {"gflops": peak or 100.0}}})
    if peak_shared is not None:
        report["matmul_peak"]["bf16"]["best"] = peak or 100.0
        report["load"] = {"peak_shared": peak_shared}
    return report


def test_bench_notes_name_the_machine_and_the_peak(tmp_path):
    legacy = book.bench_machine_markdown(_bench_report([3.5, 3.3, 3.2]))  # the cpu.json: load 3–4
    assert escaped("instruction sets: avx2, avx512_bf16") in legacy and "Test CPU" in legacy  # shown as typed
    assert "shared" in legacy and "inflates the utilisations" in legacy and "--peak-only" in legacy
    idle = book.bench_machine_markdown(_bench_report([0.2, 0.2, 0.2], peak_shared=False))
    assert "otherwise idle" in idle and "inflates" not in idle
    avx2 = book.bench_machine_markdown(_bench_report([0.2, 0.2, 0.2], flags=("avx2",), peak_shared=False))
    assert "no bf16 matrix instructions" in avx2 and "trains in fp32" in avx2
    assert escaped("1 torch thread,") in idle and "thread(s)" not in idle
    two = _bench_report([0.2, 0.2, 0.2], peak_shared=False)
    two["machine"]["torch_threads"] = 2
    assert escaped("2 torch threads,") in book.bench_machine_markdown(two)
    # an idle peak read for a report whose own load was not flagged: a sentence of its own, never "start., and"
    unflagged = _bench_report([0.2, 0.2, 0.2], peak_shared=False)
    unflagged["peak_source"] = dict(
        path="results/bench/peak/cpu.json",
        peaks={"bf16": 250.0},
        finished="2026-12-01",
        load={"load_before": 0.1},
    )
    text = book.bench_machine_markdown(unflagged)
    assert "., and" not in text
    assert escaped("at the start.") + " The utilisations divide by the peak" in text


def test_the_ledger_names_models_as_a_reader_does(params):
    """The ledger's paragraphs reach the page as the analysis writes them (no post-processing): no registry
    id is left in them to rename (``make check-book`` fails on a code id in running text)."""
    from attnbook.phrases import display_names

    text = ledger_markdown(book.claims_ledger(params))
    assert book.title("vit") in text and display_names(text) == text


def test_best_attention_is_the_analysis_pick():
    """The book's best attention model is ``stats.best_by_seed_mean``'s: the highest mean among the models
    with the most seeds (a better single run never wins), from per-seed accuracies or the frame's means."""
    import pandas as pd

    frame = pd.DataFrame(
        {
            "experiment": ["vit", "vit_ha", "san_pairwise", "resnet18"],
            "model": [book.title(n) for n in ("vit", "vit_ha", "san_pairwise", "resnet18")],
            "status": "complete",
            "accuracy": [0.40, 0.45, 0.90, 0.70],
            "seeds": [2, 2, 1, 3],
        }
    )
    seeds = {"vit": [0.35, 0.45], "vit_ha": [0.44, 0.46], "san_pairwise": [0.90]}
    assert compare.best_by_seed_mean(seeds) == ("vit_ha", pytest.approx(0.45), 2)
    for best in (book.best_attention(frame, seeds), book.best_attention(frame)):
        assert best["model"] == book.title("vit_ha") and best["accuracy"] == pytest.approx(0.45)
        assert best["seeds"] == 2 and best["resnet"] == 0.70 and best["gap"] == pytest.approx(25.0)
    none = book.best_attention(frame[frame["experiment"] == "resnet18"])
    assert none["model"] is None and none["gap"] is None


def test_ha_cost_numbers_are_the_ranges_of_the_ratios_the_ledger_rows_judge():
    """The chapter's cost numbers are the ranges over the pairs of the ratios HA / model
    (``attnlib.analysis.costs.pair_costs``), the same numbers the ledger's cost rows print."""
    import types

    from attnlib.analysis import claims, costs

    def model(mib, seconds):  # a tenth of the memory held between steps
        return {"peak_mib": 0.9 * mib, "total_mib": mib, "epoch_s": seconds, "batch": 100}

    report = {
        "models": {"vit": model(200, 600), "vit_ha": model(100, 900), "san_pairwise": model(100, 300),
                   "san_pairwise_ha": model(325, 420)},
        "ratios": {"vit_ha": {"memory": 0.5, "time": 1.5}, "san_pairwise_ha": {"memory": 3.25, "time": 1.4}},
        "machine": {"cpu": "Test CPU", "cpu_flags": ["avx2"], "torch": "2.x"},
        "protocol": {"threads": 1},
        "git": {"commit": "abcdef0"},
    }  # fmt: skip
    device = "cpu (1 threads)"
    ev = types.SimpleNamespace(
        train_cost=report,
        timing={},
        wall_times={
            "vit": {0: (2.0, device), 1: (2.0, device)},
            "vit_ha": {0: (3.0, device), 1: (2.0, device)},
        },
        seeds_name=book.title,
    )
    # the runs' ratio of seed means: (3 + 2) / 2 over (2 + 2) / 2 = 1.25
    assert costs.pair_costs(ev) == {
        "san_pairwise": costs.PairCost(memory=3.25, step=1.4),
        "vit": costs.PairCost(memory=0.5, step=1.5, runs=1.25),
    }
    numbers = {"memory": "0.50× to 3.25×", "step": "1.40× to 1.50×", "inference": "1.25×", "held": "10.0%"}
    assert book.ha_cost_numbers(ev) == numbers
    for word in ("memory 0.50×", "memory 3.25×", "time per step 1.40×", "time per step 1.50×"):
        assert word in claims.by_key("ha_train_cost").test(ev)[0]  # the ledger's row prints the same numbers
    assert "the runs' 1.25×" in claims.by_key("ha_inference_time").test(ev)[0]
    # Table 3's timing, where a pair has it, is the inference number (the runs' own only without it)
    ev.timing = {
        "vit_ha": {"ratio": 0.9, "round_ratio_p25": 0.85, "round_ratio_p75": 0.95, "cpu": "Test CPU"}
    }
    assert book.ha_cost_numbers(ev)["inference"] == "0.90×"
    assert "Table 3's timing 0.90×" in claims.by_key("ha_inference_time").test(ev)[0]
    nothing = types.SimpleNamespace(train_cost=None, timing={}, wall_times={})
    assert set(book.ha_cost_numbers(nothing).values()) == {book.NOT_FOUND_CELL}  # nothing measured: "—"


def test_bench_reports_use_the_idle_peak_of_the_same_machine(tmp_path):
    folder = tmp_path / "bench"
    (folder / "peak").mkdir(parents=True)
    (folder / "cpu.json").write_text(json.dumps(_bench_report([3.5, 3.3, 3.2], peak=100.0)))
    idle = dict(
        machine=_bench_report(None)["machine"],
        matmul_peak={"bf16": {"best": 250.0}},
        load={"shared": False, "load_before": [0.1, 0.1, 0.1]},
        finished="2026-12-01",
    )
    (folder / "peak" / "cpu.json").write_text(json.dumps(idle))
    params = book.check_params(results_dir=tmp_path, train_missing=False)
    report = book.bench_reports(params)["cpu"]
    row = report["rows"][0]
    assert row["peak_gflops"] == 250.0 and row["utilisation"] == pytest.approx(50 / 250)
    assert row["model_utilisation"] == pytest.approx(60 / 250)
    text = book.bench_machine_markdown(report)
    assert "idle core" in text and "lower bounds" in text and "results/bench/peak/cpu.json" in text
    idle["load"]["shared"] = True  # a peak measured on shared cores is no better: not used
    (folder / "peak" / "cpu.json").write_text(json.dumps(idle))
    assert book.bench_reports(params)["cpu"]["rows"][0]["peak_gflops"] == 100.0
    idle["load"]["shared"], idle["machine"]["cpu"] = False, "Another CPU"  # another machine: not used
    (folder / "peak" / "cpu.json").write_text(json.dumps(idle))
    assert book.bench_reports(params)["cpu"]["rows"][0]["peak_gflops"] == 100.0


def test_models_are_named_by_their_seed_means(params, seeds):
    """The book names a model by its mean over the saved seeds (seeds_frame): the best attention model, the
    glance figure's points (with the sd over seeds as an error bar) and the HA pairs' differences."""
    import matplotlib

    matplotlib.use("Agg")
    from attnbook import viz

    runs = book.load_all(["vit", "vit_ha", "san_pairwise"], params)
    frame = book.seeds_frame(runs, params).set_index("experiment")
    vit = list(seed_accuracies(seeds, "smoke", "vit")[0].values())
    assert frame.loc["vit", "accuracy"] == pytest.approx(sum(vit) / 2) and frame.loc["vit", "seeds"] == 2
    best = book.best_attention(frame.reset_index())
    most = frame[frame["seeds"] == frame["seeds"].max()]  # never a single run beside means over more seeds
    means = most["accuracy"].astype(float)
    assert best["model"] == book.title(means.idxmax()) and best["accuracy"] == pytest.approx(means.max())
    assert best["seeds"] == 2 and frame.loc["san_pairwise", "seeds"] == 1
    assert best["resnet"] is None and best["gap"] is None  # ResNet18 not saved: no gap, never NaN
    points = book.glance_points(frame.reset_index()).set_index("experiment")
    sd = frame.loc["vit", "accuracy_sd"]
    assert points.loc["vit", "accuracy_sd"] == pytest.approx(sd) and points.loc["vit", "seeds"] == 2
    assert np.isnan(points.loc["san_pairwise", "accuracy_sd"])  # one seed: no bar
    fig = viz.accuracy_vs_params(points.reset_index())
    bars = [c for c in fig.axes[0].containers if type(c).__name__ == "ErrorbarContainer"]
    assert len(bars) == 2  # vit and vit_ha, two seeds each
    pairs = book.ha_pairs(frame.reset_index()).set_index("experiment")
    ha = list(seed_accuracies(seeds, "smoke", "vit_ha")[0].values())
    assert pairs.loc["vit", "gain"] == pytest.approx((sum(ha) / 2 - sum(vit) / 2) * 100)


def test_verdict_boxes_of_neighbouring_points_do_not_overlap():
    """Two HA points close together: the second verdict box moves off the first (viz._spread_boxes) and stays
    on the axes."""
    import matplotlib
    import pandas as pd

    matplotlib.use("Agg")
    from attnbook import viz

    rows = [  # (experiment, params, accuracy, baseline)
        ("vit", 6e5, 0.44, None),
        ("vit_ha", 1.8e5, 0.444, "vit"),
        ("learned_content_16h", 4.5e5, 0.472, None),
        ("learned_content_16h_ha", 1.2e5, 0.46, "learned_content_16h"),
    ]
    points = pd.DataFrame(
        [
            {"experiment": e, "source": "ours", "kind": "measured", "params": p, "accuracy": a, "baseline": b}
            for e, p, a, b in rows
        ]
    )
    points.insert(1, "group", [group(e) for e in points["experiment"]])
    points.insert(2, "label", [short_label(e) for e in points["experiment"]])
    labels = {
        "vit_ha": "+0.7 [-0.2, +1.6]\nHolm p 0.29",
        "learned_content_16h_ha": "-1.2 [-4.0, +1.7]\nHolm p 0.48",
    }
    fig = viz.accuracy_vs_params(points, verdicts=labels)
    ax = fig.axes[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts if t.get_text() in labels.values()]
    assert len(boxes) == 2 and not boxes[0].overlaps(boxes[1])
    assert all(ax.bbox.x0 <= b.x0 and b.x1 <= ax.bbox.x1 for b in boxes)


def test_init_forms_set_the_two_initialisations_side_by_side(tmp_path):
    """One row per initialisation of the 9-head learned-2D pair with content: seeds, accuracies and HA − model
    over every saved seed of each form (Welch), "—" for a side not saved, and the first layer's mean peak
    from initialisation to the end as the run's standard probe holds it."""
    from attnlib.analysis.rules import probe_layers

    trained = {
        "learned_content_9h": (0, 1),
        "learned_content_9h_ha": (0, 1),
        "learned_content_9h_init_official": (0,),
    }
    for name, seeds in trained.items():
        for seed in seeds:
            train_run(name, "smoke", results_dir=tmp_path, seed=seed, progress=False)
    params = book.check_params(preset="smoke", results_dir=tmp_path, train_missing=False)
    table = book.init_forms("learned_content_9h", params)
    assert list(table["initialisation"]) == list(INIT_FORMS)
    re_form, official = table.iloc[0], table.iloc[1]
    a, b = (list(seed_accuracies(tmp_path, "smoke", n)[0].values()) for n in list(trained)[:2])
    assert (
        re_form["seeds (model / HA)"] == "2 / 2" and re_form["HA − model"] == compare.welch(a, b).difference
    )
    assert official["seeds (model / HA)"] == "1 / 0"
    assert official["HA acc. (%)"] == official["HA − model"] == official["layer 1 peak, HA"] == "—"
    assert "%" not in re_form["model acc. (%)"]  # the unit in the header, the number alone in the cell
    name = "learned_content_9h_init_official"
    end, init, _ = probe_layers(book.load_all([name], params)[name], "peak")
    assert init is not None and official["layer 1 peak, model"] == f"{init[0]:.1f} → {end[0]:.1f}"
    assert official["layer 1 peak, model"] != re_form["layer 1 peak, model"]  # the two draws differ at init


def test_ha_by_length_reads_every_seed_and_each_epoch(tmp_path):
    """One row per training length saved on both sides: seeds, HA − model with its Welch interval (None with one
    seed a side), and the per-epoch difference of the seed means from the histories."""
    for name, seeds in {"learned_content_9h": (0, 1), "learned_content_9h_ha": (0, 1)}.items():
        for seed in seeds:
            train_run(name, "smoke", results_dir=tmp_path, seed=seed, progress=False)
    params = book.check_params(preset="smoke", results_dir=tmp_path, train_missing=False)
    rows, curves = book.ha_by_length("learned_content_9h", params, presets=("smoke", "long"))
    assert list(rows["preset"]) == ["smoke"]  # nothing saved at long
    a, b = (
        list(seed_accuracies(tmp_path, "smoke", n)[0].values())
        for n in ("learned_content_9h", "learned_content_9h_ha")
    )
    w = compare.welch(a, b)
    assert rows.iloc[0]["seeds"] == "2 / 2" and rows.iloc[0]["points"] == pytest.approx(w.points)
    assert rows.iloc[0]["interval"] == w.interval and rows.iloc[0]["difference"] == w.difference
    assert rows.iloc[0]["verdict"] == w.verdict != "no interval"
    epochs, gap = curves["smoke"]
    assert list(epochs) == [1] and gap[-1] == pytest.approx(w.points)  # the last epoch is the final accuracy
    rows1, _ = book.ha_by_length("learned_content_9h", params, presets=("smoke",), seeds=(0,))
    assert rows1.iloc[0]["interval"] is None and "[" not in rows1.iloc[0]["difference"]  # no interval in words
    assert rows1.iloc[0]["verdict"] == "no interval"


@pytest.mark.parametrize(
    "points,intervals,reading",
    [
        ([-0.1, 0.5, -0.8], [(-2.8, 2.6), (-1.5, 2.5), None], "no trend toward the [Re] gain"),
        ([-0.1, 2.0, 4.0], [(-2.8, 2.6), (1.0, 5.0), None], "toward the [Re] gain"),
        ([-0.1, 2.5, 1.0], [(-2.8, 2.6), (-1.0, 6.0), None], "inconclusive"),  # 4.64 inside, 0 too
        ([-0.1, 0.5, -0.8], [(-2.8, 2.6), None, None], "not measured"),  # no interval past the budget's
    ],
)
def test_length_reading_follows_the_rule_fixed_before_the_runs(points, intervals, reading):
    import pandas as pd

    rows = pd.DataFrame({"preset": ["budget", "budget30", "long"], "epochs": [12, 30, 60], "seeds": "",
                         "points": points, "interval": intervals})  # fmt: skip
    assert book.length_reading(rows, 4.64) == reading
