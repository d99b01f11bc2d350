"""Plotting used by the book's chapters: one seaborn style, numpy in, matplotlib ``Figure`` out.

Conventions (the model contract of CONTRIBUTING.md):
- attention probabilities of paper models and ViT: one array per layer, (heads, N, N) with N = H·W
  tokens in row-major order (token ``i*W + j`` is pixel (i, j)); row q is the distribution of query q;
- SAN aggregation weights: one array per layer, (G, K·K, H, W): the weights of pixel (i, j) over its K×K
  window, tap ``kh*K + kw``;
- shifts δ = key − query, given as (row shift δ₁, column shift δ₂) in pixels of the attention grid.

Every function returns the figure and leaves displaying or saving it to the caller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Ellipse, Rectangle

CMAP = "viridis"
DIVERGING = "RdBu_r"  # for values of both signs (SAN patchwise weights), symmetric around 0
QUERY_COLOR = "#e4572e"
PAGE_WIDTH = 10.0  # inches: the width of a figure that fills the book's text column
#: Width (inches) of the panel grids (attention maps): narrower than PAGE_WIDTH, so that shown at the text
#: column's width their labels stay legible; panels shrink instead.
GRID_WIDTH = 7.5


def set_style() -> None:
    """The one style of the book: seaborn ``whitegrid``, colour-blind palette, fonts legible at page width."""
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook", palette="colorblind", font_scale=0.95)
    plt.rcParams.update(
        {
            "figure.dpi": 110,
            "savefig.dpi": 150,
            "savefig.bbox": "tight",
            "axes.titlesize": 11,
            "axes.titleweight": "bold",
            "figure.titlesize": 13,
            "figure.titleweight": "bold",
            "image.cmap": CMAP,
        }
    )


def _as_numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().float().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def _grid_side(n_tokens: int) -> tuple[int, int]:
    side = int(round(np.sqrt(n_tokens)))
    if side * side != n_tokens:
        raise ValueError(f"cannot infer a square grid from N={n_tokens} tokens; pass grid=(H, W)")
    return side, side


def _mark_query(ax, row: int, col: int, size: float = 1.0) -> None:
    ax.add_patch(
        Rectangle(
            (col - size / 2, row - size / 2), size, size, fill=False, edgecolor=QUERY_COLOR, linewidth=1.6
        )
    )


def _clean(ax) -> None:
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)


# ----------------------------------------------------------------------------- colour scales
def shared_scale(arrays) -> dict:
    """One colour scale for every panel of a figure, so panels compare: ``imshow`` keywords.

    Non-negative values (attention probabilities, softmax weights): ``viridis`` from 0 to the largest value
    of all panels. Values of both signs (SAN's unnormalised patchwise weights): the diverging ``RdBu_r``,
    symmetric around 0.
    """
    values = np.concatenate([_as_numpy(a).ravel() for a in arrays])
    values = values[np.isfinite(values)]
    low, high = (float(values.min()), float(values.max())) if values.size else (0.0, 1.0)
    if low < 0:
        bound = max(abs(low), abs(high), 1e-12)
        return {"cmap": DIVERGING, "vmin": -bound, "vmax": bound}
    return {"cmap": CMAP, "vmin": 0.0, "vmax": max(high, 1e-12)}


def _colorbar(fig, image, axes, label: str, uniform: float | None = None):
    """A colour bar for all ``axes`` (one scale), with the uniform level 1/N marked when given."""
    bar = fig.colorbar(image, ax=axes, shrink=0.9, aspect=30, pad=0.02)
    bar.set_label(label, fontsize=9)
    bar.ax.tick_params(labelsize=8)
    if uniform is not None and image.norm.vmin <= uniform <= image.norm.vmax:
        bar.ax.axhline(uniform, color=QUERY_COLOR, linewidth=1.5)
        bar.ax.text(
            -0.6,
            uniform,
            "uniform",
            color=QUERY_COLOR,
            fontsize=7,
            ha="right",
            va="center",
            transform=bar.ax.get_yaxis_transform(),
        )
    return bar


# ----------------------------------------------------------------------------- attention grids
def _panel_grid(n: int, cols: int, figsize) -> tuple[Figure, np.ndarray, list]:
    """A figure of ``n`` panels in rows of ``cols`` (constrained layout), the spare axes of the last row
    hidden. figsize(cols, rows) -> (width, height) in inches. -> (figure, the axes grid, the n axes)."""
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=figsize(cols, rows), squeeze=False, layout="constrained")
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes, list(axes.flat[:n])


def attention_grid(
    rows,
    grid: tuple[int, int],
    query: tuple[int, int],
    *,
    title: str | None = None,
    layer_names: Sequence[str] | None = None,
    average: bool = True,
    panel: float = 1.05,
) -> Figure:
    """Attention probabilities of one query pixel, layers (rows) × heads (columns).

    rows: (L, heads, N) (or (heads, N) for one layer): the attention of the query over the N = H·W keys.
    ``average`` adds a last column with the mean over heads. Every panel shares one colour scale (0 to the
    largest probability in the figure), shown by a colour bar that marks uniform attention 1/N; the query
    pixel is outlined.
    """
    r = _as_numpy(rows)
    r = r[None] if r.ndim == 2 else r
    height, width = (int(g) for g in grid)
    maps = r.reshape(r.shape[0], r.shape[1], height, width)
    xlabel = (
        f"key position on the {height}×{width} grid (query pixel {tuple(int(q) for q in query)} outlined)"
    )
    return _panels(
        maps,
        query,
        title=title,
        xlabel=xlabel,
        layer_names=layer_names,
        average=average,
        panel=panel,
        label="attention probability",
        uniform=1.0 / (height * width),
    )


def _panels(
    maps,
    centre,
    *,
    title,
    xlabel,
    layer_names=None,
    average=True,
    panel=1.05,
    label="attention probability",
    uniform=None,
) -> Figure:
    """Layers (rows) × heads (columns, plus the mean of heads when ``average``) of 2D maps (L, heads, h, w)
    on one shared colour scale with a colour bar, with the pixel ``centre`` outlined."""
    n_layers, heads = maps.shape[:2]
    cols = heads + (1 if average else 0)
    scale = min(panel, (GRID_WIDTH - 1.4) / cols)
    compact = cols > 10  # 16 heads: number the columns, the x label says they are heads
    fig, axes = plt.subplots(
        n_layers,
        cols,
        figsize=(scale * cols + 1.4, scale * n_layers + 0.9),
        squeeze=False,
        layout="constrained",
    )
    panels = [
        [(maps[li, ci], f"{ci + 1}" if compact else f"head {ci + 1}") for ci in range(heads)]
        for li in range(n_layers)
    ]
    if average:
        for li in range(n_layers):
            panels[li].append((maps[li].mean(0), "mean" if compact else "mean of\nheads"))
    colours = shared_scale([p for row in panels for p, _ in row])
    image = None
    for li, row in enumerate(panels):
        for ci, (p, name) in enumerate(row):
            ax = axes[li, ci]
            _clean(ax)
            image = ax.imshow(p, **colours)
            _mark_query(ax, *centre)
            if li == 0:
                ax.set_title(name, fontsize=9, fontweight="normal")
            if ci == 0:
                row_name = layer_names[li] if layer_names else f"layer {li + 1}"
                # horizontal, so the labels of neighbouring rows never overlap
                ax.set_ylabel(row_name, fontsize=9, rotation=0, ha="right", va="center")
    _colorbar(fig, image, axes, label, uniform)
    if title:
        fig.suptitle(title)
    fig.supxlabel(("columns: heads (mean of heads last); " if compact else "") + xlabel, fontsize=9)
    return fig


def offset_grid(
    offsets, *, title: str | None = None, radius: int | None = None, layer_names: Sequence[str] | None = None
) -> Figure:
    """Attention by relative offset δ = key − query, averaged over query pixels (and images), layers × heads.

    offsets: (L, heads, 2H−1, 2W−1), entry [δ₁ + H − 1, δ₂ + W − 1]. ``radius`` crops to |δ| ≤ radius.
    """
    o = _as_numpy(offsets)
    h2, w2 = o.shape[-2:]
    ch, cw = h2 // 2, w2 // 2
    if radius is not None:
        o = o[..., max(ch - radius, 0) : ch + radius + 1, max(cw - radius, 0) : cw + radius + 1]
        ch, cw = min(radius, ch), min(radius, cw)
    xlabel = "relative offset δ = key − query (query outlined at the centre)"
    return _panels(
        o, (ch, cw), title=title, xlabel=xlabel, layer_names=layer_names, label="mean attention probability"
    )


def token_attention(
    attention: Mapping,
    *,
    title: str | None = None,
    query: int = 0,
    image: int | None = 0,
    layer_label: str = "layer",
) -> Figure:
    """``attention_grid`` from a saved ``attention.npz`` (``attnlib.snapshots.attention_summary``).

    query: index into the saved fixed query pixels; image: index of a saved test image, or None for the
    average over all the averaged test images (``rows_mean``).
    """
    grid = tuple(int(g) for g in attention["grid"])
    token = int(attention["queries"][query])
    pixel = divmod(token, grid[1])
    rows = attention["rows_mean"][:, :, query] if image is None else attention["rows"][image][:, :, query]
    names = [f"{layer_label} {i + 1}" for i in range(rows.shape[0])]
    return attention_grid(rows, grid, pixel, title=title, layer_names=names)


#: Panels per row of the SAN figures (one per layer): four keep each panel's two-line title apart.
SAN_COLUMNS = 4


def window_maps(
    weights: Sequence,
    query: tuple[float, float],
    *,
    title: str | None = None,
    layer_names: Sequence[str] | None = None,
) -> Figure:
    """SAN aggregation weights of one query pixel over its K×K window, one panel per layer, on one colour
    scale (a diverging one when weights take both signs, as patchwise SAN's unnormalised weights do).

    weights: per layer (K², H, W) (weights averaged over the weight groups); layers may differ in
    resolution, so the query is given as fractions (row, col) of the image and mapped to each grid.
    """
    layers = [_as_numpy(w) for w in weights]
    n = len(layers)
    size = min(1.9, (GRID_WIDTH - 1.2) / min(n, SAN_COLUMNS))
    fig, axes, shown = _panel_grid(
        n, min(n, SAN_COLUMNS), lambda cols, rows: (size * cols + 1.2, (size + 0.45) * rows + 0.6)
    )
    panels = []
    for layer in layers:
        kk, h, w = layer.shape
        k = int(round(np.sqrt(kk)))
        i, j = min(int(query[0] * h), h - 1), min(int(query[1] * w), w - 1)
        panels.append((layer[:, i, j].reshape(k, k), k, h, w, i, j))
    colours = shared_scale([p[0] for p in panels])
    image = None
    for ax in axes.flat:
        _clean(ax)
    for li, ax in enumerate(shown):
        p, k, h, w, i, j = panels[li]
        image = ax.imshow(p, **colours)
        _mark_query(ax, k // 2, k // 2)
        name = layer_names[li] if layer_names else f"layer {li + 1}"
        ax.set_title(name, fontsize=9, fontweight="normal")
        ax.set_xlabel(f"{h}×{w} grid, pixel ({i}, {j})", fontsize=8)
    _colorbar(fig, image, axes, "aggregation weight")
    if title:
        fig.suptitle(title)
    fig.supxlabel("K×K window around the query pixel (centre outlined); mean over weight groups", fontsize=9)
    return fig


def window_means(
    means: Sequence,
    *,
    title: str | None = None,
    max_groups: int = 8,
    layer_names: Sequence[str] | None = None,
) -> Figure:
    """SAN aggregation weights averaged over pixels and images: weight groups (rows, with their mean
    last) × layers (columns), on one colour scale with a colour bar.

    means: per layer (G, K²). Shows the first ``max_groups`` groups and the mean over all groups.
    """
    layers = [_as_numpy(m) for m in means]
    groups = min(max(m.shape[0] for m in layers), max_groups)
    n_rows, cols = groups + 1, len(layers)
    scale = min(1.05, (GRID_WIDTH - 1.4) / cols)
    fig, axes = plt.subplots(
        n_rows, cols, figsize=(scale * cols + 1.6, scale * n_rows + 0.9), squeeze=False, layout="constrained"
    )
    cells = {}
    for li, m in enumerate(layers):
        g, kk = m.shape
        k = int(round(np.sqrt(kk)))
        for ri in range(n_rows):
            if ri == n_rows - 1:
                cells[ri, li] = (m.mean(0).reshape(k, k), "mean of groups", k)
            elif ri < g:
                cells[ri, li] = (m[ri].reshape(k, k), f"group {ri + 1}", k)
    colours = shared_scale([c[0] for c in cells.values()])
    names = list(layer_names) if layer_names else [f"layer {li + 1}" for li in range(cols)]
    compact = cols > 4  # numbered columns (a long name over each would run into the next)
    image = None
    for li in range(cols):
        for ri in range(n_rows):
            ax = axes[ri, li]
            _clean(ax)
            if ri == 0:
                ax.set_title(
                    names[li].split(" ")[-1] if compact else names[li], fontsize=8, fontweight="normal"
                )
            if li == 0:
                label = "mean of groups" if ri == n_rows - 1 else f"group {ri + 1}"
                ax.set_ylabel(label, fontsize=8, rotation=0, ha="right", va="center")
            if (ri, li) not in cells:  # this layer has fewer groups: an empty cell, its row label kept
                ax.set_frame_on(False)
                continue
            p, _, k = cells[ri, li]
            image = ax.imshow(p, **colours)
            _mark_query(ax, k // 2, k // 2)
    _colorbar(fig, image, axes, "aggregation weight (mean over pixels and images)")
    if title:
        fig.suptitle(title)
    unit = names[0].rsplit(" ", 1)[0] if compact else ""
    columns = f"columns: {unit}s 1–{cols}; " if compact else ""
    fig.supxlabel(f"{columns}K×K window (centre outlined)", fontsize=9)
    return fig


def san_layers(attention: Mapping) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """From a SAN ``attention.npz``: per layer the (n_show, K², H, W) weights and the (G, K²) means."""
    keys = sorted(
        k[: -len("_weights")] for k in attention if k.startswith("layer") and k.endswith("_weights")
    )
    return [attention[f"{k}_weights"] for k in keys], [attention[f"{k}_mean"] for k in keys]


def placeholder(text: str) -> Figure:
    """A small empty figure saying ``text``: where a numbered figure has no data (a run not yet trained)."""
    fig, ax = plt.subplots(figsize=(6.4, 1.2), layout="constrained")
    _clean(ax)
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=11, color="0.35", transform=ax.transAxes)
    return fig


# ----------------------------------------------------------------------------- quadratic heads
def _layer_columns(n: int) -> int:
    """Panels per row for one panel per layer: up to four in a row, rows of three for 6 or 9 layers."""
    return 3 if n > 4 and n % 3 == 0 else min(n, 4)


def _ellipse(ax, centre, inv_cov, color, nsigma: float = 1.0) -> None:
    """Contour of exp(−½ δᵀΣ⁻¹δ) at ``nsigma`` standard deviations, in (column, row) plot coordinates."""
    cov = np.linalg.pinv(inv_cov)
    vals, vecs = np.linalg.eigh(cov)
    vals = np.clip(vals, 0.0, None)
    if not np.all(np.isfinite(vals)) or vals.max() > 1e4:
        return
    # eigenvector (row, col) -> plot angle in (x=col, y=row) coordinates
    angle = np.degrees(np.arctan2(vecs[0, 1], vecs[1, 1]))
    ax.add_patch(
        Ellipse(
            (centre[1], centre[0]),
            2 * nsigma * np.sqrt(vals[1]),
            2 * nsigma * np.sqrt(vals[0]),
            angle=angle,
            fill=False,
            edgecolor=color,
            linewidth=1.0,
            alpha=0.8,
        )
    )


def _shift_axes(ax, radius: float) -> None:
    ax.set_xlim(-radius, radius)
    ax.set_ylim(radius, -radius)  # row shift grows downwards, as in an image
    ax.set_aspect("equal")
    ax.axhline(0, color="0.6", linewidth=0.6)
    ax.axvline(0, color="0.6", linewidth=0.6)
    ax.plot([0], [0], marker="s", color=QUERY_COLOR, markersize=6, linestyle="none")


def quadratic_centres(
    centres: Sequence,
    inverse_covariances: Sequence | None = None,
    *,
    title: str | None = None,
    radius: float | None = None,
    layer_names: Sequence[str] | None = None,
) -> Figure:
    """Attention centres Δ^(h) of every head, one panel per layer, with 1σ contours of each Gaussian.

    centres: per layer (heads, 2) as (row shift, column shift); inverse_covariances: per layer
    (heads, 2, 2) or None. The query pixel sits at the origin (square).
    """
    centres = [_as_numpy(c) for c in centres]
    invs = [_as_numpy(s) for s in inverse_covariances] if inverse_covariances is not None else None
    radius = radius or max(3.0, float(np.ceil(max(np.abs(c).max() for c in centres) + 1)))
    n = len(centres)
    fig, _, shown = _panel_grid(n, _layer_columns(n), lambda cols, rows: (2.7 * cols, 2.8 * rows + 0.4))
    palette = plt.get_cmap("tab20")
    for li, ax in enumerate(shown):
        _shift_axes(ax, radius)
        for h, c in enumerate(centres[li]):
            color = palette(h % 20)
            if invs is not None:
                _ellipse(ax, c, invs[li][h], color)
            ax.plot(c[1], c[0], "o", color=color, markersize=5)
            ax.annotate(str(h + 1), (c[1], c[0]), textcoords="offset points", xytext=(3, 3), fontsize=7)
        ax.set_title(layer_names[li] if layer_names else f"layer {li + 1}")
        ax.set_xlabel("column shift δ₂ (pixels)")
        ax.set_ylabel("row shift δ₁ (pixels)")
    if title:
        fig.suptitle(title)
    return fig


def centre_trajectories(
    trajectory,
    *,
    title: str | None = None,
    targets=None,
    layer_names: Sequence[str] | None = None,
    x_label: str = "epoch",
    x_values=None,
) -> Figure:
    """How the attention centres move during training.

    trajectory: (steps, layers, heads, 2) or (steps, heads, 2) for one layer, as (row, column) shifts.
    Each head draws a line from its initial centre (hollow circle) to its final one (filled); ``targets``
    (M, 2) marks points the centres should reach (e.g. a convolution's kernel grid) with crosses.
    ``x_values`` (steps,): the epoch or step of each row (default 0, 1, ...), for the legend.
    """
    t = _as_numpy(trajectory)
    if t.ndim == 3:
        t = t[:, None]
    steps, n_layers, heads, _ = t.shape
    x_values = np.arange(steps) if x_values is None else _as_numpy(x_values)
    radius = max(3.0, float(np.ceil(np.abs(t).max() + 0.5)))
    cols = _layer_columns(n_layers)
    size = 4.2 if n_layers == 1 else (3.3 if cols < 4 else 2.7)
    fig, _, shown = _panel_grid(n_layers, cols, lambda cols, rows: (size * cols + 0.3, size * rows + 0.4))
    palette = plt.get_cmap("tab20")
    for li, ax in enumerate(shown):
        _shift_axes(ax, radius)
        if targets is not None:
            tg = _as_numpy(targets)
            ax.plot(tg[:, 1], tg[:, 0], "x", color="0.2", markersize=8, label="target")
        for h in range(heads):
            color = palette(h % 20)
            path = t[:, li, h]
            ax.plot(path[:, 1], path[:, 0], "-", color=color, linewidth=1.0, alpha=0.8)
            ax.plot(path[0, 1], path[0, 0], "o", mfc="none", color=color, markersize=5)
            ax.plot(path[-1, 1], path[-1, 0], "o", color=color, markersize=5)
        ax.set_title(layer_names[li] if layer_names else (f"layer {li + 1}" if n_layers > 1 else ""))
        ax.set_xlabel("column shift δ₂ (pixels)")
        ax.set_ylabel("row shift δ₁ (pixels)")
    handles = [
        plt.Line2D(
            [], [], marker="o", mfc="none", color="0.3", linestyle="none", label=f"start ({x_label} 0)"
        ),
        plt.Line2D(
            [], [], marker="o", color="0.3", linestyle="none", label=f"end ({x_label} {x_values[-1]:g})"
        ),
    ]
    if targets is not None:
        handles.append(plt.Line2D([], [], marker="x", color="0.2", linestyle="none", label="target"))
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
    if title:
        fig.suptitle(title)
    return fig


# ----------------------------------------------------------------------------- curves
def error_vs_alpha(
    alphas,
    errors: Mapping[str, Sequence] | Sequence,
    *,
    title: str | None = None,
    tolerance: float | None = None,
    guide: bool = True,
) -> Figure:
    """Relative error ‖MHSA(X) − Conv(X)‖ / ‖Conv(X)‖ against α (linear α, log error): one line per series.

    ``guide`` adds a dashed e^(−α) line through the first series' value at the median α, the rate at
    which the softmax mass off the target key vanishes (the nearest other key is one pixel further).
    """
    series = errors if isinstance(errors, Mapping) else {"": errors}
    a = _as_numpy(alphas)
    fig, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
    for label, err in series.items():
        ax.semilogy(a, _as_numpy(err), marker="o", markersize=3.5, label=label or None)
    if guide:
        first = _as_numpy(next(iter(series.values())))
        mid = len(a) // 2
        ax.semilogy(a, first[mid] * np.exp(-(a - a[mid])), "--", color="0.5", linewidth=1.0, label="∝ e^(−α)")
    if tolerance is not None:
        ax.axhline(tolerance, color="0.3", linestyle=":", linewidth=1.0, label=f"{tolerance:g}")
    low = min(float(np.min(_as_numpy(e))) for e in series.values())
    ax.set_ylim(max(low / 10, 1e-17), 2.0)
    ax.set_xlabel("α (inverse width of the quadratic encoding, 1/pixel²)")
    ax.set_ylabel("relative error (dimensionless)")
    if title:
        ax.set_title(title)
    ax.legend(frameon=False, fontsize=9)
    return fig


def loss_curve(steps, losses, *, title: str | None = None, y_label: str = "mean squared error") -> Figure:
    """One loss curve against optimisation steps, log-scale y."""
    fig, ax = plt.subplots(figsize=(6.4, 3.2), layout="constrained")
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
        ax.set_title(names[i], fontsize=9)
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
    ("peak", "peak (× uniform)"),
    ("displacement", "centre displacement (key positions)"),
    ("image_dependence", "image dependence (TV)"),
    ("similarity", "similarity σ to previous layer"),
)


def layer_colours(n: int) -> list:
    """One colour per layer (or application of a shared block), first to last along the book's sequential
    colour map (``CMAP``): early layers dark, late layers light, in every figure alike."""
    cmap = plt.get_cmap(CMAP)
    return [cmap(0.85 * i / max(n - 1, 1)) for i in range(n)]


def layer_series(history, key: str) -> dict[int, np.ndarray]:
    """{layer: values per epoch} of the history's ``<key>_<layer>`` columns."""
    out = {}
    for column in getattr(history, "columns", ()):
        head, _, tail = str(column).rpartition("_")
        if head == key and tail.isdigit():
            out[int(tail)] = np.asarray(history[column], dtype=float)
    return dict(sorted(out.items()))


def measures_vs_epochs(
    histories: Mapping[str, object],
    *,
    displacements: Mapping[str, np.ndarray] | None = None,
    measures: Sequence[str] | None = None,
    title: str | None = None,
) -> Figure:
    """Per-layer attention measures against the epoch: one column per run (a model beside its HA variant),
    one row per measure (shared y axis along a row), one line per layer coloured by ``layer_colours``.

    histories: run name → DataFrame (``history.csv`` of a run that logged measures: ``epoch`` and
    ``distance_<l>``, ``peak_<l>``, ``image_dependence_<l>``, ``similarity_<l>``); displacements: run name →
    (epochs + 1, layers) array of the quadratic centres' mean displacement (row 0: initialisation, epoch 0;
    ``attnlib.measures.centre_displacement``). Rows are the measures of ``LAYER_MEASURES`` (or ``measures``)
    that some run has; a run without one shows "not logged" in that panel.
    """
    names = list(histories)
    if not names:
        raise ValueError("measures_vs_epochs: no history given")
    displacements = dict(displacements or {})
    labels = dict(LAYER_MEASURES)
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
    fig, axes = plt.subplots(
        len(rows),
        len(names),
        figsize=(PAGE_WIDTH if len(names) > 2 else GRID_WIDTH, 1.9 * len(rows) + 1.0),
        sharex="col",
        sharey="row",
        squeeze=False,
        layout="constrained",
    )
    for r, key in enumerate(rows):
        for c, name in enumerate(names):
            ax = axes[r, c]
            epoch, lines = found[name, key]
            for layer, values in lines.items():
                ax.plot(epoch, values, "-", color=colours[layer], linewidth=1.4, label=f"layer {layer + 1}")
            if not lines:
                ax.text(0.5, 0.5, "not logged", ha="center", va="center", color="0.5", transform=ax.transAxes)
            if r == 0:
                ax.set_title(name, fontsize=9)
            if c == 0:
                ax.set_ylabel(labels[key], fontsize=8)
            if r == len(rows) - 1:
                ax.set_xlabel("epoch")
    handles = [
        plt.Line2D([], [], color=colours[i], linewidth=2, label=f"layer {i + 1}") for i in range(layers)
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(layers, 8), frameon=False, fontsize=8)
    if title:
        fig.suptitle(title)
    return fig


# ----------------------------------------------------------------------------- results at a glance
#: Markers of the literature sources in ``accuracy_vs_params`` (hollow; ours are filled circles).
LITERATURE_MARKERS = ("s", "D", "^", "v")
#: Palette entries of the groups in order (seaborn "colorblind": grey first, for the convolutional
#: baseline, then blue, green, vermilion, purple, brown, pink...): neighbours never both orange.
GROUP_COLOURS = (7, 0, 2, 3, 4, 5, 6, 9, 8, 1)
#: Where a point's label may go, in points from the point, tried in order until it overlaps nothing.
LABEL_SPOTS = (
    (5, 3, "left"),
    (5, -10, "left"),
    (-5, 3, "right"),
    (-5, -10, "right"),
    (0, 7, "center"),
    (0, -15, "center"),
)
#: Pixels kept free around an arrow (its head is about this wide) when a label is placed.
ARROW_MARGIN = 4


def _place_labels(ax, items, fontsize: float = 7, avoid=(), lines=()) -> None:
    """Write each (x, y, text) next to its point where it overlaps no label written before nor a point nor
    an artist of ``avoid`` (texts already placed) nor a line of ``lines`` (((x0, y0), (x1, y1)) in data
    coordinates: the arrows, heads included, with a margin of ``ARROW_MARGIN`` pixels); greedy, first free
    spot of ``LABEL_SPOTS``; the first spot when none is free."""
    fig = ax.figure
    fig.canvas.draw()  # lay the figure out first (constrained layout): positions are final
    renderer = fig.canvas.get_renderer()
    points = [ax.transData.transform((x, y)) for x, y, _ in items]
    taken = [matplotlib.transforms.Bbox.from_extents(px - 4, py - 4, px + 4, py + 4) for px, py in points]
    taken += [a.get_window_extent(renderer) for a in avoid]
    paths = [matplotlib.path.Path(ax.transData.transform(np.asarray(line, float))) for line in lines]

    def crowded(box) -> bool:
        if any(box.overlaps(t) for t in taken):
            return True
        padded = box.padded(ARROW_MARGIN)
        return any(path.intersects_bbox(padded, filled=False) for path in paths)

    for x, y, text in items:
        for k, (dx, dy, ha) in enumerate(LABEL_SPOTS):
            label = ax.annotate(
                text,
                (x, y),
                textcoords="offset points",
                xytext=(dx, dy),
                fontsize=fontsize,
                color="0.25",
                ha=ha,
            )
            box = label.get_window_extent(renderer)
            if not crowded(box) or k == len(LABEL_SPOTS) - 1:
                if crowded(box):
                    label.remove()
                    label = ax.annotate(
                        text,
                        (x, y),
                        textcoords="offset points",
                        xytext=LABEL_SPOTS[0][:2],
                        fontsize=fontsize,
                        color="0.25",
                        ha=LABEL_SPOTS[0][2],
                    )
                    box = label.get_window_extent(renderer)
                taken.append(box)
                break
            label.remove()


def accuracy_vs_params(
    points,
    *,
    title: str | None = None,
    source_labels: Mapping[str, str] | None = None,
    verdicts: Mapping[str, str] | None = None,
) -> Figure:
    """Test accuracy against parameter count, one point per model and source, an arrow from each model to
    its HA variant (within one source).

    points: a DataFrame with ``experiment``, ``group`` (one colour each), ``label`` (written next to the
    point), ``source`` ("ours" is drawn filled, every other source hollow, one marker each), ``params``,
    ``accuracy`` (fraction; our points: the mean over seeds), optional ``accuracy_sd`` (fraction: our points
    get an error bar of ± one sd over seeds where it is finite) and ``baseline`` (the experiment an HA
    variant is compared with, else None).
    ``source_labels``: how the legend names each source. ``verdicts``: {experiment: short text} written
    under our point of that experiment (e.g. an HA variant's Welch result against its model, from
    ``attnbook.welch_labels``; none are drawn when None); the variants' labels are placed around them.
    """
    source_labels = dict(source_labels or {})
    groups = list(dict.fromkeys(points["group"]))
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    order = [i for i in GROUP_COLOURS if i < len(palette)] or list(range(len(palette)))
    colours = {g: palette[order[i % len(order)]] for i, g in enumerate(groups)}
    sources = list(dict.fromkeys(points["source"]))
    others = [s for s in sources if s != "ours"]
    markers = {
        "ours": "o",
        **{s: LITERATURE_MARKERS[i % len(LITERATURE_MARKERS)] for i, s in enumerate(others)},
    }
    fig, ax = plt.subplots(figsize=(6.8, 4.8), layout="constrained")  # about the column's width
    ax.set_xscale("log")
    where = {(r.experiment, r.source): (r.params, r.accuracy * 100) for r in points.itertuples()}
    arrows = []  # (start, end): the labels keep off them
    for r in points.itertuples():  # arrows first, under the points
        if r.baseline is None or not isinstance(r.baseline, str) or (r.baseline, r.source) not in where:
            continue
        start, end = where[(r.baseline, r.source)], (r.params, r.accuracy * 100)
        arrows.append((start, end))
        ax.annotate(
            "",
            xy=end,
            xytext=start,
            arrowprops={
                "arrowstyle": "-|>",
                "color": colours[r.group],
                "linewidth": 1.1,
                "linestyle": "-" if r.source == "ours" else "--",
                "shrinkA": 5,
                "shrinkB": 5,
            },
        )
    written = []
    for r in points.itertuples():
        filled = r.source == "ours"
        sd = getattr(r, "accuracy_sd", float("nan"))
        if filled and np.isfinite(sd):  # ± one sd over seeds around the mean
            bar = {"color": colours[r.group], "capsize": 2.5, "zorder": 2.5}
            ax.errorbar(r.params, r.accuracy * 100, yerr=sd * 100, **bar)
        ax.plot(
            r.params,
            r.accuracy * 100,
            markers[r.source],
            markersize=7,
            color=colours[r.group],
            mfc=colours[r.group] if filled else "white",
            mew=1.4,
            linestyle="none",
            zorder=3,
        )
        if verdicts and filled and r.experiment in verdicts:
            written.append(
                ax.annotate(
                    verdicts[r.experiment],
                    (r.params, r.accuracy * 100),
                    textcoords="offset points",
                    xytext=(0, -7),
                    va="top",
                    fontsize=7,
                    ha="center",
                    color="0.1",
                    bbox={
                        "boxstyle": "round,pad=0.2",
                        "facecolor": "white",
                        "edgecolor": colours[r.group],
                        "linewidth": 1.0,
                        "alpha": 0.9,
                    },
                    zorder=4,
                )
            )
    ax.set_xlabel("trainable parameters (log scale)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_xlim(points["params"].min() / 1.6, points["params"].max() * 1.6)
    ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:.0f}"))
    low = float(points["accuracy"].min() * 100) if len(points) else 0.0
    ax.set_ylim(max(0.0, np.floor(low / 10) * 10 - (4 if verdicts else 2)), 100)  # room for the labels
    family = [plt.Line2D([], [], marker="o", color=colours[g], linestyle="none", label=g) for g in groups]
    kinds = [
        plt.Line2D(
            [],
            [],
            marker=markers[s],
            color="0.3",
            mfc="0.3" if s == "ours" else "white",
            mew=1.4,
            linestyle="none",
            label=source_labels.get(s, s),
        )
        for s in sources
    ]
    kinds.append(
        plt.Line2D(
            [],
            [],
            color="0.3",
            marker=r"$\rightarrow$",
            markersize=12,
            linestyle="none",
            label="model → its HA variant",
        )
    )
    first = ax.legend(
        handles=family, loc="upper left", fontsize=8, title="model", title_fontsize=8, frameon=True
    )
    ax.add_artist(first)
    ax.legend(handles=kinds, loc="lower right", fontsize=8, frameon=True)
    if title:
        ax.set_title(title)
    labelled = [(r.params, r.accuracy * 100, r.label) for r in points.itertuples() if r.label]
    _spread_boxes(ax, written, [(r.params, r.accuracy * 100) for r in points.itertuples()])
    _place_labels(ax, labelled, avoid=written, lines=arrows)  # last: the axes limits and legends are final
    return fig


#: Where a verdict box may stand around its point, in order of preference: (dx, dy) offset points, va, ha.
BOX_SPOTS = ((0, -7, "top", "center"), (0, 7, "bottom", "center"), (8, -5, "top", "left"),
             (-8, -5, "top", "right"), (8, 5, "bottom", "left"), (-8, 5, "bottom", "right"))  # fmt: skip
BOX_PAD = 4  # pixels around a verdict box's text: its frame


def _spread_boxes(ax, boxes, points) -> None:
    """Move each annotation of ``boxes`` (drawn under its point) to the spot of ``BOX_SPOTS`` where its frame
    overlaps least (by area; the first such spot) the boxes placed before it and the points of ``points``
    ((x, y) in data coordinates) other than its own, an area outside the axes counting four times. Greedy,
    in the order given."""
    if not boxes:
        return
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    dots = [ax.transData.transform(p) for p in points]
    dots = [matplotlib.transforms.Bbox.from_extents(x - 4, y - 4, x + 4, y + 4) for x, y in dots]

    def overlap(a, b) -> float:
        w = min(a.x1, b.x1) - max(a.x0, b.x0)
        h = min(a.y1, b.y1) - max(a.y0, b.y0)
        return max(w, 0.0) * max(h, 0.0)

    def put(box, spot):
        dx, dy, va, ha = spot
        box.xyann = (dx, dy)
        box.set_verticalalignment(va)
        box.set_horizontalalignment(ha)
        return box.get_window_extent(renderer).padded(BOX_PAD)

    placed = []
    for box in boxes:
        own = ax.transData.transform(box.xy)
        others = [d for d in dots if not d.contains(*own)]
        scores = []
        for spot in BOX_SPOTS:
            extent = put(box, spot)
            outside = extent.width * extent.height - overlap(extent, ax.bbox)  # off the axes: worse
            hidden = sum(overlap(extent, d) for d in others)
            scores.append(sum(overlap(extent, t) for t in placed) + hidden + 4 * outside)
        placed.append(put(box, BOX_SPOTS[scores.index(min(scores))]))
