"""The long preset's runs in the book: the claims ledger takes its evidence from them where they are
saved (and says so), and `viz.measures_vs_epochs` draws their per-layer measures against the epoch.

The long protocol (60 epochs of CIFAR-10) is replaced by a smoke-sized one here (2 epochs on synthetic
images, measures of 16 probe images logged every epoch): what is tested is where the evidence comes from."""

import dataclasses
from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd
import pytest

from attnbook import viz
from attnbook.phrases import markdown_table
from attnlib import experiments
from attnlib.analysis import claims, rules
from attnlib.lab.run import train_run

matplotlib.use("Agg")


@pytest.fixture
def tiny_long(monkeypatch):
    """`long` trains the smoke models for 2 epochs, logging the per-layer measures every epoch."""
    smoke = experiments.PRESET_TABLE["smoke"]
    tiny = {
        k: dataclasses.replace(p, probe_images=16, train=dataclasses.replace(p.train, epochs=2))
        for k, p in smoke.items()
    }
    monkeypatch.setitem(experiments.PRESET_TABLE, "long", tiny)
    monkeypatch.setitem(experiments.MODELS_OF, "long", "smoke")


@pytest.fixture(scope="module")
def smoke_learned(tmp_path_factory):
    """learned_9h trained at the smoke preset (the quick grid of this test)."""
    root = tmp_path_factory.mktemp("results")
    train_run("learned_9h", "smoke", results_dir=root, progress=False)
    return root


def _copy(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_ledger_without_long_runs_is_the_presets_own(smoke_learned, tiny_long):
    alone = claims.ledger(claims.gather(smoke_learned, "smoke", prefer="smoke"))
    ev = claims.gather(smoke_learned, "smoke", prefer="long")
    assert ev.presets == {}
    pd.testing.assert_frame_equal(claims.ledger(ev), alone)
    assert not alone["value"].str.contains("(long)", regex=False).any()
    # budget prefers long by default; other presets prefer nothing
    assert claims.PREFERRED == {"budget": "long"}


def test_a_saved_long_run_becomes_the_evidence(smoke_learned, tiny_long, tmp_path, monkeypatch):
    root = _copy(smoke_learned, tmp_path / "results")
    before = claims.gather(root, "smoke", prefer="long")
    quick = rules.layer_profile(before.runs["learned_9h"])[0]["peak"]  # from attention.npz
    run = train_run("learned_9h", "long", results_dir=root, progress=False)
    after = claims.gather(root, "smoke", prefer="long")
    assert after.presets == {"learned_9h": "long"}
    assert after.runs["learned_9h"].path == run.path and after.accuracies["learned_9h"] == [run.test_accuracy]
    longer = float(run.history.iloc[-1]["peak_0"])  # the long run's last logged epoch
    assert rules.layer_profile(after.runs["learned_9h"])[0]["peak"] == longer != quick
    row = lambda ev: claims.ledger(ev).set_index("claim").loc["learned_shifts"]  # noqa: E731
    # the value reads each run's standard probe: the long run's end is its last logged epoch's measure
    (end, *_), (init, *_), _ = rules.probe_layers(after.runs["learned_9h"], "peak")
    assert end == pytest.approx(longer, rel=1e-6)
    assert row(after)["value"] == (
        f"SA learned 2D, 9 heads (long): first layer {longer:.2f}× uniform, {init:.2f}× at initialisation"
    )
    assert row(before)["value"].startswith("SA learned 2D, 9 heads: first layer ")
    # the rule's threshold between the two values (runs without a probe: their history or attention.npz,
    # initialisation a fresh model's, here below both): the verdict follows the source of the evidence
    for ev in (before, after):
        ev.runs["learned_9h"].probe = None
    monkeypatch.setattr(rules, "initial_peaks", lambda name, preset: [0.0])
    shifts = claims.by_key("learned_shifts").params
    monkeypatch.setitem(shifts, "local_peak", (quick + longer) / 2)
    monkeypatch.setitem(shifts, "flat_peak", 0.0)
    verdicts = {row(before)["verdict"], row(after)["verdict"]}
    assert verdicts == {rules.REPRODUCED, rules.INCONCLUSIVE}
    assert (row(after)["verdict"] == rules.REPRODUCED) == (longer > quick)
    # the claims that do not use learned_9h keep their smoke evidence (quadratic_vs_learned compares its seeds)
    uses = ["learned_shifts", "quadratic_vs_learned"]
    unchanged = claims.ledger(before).set_index("claim").drop(index=uses)
    pd.testing.assert_frame_equal(claims.ledger(after).set_index("claim").drop(index=uses), unchanged)


def test_a_model_and_its_ha_variant_move_together():
    ev = claims.Evidence("budget", presets={"vit": "long", "vit_ha": "long"})
    assert ev.name("vit") == "ViT (long)" and ev.name("resnet18") == "ResNet18"  # display names
    assert ev.preset_of("vit_ha") == "long" and ev.preset_of("learned_9h") == "budget"


def test_resnet_is_compared_within_its_preset():
    run = lambda acc: type("R", (), {"test_accuracy": acc})()  # noqa: E731
    ev = claims.Evidence(
        "budget",
        runs={"resnet18": run(0.80), "learned_9h": run(0.79), "quadratic_iso_9h": run(0.70)},
        presets={"resnet18": "long", "learned_9h": "long"},
    )
    value, verdict = claims.by_key("near_resnet").test(ev)
    assert "SA learned 2D, 9 heads (long)" in value and verdict == rules.REPRODUCED
    ev.presets.pop("learned_9h")  # only quadratic_iso_9h's budget run against a long ResNet: not compared
    assert claims.by_key("near_resnet").test(ev)[1] == claims.NOT_MEASURED


# ------------------------------------------------------------------------------------ the figure
def _history(epochs, layers, offset=0.0):
    rows = []
    for e in range(1, epochs + 1):
        row = {"epoch": e, "test_acc": 0.1 * e}
        for i in range(layers):
            row |= {
                f"distance_{i}": offset + e + 10 * i,
                f"peak_{i}": 2.0 + i,
                f"image_dependence_{i}": 0.01 * e,
            }
            if i:
                row[f"similarity_{i}"] = 0.5 + 0.1 * i
        rows.append(row)
    return pd.DataFrame(rows)


def test_measure_curves_draw_one_panel_per_measure_and_a_line_per_layer():
    model, ha = _history(5, 3), _history(4, 3, offset=100)
    moved = np.array([[0, 0, 0], [0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])
    fig = viz.measures_vs_epochs({"model": model, "model HA": ha}, displacements={"model": moved})
    axes = np.array(fig.axes[: 5 * 2]).reshape(5, 2)  # measures x runs
    labels = [ax.get_ylabel() for ax in axes[:, 0]]
    assert labels == [label for _, label in viz.LAYER_MEASURES]
    assert [ax.get_title() for ax in axes[0]] == ["model", "model HA"]
    distance = axes[0, 1].get_lines()
    assert len(distance) == 3
    np.testing.assert_array_equal(distance[2].get_xdata(), [1, 2, 3, 4])
    np.testing.assert_array_equal(distance[2].get_ydata(), ha["distance_2"])
    colours = viz.layer_colours(3)
    assert [line.get_color() for line in distance] == colours
    np.testing.assert_array_equal(axes[2, 0].get_lines()[1].get_ydata(), moved[:, 1])
    np.testing.assert_array_equal(axes[2, 0].get_lines()[1].get_xdata(), [0, 1, 2])
    assert not axes[2, 1].get_lines() and axes[2, 1].texts[0].get_text() == "not logged"
    assert len(axes[4, 0].get_lines()) == 2  # similarity from the second layer on
    only = viz.measures_vs_epochs({"m": model}, measures=["peak"])
    assert len(only.axes) == 1 and only.axes[0].get_ylabel() == dict(viz.LAYER_MEASURES)["peak"]
    with pytest.raises(ValueError, match="measures"):
        viz.measures_vs_epochs({"m": model}, measures=["nonsense"])
    with pytest.raises(ValueError, match="no per-layer measure"):
        viz.measures_vs_epochs({"m": pd.DataFrame({"epoch": [1], "test_acc": [0.1]})})


def test_measure_curves_of_a_saved_long_run(tiny_long, tmp_path):
    run = train_run("quadratic_iso_9h", "long", results_dir=tmp_path, progress=False)
    from attnlib.measures import centre_displacement, logged_centres

    moved = centre_displacement(logged_centres(run)).numpy()
    fig = viz.measures_vs_epochs({"q": run.history}, displacements={"q": moved})
    layers = len(viz.layer_series(run.history, "distance"))
    assert layers > 1 and len(fig.axes[0].get_lines()) == layers
    np.testing.assert_allclose(fig.axes[0].get_lines()[-1].get_ydata(), run.history[f"distance_{layers - 1}"])
    assert moved.shape == (len(run.history) + 1, layers)


# ------------------------------------------------------------------- the introduction's Welch labels
def test_welch_labels_under_the_ha_points(tmp_path):
    import matplotlib.transforms

    import attnbook as book
    from attnlib.analysis import stats as compare
    from attnlib.lab.run import train_run
    from attnlib.results.tables import frame

    for seed in (0, 1):
        train_run("vit", "smoke", results_dir=tmp_path, seed=seed, progress=False)
    train_run("vit_ha", "smoke", results_dir=tmp_path, progress=False)
    params = book.check_params(preset="smoke", results_dir=str(tmp_path), train_missing=False)
    labels = book.welch_labels(["vit", "san_pairwise"], params)
    a, b = book.seed_accuracies("vit", params), book.seed_accuracies("vit_ha", params)
    assert len(a) == 2 and len(b) == 1
    assert labels == {"vit_ha": f"{compare.welch(a, b).points:+.1f} (n = 2/1)"}  # SAN: not saved
    train_run("vit_ha", "smoke", results_dir=tmp_path, seed=1, progress=False)
    w = compare.welch(a, book.seed_accuracies("vit_ha", params))
    low, high = w.interval
    expected = f"{w.points:+.1f} [{low:+.1f}, {high:+.1f}]\nHolm p {w.p:.2f}"  # a family of one: p itself
    assert book.welch_labels(["vit"], params) == {"vit_ha": expected}
    # drawn under the point, and no variant's label is written over it
    runs = book.load_all(["vit", "vit_ha"], params)
    points = book.glance_points(frame(runs))
    fig = viz.accuracy_vs_params(points, verdicts=book.welch_labels(["vit"], params))
    ax = fig.axes[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = {t.get_text(): t.get_window_extent(renderer) for t in ax.texts if t.get_text()}
    box = texts.pop(book.welch_labels(["vit"], params)["vit_ha"])
    assert isinstance(box, matplotlib.transforms.Bbox)
    assert not any(box.overlaps(other) for other in texts.values())


def test_chapter_figure_or_one_note(tiny_long, tmp_path, monkeypatch):
    """Without long runs the chapter shows one note naming the command, no figure; with one, the
    figures whose runs are saved (a model beside its HA variant), and nothing for the others."""
    import attnbook as book
    from attnbook import display

    shown, notes = [], []
    monkeypatch.setattr(
        display, "show", lambda fig, name=None, caption=None, also=(): shown.append((fig, name, caption))
    )
    monkeypatch.setattr(display, "note", lambda text, kind="note": notes.append(text))
    params = book.check_params(preset="smoke", results_dir=str(tmp_path), train_missing=False)
    figures = {"fig-a": (("vit", "vit_ha"), "ViT and HA."), "fig-b": (("learned_9h",), "Learned.")}
    assert book.show_measure_curves(figures, params) == 0
    assert not shown and len(notes) == 1
    assert "--preset long" in notes[0] and "`vit_ha`" in notes[0] and "`learned_9h`" in notes[0]
    run = train_run("vit_ha", "long", results_dir=tmp_path, progress=False)
    assert book.show_measure_curves(figures, params) == 1
    ((fig, name, caption),) = shown
    assert (
        name == "fig-a" and "not yet trained" not in caption.lower()
    )  # a missing run: a note, not the caption
    assert notes[-1] == "Not drawn, as no 60-epoch run of them is saved: ViT."
    assert [ax.get_title() for ax in fig.axes if ax.get_title()] == [book.title("vit_ha")]
    np.testing.assert_allclose(fig.axes[0].get_lines()[0].get_ydata(), run.history["distance_0"])


def test_ha_effects_split_keeps_every_column():
    import attnbook as book

    effects = pd.DataFrame(
        [
            {
                "model": "ViT",
                "seeds (model / HA)": "3 / 3",
                "model acc.": "47.8 ± 0.3 %",
                "HA acc.": "49.0 ± 1.0 %",
                "HA − model [95% CI]": "+1.2 [−3.0, +5.4]",
                "p (Holm)": "0.420",
                "ν": "3.1",
                "p": "0.140",
                "verdict": "inconclusive",
                "paired by seed": "+1.0, p 0.200 (3 seeds)",
                "seeds asked": "5 per side",
                "[Re] log": "+5.0",
                "same sign as [Re]": "yes",
            }
        ]
    )
    main, details = book.ha_effects_split(effects)
    assert len(main.columns) == 7 and list(details.columns) == [
        "model",
        "ν",
        "p",
        "paired by seed",
        "seeds asked",
        "[Re] log",
        "same sign as [Re]",
    ]
    shown = {str(v).replace("\u00a0", " ") for v in main.iloc[0]} | {str(v) for v in details.iloc[0]}
    assert {v.removesuffix(" %") for v in effects.iloc[0]} <= shown  # every value is on the page or folded
    assert main.iloc[0][("test accuracy (%)", "HA")] == "49.0\u00a0±\u00a01.0"  # never broken inside
    assert main.iloc[0][("", "Δ [95% CI]")] == "+1.2 [−3.0,\u00a0+5.4]"  # wraps before the interval only
    missing = effects.assign(**{"HA acc.": "—"})
    assert book.ha_effects_split(missing)[0].iloc[0][("test accuracy (%)", "HA")] == "—"
    md = markdown_table(details).splitlines()
    assert (
        md[0].replace("\\", "")
        == "| model | ν | p | paired by seed | seeds asked | [Re] log | same sign as [Re] |"
        and md[2].replace("\\", "")
        == "| ViT | 3.1 | 0.140 | +1.0, p 0.200 (3 seeds) | 5 per side | +5.0 | yes |"
    )


def test_a_comparison_over_seeds_stays_where_the_seeds_are(monkeypatch):
    """One long seed per side gives the pair's maps, not its Welch interval: the accuracies stay at
    the ledger's preset while it has more seeds (MIN_SEEDS or as many as the ledger's), and the value
    says where they come from."""
    run = lambda: type("R", (), {"test_accuracy": 0.5})()  # noqa: E731
    seeds = {
        ("budget", "vit"): [0.40, 0.41, 0.42],
        ("budget", "vit_ha"): [0.50, 0.51, 0.52],
        ("long", "vit"): [0.60],
        ("long", "vit_ha"): [0.55],
    }

    def saved(results_dir, name, preset, seeds_, data):
        found = seeds[preset, name] if (preset, name) in seeds else []
        return (run() if found else None), list(found), {}, {}

    monkeypatch.setattr(claims, "_saved", saved)
    ev = claims.gather("unused", "budget")
    assert ev.presets == {"vit": "long", "vit_ha": "long"} and ev.seed_presets == {}
    assert ev.accuracies["vit"] == [0.40, 0.41, 0.42]
    gain = claims.by_key("ha_gain").test(ev)[0]
    assert "ViT: +10.0" in gain and "(n = 3/3, Holm p" in gain and "ViT (long)" not in gain
    # three long seeds per side: the comparison moves too, and says so
    seeds["long", "vit"] += [0.61, 0.62]
    seeds["long", "vit_ha"] += [0.56, 0.57]
    ev = claims.gather("unused", "budget")
    assert ev.seed_presets == {"vit": "long", "vit_ha": "long"}
    gain = claims.by_key("ha_gain").test(ev)[0]
    assert "ViT (long): -5.0" in gain and "(n = 3/3, Holm p" in gain


def test_measure_endpoints_give_each_layers_first_and_last_epoch():
    from attnbook.ledger import measure_endpoints

    table = measure_endpoints({"a": _history(5, 3), "b": _history(4, 2, offset=0.25)})
    assert table[["model", "measure"]].values.tolist() == [
        ["a", "peak (× uniform)"],
        ["a", "distance (px)"],
        ["b", "peak (× uniform)"],
        ["b", "distance (px)"],
    ]
    a_distance = table.iloc[1]
    assert a_distance["layer 1"] == "1.0 → 5.0" and a_distance["layer 3"] == "21.0 → 25.0"
    assert table.iloc[2]["layer 2"] == "3.00 → 3.00" and table.iloc[3]["layer 3"] == ""  # b has 2 layers
    assert table.iloc[3]["layer 1"] == "1.2 → 4.2"


def test_long_run_numbers_give_each_layers_last_peak_and_the_flat_layers():
    from attnbook import long_run_numbers

    run = lambda history: type("R", (), {"history": history, "test_accuracy": 0.5})()  # noqa: E731
    sharp = _history(5, 3)  # peaks 2, 3, 4 in every epoch
    assert long_run_numbers(run(sharp)) == {
        "epochs": "5", "accuracy": "50.0%", "peaks": "2.00, 3.00 and 4.00", "flat": "0", "layers": "3"
    }  # fmt: skip
    flat = sharp.assign(peak_0=1.01, peak_1=[1.0, 1.0, 1.0, 1.0, 1.2])  # layer 2 passes 1.1 once: not flat
    numbers = long_run_numbers(run(flat))
    assert numbers["flat"] == "1" and numbers["peaks"] == "1.01, 1.20 and 4.00"
    assert set(long_run_numbers(None).values()) == {"—"}  # not saved: the table's mark, never a sentence


def test_centre_numbers_give_each_layers_displacement_and_spread_in_input_pixels():
    from attnbook import centre_numbers

    start = np.array([[[0.0, 0.0], [2.0, 0.0]], [[0.0, 0.0], [0.0, 4.0]]])  # 2 layers, 2 heads
    step = np.array([[[1.0, 0.0], [1.0, 0.0]], [[0.0, 0.0], [0.0, 2.0]]])
    fields = {"test_accuracy": 0.5, "attention": {"grid": [8, 8]}}
    run = lambda *epochs: type("R", (), {"centers": {"centers": np.stack(epochs)}, **fields})()  # noqa: E731
    # layer 1: both heads move 1 (to 1, 0 and 3, 0: spread stays 1); layer 2: heads move 0 and 2 (spread 2 -> 3);
    # a token of the 8 x 8 grid spans 4 input pixels
    numbers = centre_numbers(run(start, start + step / 2, start + step), run(start, start + step / 2))
    assert numbers == {
        "epochs": "2",
        "accuracy": "50.0%",
        "moved": "4.0 and 4.0",
        "short_moved": "2.0 and 2.0",
        "short_epochs": "1",
        "spread_start": "4.0 and 8.0",
        "spread_end": "4.0 and 12.0",
    }
    assert set(centre_numbers(None).values()) == {"—"}
    assert centre_numbers(run(start, start + step))["short_moved"] == "—"


def test_appendix_draws_the_maps_of_each_saved_long_run(tiny_long, tmp_path, monkeypatch):
    """Each saved long run with attention maps gets its two figures, labelled and captioned with the
    preset and its epochs; a run without maps (ResNet18) or not saved gets none; at the long preset itself
    nothing is drawn twice."""
    import attnbook as book
    from attnbook import display

    shown = []
    monkeypatch.setattr(
        display,
        "show",
        lambda fig, name=None, caption=None, also=(), folded=None: shown.append((name, caption)),
    )
    notes = []
    monkeypatch.setattr(display, "note", lambda text, kind="note": notes.append(text))
    params = book.check_params(preset="smoke", results_dir=str(tmp_path), train_missing=False)
    names = ["learned_9h", "resnet18", "vit"]
    assert book.show_measured_attention(names, params) == [] and not shown
    for name in ("learned_9h", "resnet18"):
        train_run(name, "long", results_dir=tmp_path, progress=False)
    assert book.show_measured_attention(names, params) == ["learned_9h"]
    # learned_9h has no content term and, after two tiny epochs, near-uniform maps: one figure, each layer's
    # sharpest head, stands for every head, the image and the mean (shown once, labelled both ways: `also`)
    assert [n for n, _ in shown] == ["fig-learned_9h-long-one"]
    assert "the same for every test image" in shown[0][1] and "near-uniform" in shown[0][1]
    assert all(c.startswith(f"{book.title('learned_9h')} (long preset, 2 epochs): ") for _, c in shown)
    at_long = dataclasses.replace(params, preset="long")
    assert book.show_measured_attention(names, at_long) == []
    assert len(shown) == 1
    # another label (the HA chapter's), and a reference back to it instead of the same figures again
    assert book.show_measured_attention(names, params, names={"learned_9h": "fig-elsewhere"}) == [
        "learned_9h"
    ]
    assert [n for n, _ in shown[1:]] == ["fig-elsewhere-one"]
    notes.clear()
    back = {"learned_9h": ("fig-elsewhere", "chapter 4")}
    assert book.show_measured_attention(names, params, shown=back) == ["learned_9h"] and len(shown) == 2
    assert len(notes) == 1 and "(long preset, 2 epochs)" in notes[0]
    # no content term: one figure stands for the image and the mean, and the note names it once
    assert notes[0].endswith(
        "are {numref}`fig-elsewhere-one` (the same for every test image) in chapter 4; they are not repeated here."
    )
    content = SimpleNamespace(
        attention={"rows": np.ones((2, 1, 1, 1, 4)), "rows_mean": np.ones((1, 1, 1, 4))}, config={}
    )
    content.attention["rows"][1, ..., 0] = 2.0  # the second image attends differently
    notes.clear()
    book.show_attention(content, "learned_content_9h", params, shown_as="fig-there", where="chapter 4")
    assert notes[0].endswith(
        "are {numref}`fig-there-one` (one test image) and {numref}`fig-there-mean` (mean over test images) in "
        "chapter 4; they are not repeated here."
    )


def test_a_chapter_leaves_the_other_heads_to_the_appendix(tmp_path, monkeypatch):
    """A chapter's maps (``others="appendix"``) show heads 1-4 and the mean, their caption pointing to the
    other heads' figures; the appendix (``shown_as``) draws those under the chapter's label, once each."""
    import attnbook as book
    from attnbook import display

    shown, notes = [], []
    monkeypatch.setattr(
        display,
        "show",
        lambda fig, name=None, caption=None, also=(), folded=None: shown.append((name, caption, folded)),
    )
    monkeypatch.setattr(display, "note", lambda text, kind="note": notes.append(text))
    rows = np.random.default_rng(0).dirichlet(
        np.full(16, 0.2), size=(2, 2, 9, 1)
    )  # (images, layers, heads, q, N)
    attention = {"rows": rows, "rows_mean": rows.mean(0), "grid": (4, 4), "queries": np.array([5])}
    run = SimpleNamespace(attention=attention, config={"model": {}}, provenance={"epochs_trained": 1})
    params = book.check_params(preset="smoke", results_dir=str(tmp_path), train_missing=False)
    book.show_attention(run, "learned_content_9h", params, name="fig-ch", others="appendix")
    assert [(n, f) for n, _, f in shown] == [("fig-ch-one", None), ("fig-ch-mean", None)]
    assert "heads 5–9: {numref}`fig-ch-one-more`, in the appendix" in shown[0][1]
    shown.clear()
    book.show_attention(run, "learned_content_9h", params, shown_as="fig-ch", where="chapter 2")
    assert [(n, f) for n, _, f in shown] == [("fig-ch-one-more", None), ("fig-ch-mean-more", None)]
    assert notes[-1].endswith("in chapter 2; their heads 5–9 follow.")
    shown.clear()
    book.show_attention(run, "learned_content_9h", params, name="fig-own")  # the appendix's own model: folded
    assert [n for n, _, f in shown if f] == ["fig-own-one-more", "fig-own-mean-more"]
    wide = []  # 16 heads: the other 12 in one row per layer, a figure printed the column's full width
    monkeypatch.setattr(display, "show", lambda fig, name=None, caption=None, **kw: wide.append((name, kw)))
    rows16 = np.random.default_rng(1).dirichlet(np.full(16, 0.2), size=(2, 2, 16, 1))
    run.attention = {"rows": rows16, "rows_mean": rows16.mean(0), "grid": (4, 4), "queries": np.array([5])}
    book.show_attention(run, "learned_content_16h", params, name="fig-16", mean=False)
    assert [(n, kw.get("figclass")) for n, kw in wide] == [
        ("fig-16-one", None),
        ("fig-16-one-more", "wide-maps"),
    ]


def test_the_saved_long_runs_trained_every_epoch():
    """Every saved `long` run in results/ (those moved from the former `converge` preset included, issue 29)
    trained all LONG_EPOCHS epochs and is intact; no `converge` run is left (ResNet18's, which the plateau
    rule stopped at epoch 50, was retrained as a `long` run)."""
    import json
    from pathlib import Path

    from attnlib.results.load import inspect_run

    results = Path(__file__).resolve().parent.parent / "results"
    for path in (p.parent for p in results.glob("*/long*/metrics.json")):
        metrics = json.loads((path / "metrics.json").read_text())
        assert metrics["provenance"]["epochs_trained"] == experiments.LONG_EPOCHS == 60, path
        assert inspect_run(path)[0] == "complete", path
    assert not list(results.glob("*/converge*"))
