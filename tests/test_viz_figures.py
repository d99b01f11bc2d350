"""The book's other figures (attnbook.viz.curves, .centres, .glance): coinciding curves stay visible,
legends in mathtext, HA lines named as applications, flat image-dependence panels said in words, quadratic
centres in input pixels with ellipses clipped to the panel, and the introduction's figure with every point
labelled, its labels apart and the Welch difference beside each HA arrow."""

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pandas as pd
import pytest
from matplotlib.patches import Ellipse

from attnbook import viz


def test_coinciding_error_curves_differ_in_marker_and_line_and_the_guide_is_mathtext():
    alphas = np.arange(1.0, 9.0)
    same = np.exp(-alphas)
    fig = viz.error_vs_alpha(alphas, {"3×3": same, "5×5": same.copy()}, tolerance=1e-5)
    ax = fig.axes[0]
    first, second = ax.get_lines()[:2]
    assert first.get_marker() != second.get_marker() and first.get_linestyle() != second.get_linestyle()
    guide, tolerance = ax.get_lines()[2:4]  # dashed and dotted: no series is drawn like them
    assert {guide.get_linestyle(), tolerance.get_linestyle()}.isdisjoint(
        {line.get_linestyle() for line in (first, second)}
    )
    assert second.get_zorder() > first.get_zorder()  # the later series is drawn over the first
    assert first.get_markersize() > second.get_markersize()  # and the first's larger markers show round it
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert r"$\propto e^{-\alpha}$" in labels and not any("^(" in t for t in labels)


def test_loss_curve_draws_every_run_compared():
    steps = np.arange(10)
    fig = viz.loss_curve({"a": steps, "b": steps[:5]}, {"a": np.exp(-steps), "b": np.ones(5)})
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["a", "b"]
    np.testing.assert_array_equal(ax.get_lines()[1].get_xdata(), steps[:5])
    assert len(viz.loss_curve(steps, np.exp(-steps)).axes[0].get_lines()) == 1  # one run: as before


def _history(epochs, layers, positional):
    rows = []
    for e in range(1, epochs + 1):
        row = {"epoch": e}
        for i in range(layers):
            row |= {
                f"distance_{i}": 10.0 + i,
                f"peak_{i}": 2.0,
                f"image_dependence_{i}": 0.0 if positional else 0.1,
            }
        rows.append(row)
    return pd.DataFrame(rows)


def test_measures_name_ha_lines_applications_and_say_a_flat_image_dependence_in_words():
    fig = viz.measures_vs_epochs(
        {"SA learned 2D, 9 heads": _history(3, 2, True), "SA learned 2D, 9 heads, HA": _history(3, 2, False)}
    )
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["layer / application 1", "layer / application 2"]
    axes = np.array(fig.axes).reshape(3, 2)  # distance, peak, image dependence x the two runs
    positional, content = axes[2]
    assert not positional.get_lines() and "the same maps for every image" in positional.texts[0].get_text()
    assert len(content.get_lines()) == 2  # a content model's lines are drawn, at 0.1
    only = viz.measures_vs_epochs({"m, HA": _history(2, 2, False)}, units={"m, HA": "layer"})
    assert [t.get_text() for t in only.legends[0].get_texts()] == ["layer 1", "layer 2"]
    ha = viz.measures_vs_epochs({"m, HA": _history(2, 2, False)})
    assert [t.get_text() for t in ha.legends[0].get_texts()] == ["application 1", "application 2"]


def test_centres_in_input_pixels_and_ellipses_clipped_to_the_panel():
    centres = [np.array([[1.0, -2.0], [0.0, 0.5]])]
    inverse = [np.stack([np.eye(2), np.diag([1.0, 1e-4])])]  # head 2: 100 grid pixels wide along columns
    fig = viz.quadratic_centres(centres, inverse, pixel_size=4.0, unit="input pixels")
    ax = fig.axes[0]
    dots = [line for line in ax.get_lines() if line.get_marker() == "o"]
    np.testing.assert_allclose([(d.get_ydata()[0], d.get_xdata()[0]) for d in dots], centres[0] * 4.0)
    assert ax.get_xlabel() == "column shift δ₂ (input pixels)"
    ellipses = [p for p in ax.patches if isinstance(p, Ellipse)]
    assert all(p.get_clip_on() for p in ellipses)
    edges = [p for p in ellipses if not p.get_fill()]
    # head 1: 1σ = 1 grid pixel = 4 input pixels, inside the panel
    assert edges[0].width == pytest.approx(2 * 4.0) and edges[0].get_linestyle() == "-"
    assert edges[1].get_linestyle() == "--"  # wider than the panel: dashed, and the legend says so
    assert "outside the panel" in fig.legends[0].get_texts()[0].get_text()
    paths = viz.centre_trajectories(np.zeros((2, 1, 3, 2)) + 1.0, pixel_size=4.0, unit="input pixels")
    starts = [line for line in paths.axes[0].get_lines() if line.get_marker() == "o"]
    assert starts[0].get_xdata()[0] == 4.0 and starts[0].get_ydata()[0] == 4.0


def _points():
    rows = [  # (experiment, group, label, source, params, accuracy, sd, seeds, baseline)
        ("resnet18", "ResNet18", "", "ours", 7.0e5, 0.75, np.nan, 1, None),
        ("quadratic_iso_9h", "SA quadratic", "iso 9h", "ours", 2.35e5, 0.489, 0.001, 3, None),
        ("quadratic_aniso_9h", "SA quadratic", "aniso 9h", "ours", 2.36e5, 0.480, 0.008, 3, None),
        ("learned_9h", "SA learned 2D", "9h", "ours", 2.56e5, 0.455, 0.014, 3, None),
        ("quadratic_aniso_16h", "SA quadratic", "aniso 16h", "ours", 3.5e5, 0.484, np.nan, 1, None),
        ("vit", "ViT", "", "ours", 6.6e5, 0.507, 0.002, 3, None),
        ("vit_ha", "ViT", "HA", "ours", 1.7e5, 0.548, 0.001, 3, "vit"),
        ("learned_content_9h", "SA learned 2D + content", "9h", "ours", 5.2e5, 0.519, np.nan, 1, None),
    ]
    columns = [
        "experiment",
        "group",
        "label",
        "source",
        "params",
        "accuracy",
        "accuracy_sd",
        "seeds",
        "baseline",
    ]
    return pd.DataFrame(rows, columns=columns)


def test_glance_labels_every_point_with_its_seeds_apart_from_each_other():
    points = _points()
    fig = viz.accuracy_vs_params(points, verdicts={"vit_ha": "+4.1 [+3.7, +4.5]\nHolm p 0.00"})
    ax = fig.axes[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = {t.get_text(): t for t in ax.texts if t.get_text()}
    expected = {"ResNet18, n=1", "iso 9h, n=3", "aniso 9h, n=3", "9h, n=3", "aniso 16h, n=1", "ViT, n=3"}
    assert expected | {"HA, n=3"} <= set(texts)  # ResNet18 and ViT named by their group
    boxes = {k: t.get_window_extent(renderer) for k, t in texts.items()}
    names = sorted(boxes)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not boxes[a].overlaps(boxes[b]), (a, b)
        assert ax.bbox.x0 <= boxes[a].x0 and boxes[a].x1 <= ax.bbox.x1
    # the Welch box stands by its arrow: nearer the arrow's middle than the HA point
    verdict = texts["+4.1 [+3.7, +4.5]\nHolm p 0.00"]
    middle = ax.transData.transform((np.sqrt(6.6e5 * 1.7e5), (50.7 + 54.8) / 2))
    assert verdict.xy == pytest.approx((np.sqrt(6.6e5 * 1.7e5), (50.7 + 54.8) / 2))
    box = boxes[verdict.get_text()]
    assert np.hypot(box.x0 - middle[0], box.y0 - middle[1]) < 80  # pixels
    bars = [c for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
    assert len(bars) == 5  # the points of 3 seeds: ± one sd; never one for a single seed


def test_centre_displacement_in_input_pixels():
    history = _history(2, 2, False)
    moved = np.array([[0.0, 0.0], [0.5, 1.0], [1.0, 2.0]])  # key positions, epochs 0-2
    fig = viz.measures_vs_epochs({"q": history}, displacements={"q": moved}, pixel_size=4.0)
    row = [a for a in fig.axes if a.get_ylabel().startswith("centre displacement")][0]
    assert row.get_ylabel() == "centre displacement (px)"
    np.testing.assert_allclose(row.get_lines()[1].get_ydata(), moved[:, 1] * 4.0)
    plain = viz.measures_vs_epochs({"q": history}, displacements={"q": moved})
    assert "centre displacement (key positions)" in [a.get_ylabel() for a in plain.axes]
