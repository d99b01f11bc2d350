"""Curves: the theorem's error against α, losses against steps, training histories, and the per-layer
attention measures of a ``long`` run against the epoch."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from .style import CMAP, GRID_WIDTH, PAGE_WIDTH, _as_numpy, _panel_grid

# ----------------------------------------------------------------------------- curves
#: Marker and line style of each series of ``error_vs_alpha`` and ``loss_curve`` in turn: series that
#: coincide stay distinguishable (a thin dash-dotted line with crosses over a thick one with circles); never
#: dashed nor dotted, the styles of ``error_vs_alpha``'s guide and tolerance lines.
SERIES_STYLES = (
    {"marker": "o", "linestyle": "-", "markersize": 6.5, "linewidth": 2.2},
    {"marker": "x", "linestyle": "-.", "markersize": 5.0, "linewidth": 1.2},
    {"marker": "^", "linestyle": (0, (3, 1, 1, 1, 1, 1)), "markersize": 4.5, "linewidth": 1.2, "mfc": "none"},
    {"marker": "s", "linestyle": "-", "markersize": 4.0, "linewidth": 0.8, "mfc": "none"},
)


def error_vs_alpha(
    alphas,
    errors: Mapping[str, Sequence] | Sequence,
    *,
    title: str | None = None,
    tolerance: float | None = None,
    guide: bool = True,
) -> Figure:
    """Relative error ‖MHSA(X) − Conv(X)‖ / ‖Conv(X)‖ against α (linear α, log error): one line per series,
    each in its own ``SERIES_STYLES`` (a series that coincides with another stays visible under it).

    ``guide`` adds a dashed e^(−α) line through the first series' value at the median α, the rate at
    which the softmax mass off the target key vanishes (the nearest other key is one pixel further).
    """
    series = errors if isinstance(errors, Mapping) else {"": errors}
    a = _as_numpy(alphas)
    fig, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
    for k, (label, err) in enumerate(series.items()):
        style = SERIES_STYLES[k % len(SERIES_STYLES)]
        ax.semilogy(a, _as_numpy(err), label=label or None, zorder=2.2 + 0.1 * k, **style)
    if guide:
        first = _as_numpy(next(iter(series.values())))
        mid = len(a) // 2
        guide_line = first[mid] * np.exp(-(a - a[mid]))
        ax.semilogy(
            a,
            guide_line,
            color="0.5",
            linewidth=1.0,
            linestyle=(0, (6, 3)),
            zorder=1.5,
            label=r"$\propto e^{-\alpha}$",
        )
    if tolerance is not None:
        ax.axhline(tolerance, color="0.3", linestyle=":", linewidth=1.0, label=f"tolerance {tolerance:g}")
    low = min(float(np.min(_as_numpy(e))) for e in series.values())
    ax.set_ylim(max(low / 10, 1e-17), 2.0)
    ax.set_xlabel("α (inverse width of the quadratic encoding, 1/pixel²)")
    ax.set_ylabel("relative error (dimensionless)")
    if title:
        ax.set_title(title)
    ax.legend(frameon=False, fontsize=9)
    return fig


def loss_curve(steps, losses, *, title: str | None = None, y_label: str = "mean squared error") -> Figure:
    """Loss curves against optimisation steps, log-scale y: ``losses`` one sequence (one curve, with
    ``steps`` its steps) or a mapping label → losses (one curve each, in the ``SERIES_STYLES`` in turn
    without markers, and a legend; ``steps`` shared, or a mapping label → steps)."""
    fig, ax = plt.subplots(figsize=(6.4, 3.2), layout="constrained")
    if isinstance(losses, Mapping):
        for k, (label, values) in enumerate(losses.items()):
            x = steps[label] if isinstance(steps, Mapping) else steps
            style = SERIES_STYLES[k % len(SERIES_STYLES)]
            ax.semilogy(
                _as_numpy(x), _as_numpy(values), label=label, linestyle=style["linestyle"], linewidth=1.6
            )
        ax.legend(frameon=False, fontsize=9)
    else:
        ax.semilogy(_as_numpy(steps), _as_numpy(losses))
    ax.set_xlabel("gradient step")
    ax.set_ylabel(y_label)
    if title:
        ax.set_title(title)
    return fig


def step_curves(
    series: Mapping[str, tuple],
    *,
    title: str | None = None,
    y_label: str,
    reference: float | None = None,
    reference_label: str = "",
) -> Figure:
    """Curves against optimisation steps: ``series`` maps a label to (steps, values); ``reference`` draws a
    dotted horizontal line (e.g. uniform attention) labelled ``reference_label``."""
    fig, ax = plt.subplots(figsize=(6.4, 3.2), layout="constrained")
    for label, (steps, values) in series.items():
        ax.plot(_as_numpy(steps), _as_numpy(values), label=label)
    if reference is not None:
        ax.axhline(reference, color="0.3", linestyle=":", linewidth=1.0, label=reference_label or None)
    ax.set_xlabel("gradient step")
    ax.set_ylabel(y_label)
    if title:
        ax.set_title(title)
    ax.legend(frameon=False, fontsize=9)
    return fig


def training_curves(histories: Mapping[str, object], *, title: str | None = None, cols: int = 4) -> Figure:
    """Training curves of several runs, one panel per run: train and test accuracy (%, left axis) and
    train and test loss (right axis) against the epoch.

    histories: run name → DataFrame (``history.csv``) with an ``epoch`` column and any of ``train_acc``,
    ``test_acc`` (fractions), ``train_loss``, ``test_loss``.
    """
    names = list(histories)
    cols = max(1, min(cols, len(names)))
    fig, _, shown = _panel_grid(len(names), cols, lambda cols, rows: (PAGE_WIDTH, 2.5 * rows + 0.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, ax in enumerate(shown):
        h = histories[names[i]]
        epoch = h["epoch"] if "epoch" in h else np.arange(1, len(h) + 1)
        for key, style in (("train_acc", "--"), ("test_acc", "-")):
            if key in h:
                ax.plot(epoch, 100 * np.asarray(h[key], dtype=float), style, color=colors[0], marker=".")
        ax.set_ylim(0, 100)
        ax.set_title("\n".join(textwrap.wrap(str(names[i]), 34)), fontsize=8)  # a display name may be long
        ax.set_xlabel("epoch")
        ax.set_ylabel("accuracy (%)", color=colors[0])
        ax2 = ax.twinx()
        ax2.grid(False)
        losses = []
        for key, style in (("train_loss", "--"), ("test_loss", "-")):
            if key in h:
                losses.append(np.asarray(h[key], dtype=float))
                ax2.plot(epoch, losses[-1], style, color=colors[1], marker=".")
        finite = np.concatenate(losses or [np.zeros(0)])
        finite = finite[np.isfinite(finite) & (finite > 0)]
        log = finite.size > 0 and finite.max() > 100 * finite.min()  # a blow-up would flatten a linear axis
        if log:
            ax2.set_yscale("log")
        ax2.set_ylabel("loss (nats, log scale)" if log else "loss (nats)", color=colors[1])
    handles = [
        plt.Line2D([], [], color=colors[0], linestyle="--", label="train accuracy"),
        plt.Line2D([], [], color=colors[0], linestyle="-", label="test accuracy"),
        plt.Line2D([], [], color=colors[1], linestyle="--", label="train loss"),
        plt.Line2D([], [], color=colors[1], linestyle="-", label="test loss"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=4, frameon=False)
    if title:
        fig.suptitle(title)
    return fig


# ------------------------------------------------------------------ per-layer measures against epochs
#: The per-layer measures of a ``long`` run's history (``attnlib.measures.probe``: columns
#: ``<key>_<layer>``) in the order they are drawn, each with its axis label; "displacement" is the
#: quadratic centres' mean displacement from their initialisation (``centers.npz``, not the history).
LAYER_MEASURES = (
    ("distance", "attended distance (px)"),
    ("peak", "mean peak (× uniform)"),
    ("displacement", "centre displacement (key positions)"),
    ("image_dependence", "image dependence (TV)"),
    ("similarity", "similarity σ to previous layer"),
)


def layer_colours(n: int) -> list:
    """One colour per layer (or application of a shared block), first to last along the book's sequential
    colour map (``CMAP``): early layers dark, late layers light, in every figure alike."""
    cmap = plt.get_cmap(CMAP)
    return [cmap(0.85 * i / max(n - 1, 1)) for i in range(n)]


def _line_unit(run: str) -> str:
    """What one line of a run is: "application" (of the shared block) for an HA run, named with the word
    "HA" ("SA learned 2D, 9 heads, HA"), else "layer"."""
    import re

    return "application" if re.search(r"\bHA\b", run) else "layer"


def layer_series(history, key: str) -> dict[int, np.ndarray]:
    """{layer: values per epoch} of the history's ``<key>_<layer>`` columns."""
    out = {}
    for column in getattr(history, "columns", ()):
        head, _, tail = str(column).rpartition("_")
        if head == key and tail.isdigit():
            out[int(tail)] = np.asarray(history[column], dtype=float)
    return dict(sorted(out.items()))


#: A panel's sentence for a run whose image dependence is 0 at every epoch (no content term).
_POSITIONAL = "0 at every epoch:\nthe same maps for every image\n(positional attention only)"


def _all_zero(lines: dict) -> bool:
    return bool(lines) and all(np.nanmax(np.abs(v)) < 1e-9 for v in lines.values())


def measures_vs_epochs(
    histories: Mapping[str, object],
    *,
    displacements: Mapping[str, np.ndarray] | None = None,
    measures: Sequence[str] | None = None,
    title: str | None = None,
    units: Mapping[str, str] | None = None,
    pixel_size: float | None = None,
) -> Figure:
    """Per-layer attention measures against the epoch: one column per run (a model beside its HA variant),
    one row per measure (shared y axis along a row), one line per layer coloured by ``layer_colours``.

    histories: run name → DataFrame (``history.csv`` of a run that logged measures: ``epoch`` and
    ``distance_<l>``, ``peak_<l>``, ``image_dependence_<l>``, ``similarity_<l>``); displacements: run name →
    (epochs + 1, layers) array of the quadratic centres' mean displacement (row 0: initialisation, epoch 0;
    ``attnlib.measures.centre_displacement``). Rows are the measures of ``LAYER_MEASURES`` (or ``measures``)
    that some run has; a run without one shows "not logged" in that panel, and a run whose image
    dependence is 0 at every epoch (positional attention: the same maps for every image) says so in its
    panel instead of drawing a flat line. ``units``: run name → what a line is ("layer", or "application"
    for an HA run, whose lines are the applications of its shared block); by default "application" for a
    run named with the word "HA", else "layer"; the legend names the lines by it. ``pixel_size``: input
    pixels per key position of the attention grid (4 on an 8×8 grid): the displacements are drawn in input
    pixels, the book's one unit of distance (in key positions without it).
    """
    names = list(histories)
    if not names:
        raise ValueError("measures_vs_epochs: no history given")
    displacements = dict(displacements or {})
    labels = dict(LAYER_MEASURES)
    if pixel_size is not None:
        labels["displacement"] = "centre displacement (px)"
        displacements = {n: np.asarray(d, dtype=float) * pixel_size for n, d in displacements.items()}
    wanted = list(measures) if measures is not None else [k for k, _ in LAYER_MEASURES]
    unknown = [k for k in wanted if k not in labels]
    if unknown:
        raise ValueError(f"measures: got {unknown}; allowed: {list(labels)}")

    def series(name: str, key: str) -> tuple[np.ndarray, dict[int, np.ndarray]]:
        if key == "displacement":
            d = displacements.get(name)
            if d is None:
                return np.zeros(0), {}
            d = np.asarray(d, dtype=float)
            return np.arange(d.shape[0]), {i: d[:, i] for i in range(d.shape[1])}
        h = histories[name]
        epoch = np.asarray(h["epoch"] if "epoch" in h else np.arange(1, len(h) + 1), dtype=float)
        return epoch, layer_series(h, key)

    found = {(n, k): series(n, k) for n in names for k in wanted}  # (epochs, {layer: values})
    rows = [k for k in wanted if any(found[n, k][1] for n in names)]
    if not rows:
        raise ValueError("measures_vs_epochs: no per-layer measure in the histories given")
    layers = max(max(found[n, k][1], default=-1) for n in names for k in rows) + 1
    colours = layer_colours(layers)
    units = {n: (units or {}).get(n) or _line_unit(n) for n in names}
    size = (PAGE_WIDTH if len(names) > 2 else GRID_WIDTH, 1.9 * len(rows) + 1.0)
    shared = dict(sharex="col", sharey="row", squeeze=False, layout="constrained")
    fig, axes = plt.subplots(len(rows), len(names), figsize=size, **shared)
    for r, key in enumerate(rows):
        for c, name in enumerate(names):
            ax = axes[r, c]
            epoch, lines = found[name, key]
            note = _POSITIONAL if key == "image_dependence" and _all_zero(lines) else "not logged"
            lines = {} if note == _POSITIONAL else lines  # positional attention: a sentence, no line at 0
            for layer, values in lines.items():
                style = dict(color=colours[layer], linewidth=1.4, label=f"{units[name]} {layer + 1}")
                ax.plot(epoch, values, "-", **style)
            if not lines:
                kw = dict(ha="center", va="center", color="0.4", fontsize=8, transform=ax.transAxes)
                ax.text(0.5, 0.5, note, **kw)
            if r == 0:
                ax.set_title(name, fontsize=9)
            if c == 0:
                ax.set_ylabel(labels[key], fontsize=8)
            if r == len(rows) - 1:
                ax.set_xlabel("epoch")
    kinds = list(dict.fromkeys(units.values()))
    word = kinds[0] if len(kinds) == 1 else " / ".join(kinds)
    handles = [
        plt.Line2D([], [], color=colours[i], linewidth=2, label=f"{word} {i + 1}") for i in range(layers)
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(layers, 8), frameon=False, fontsize=8)
    if title:
        fig.suptitle(title)
    return fig


def gap_by_length(rows, curves: Mapping[str, tuple], logged: float, band: float) -> Figure:
    """HA − model (points) against training length: each length's per-epoch curve (seed means) and its final
    difference with its 95% Welch interval (a point without an interval where a side has one seed), the
    [Re] logs' difference at 300 epochs as a dashed line and the band of "no trend" around 0."""
    fig, ax = plt.subplots(figsize=(PAGE_WIDTH * 0.75, 3.2), layout="constrained")
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    ax.axhspan(-band, band, color="0.9", zorder=0, label=f"within ±{band:g} points")
    ax.axhline(0, color="0.5", linewidth=0.8)
    ax.axhline(
        logged, color="0.3", linestyle="--", linewidth=1, label=f"[Re] logs, 300 epochs ({logged:+.1f})"
    )
    for i, r in enumerate(rows.itertuples()):
        x, gap = curves[r.preset]
        color = colors[i % len(colors)]
        ax.plot(x, gap, color=color, linewidth=1, alpha=0.6)
        err = None if r.interval is None else [[r.points - r.interval[0]], [r.interval[1] - r.points]]
        ax.errorbar([r.epochs], [r.points], yerr=err, fmt="o", color=color, capsize=4,
                    label=f"{r.epochs} epochs, seeds {r.seeds}")  # fmt: skip
    ax.set_xlabel("epoch")
    ax.set_ylabel("HA − model (points)")
    fig.legend(loc="outside right upper", fontsize=8, frameon=False)
    return fig
