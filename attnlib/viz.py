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

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Ellipse, Rectangle

CMAP = "viridis"
QUERY_COLOR = "#e4572e"
PAGE_WIDTH = 10.0  # inches: the width of a figure that fills the book's text column


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


# ----------------------------------------------------------------------------- attention grids
def attention_grid(
    rows,
    grid: tuple[int, int],
    query: tuple[int, int],
    *,
    title: str,
    layer_names: Sequence[str] | None = None,
    average: bool = True,
    panel: float = 1.05,
) -> Figure:
    """Attention probabilities of one query pixel, layers (rows) × heads (columns).

    rows: (L, heads, N) (or (heads, N) for one layer): the attention of the query over the N = H·W keys.
    ``average`` adds a last column with the mean over heads. Each panel is scaled to its own maximum
    (colour: attention probability, 0 → max); the query pixel is outlined.
    """
    r = _as_numpy(rows)
    r = r[None] if r.ndim == 2 else r
    height, width = (int(g) for g in grid)
    maps = r.reshape(r.shape[0], r.shape[1], height, width)
    xlabel = (
        f"key position on the {height}×{width} grid (query pixel {tuple(int(q) for q in query)} outlined); "
        "colour: attention probability, each panel scaled to its maximum"
    )
    return _panels(
        maps, query, title=title, xlabel=xlabel, layer_names=layer_names, average=average, panel=panel
    )


def _panels(maps, centre, *, title, xlabel, layer_names=None, average=True, panel=1.05) -> Figure:
    """Layers (rows) × heads (columns, plus the mean of heads when ``average``) of 2D maps (L, heads, h, w),
    each panel scaled to its own maximum, with the pixel ``centre`` outlined."""
    n_layers, heads = maps.shape[:2]
    cols = heads + (1 if average else 0)
    scale = min(panel, PAGE_WIDTH / cols)
    fig, axes = plt.subplots(
        n_layers,
        cols,
        figsize=(scale * cols + 0.6, scale * n_layers + 0.9),
        squeeze=False,
        layout="constrained",
    )
    for li in range(n_layers):
        for ci in range(cols):
            ax = axes[li, ci]
            _clean(ax)
            p, label = (
                (maps[li].mean(0), "mean of\nheads") if ci == heads else (maps[li, ci], f"head {ci + 1}")
            )
            ax.imshow(p, cmap=CMAP, vmin=0.0, vmax=max(float(p.max()), 1e-12))
            _mark_query(ax, *centre)
            if li == 0:
                ax.set_title(label, fontsize=9)
            if ci == 0:
                ax.set_ylabel(layer_names[li] if layer_names else f"layer {li + 1}", fontsize=9)
    fig.suptitle(title)
    fig.supxlabel(xlabel, fontsize=9)
    return fig


def offset_grid(
    offsets, *, title: str, radius: int | None = None, layer_names: Sequence[str] | None = None
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
    xlabel = (
        "relative offset δ = key − query (query outlined at the centre); colour: mean attention probability, "
        "each panel scaled to its maximum"
    )
    return _panels(o, (ch, cw), title=title, xlabel=xlabel, layer_names=layer_names)


def token_attention(
    attention: Mapping, *, title: str, query: int = 0, image: int | None = 0, layer_label: str = "layer"
) -> Figure:
    """``attention_grid`` from a saved ``attention.npz`` (``attnlib.results.attention_summary``).

    query: index into the saved fixed query pixels; image: index of a saved test image, or None for the
    average over all the averaged test images (``rows_mean``).
    """
    grid = tuple(int(g) for g in attention["grid"])
    token = int(attention["queries"][query])
    pixel = divmod(token, grid[1])
    rows = attention["rows_mean"][:, :, query] if image is None else attention["rows"][image][:, :, query]
    names = [f"{layer_label} {i + 1}" for i in range(rows.shape[0])]
    return attention_grid(rows, grid, pixel, title=title, layer_names=names)


def window_maps(
    weights: Sequence, query: tuple[float, float], *, title: str, layer_names: Sequence[str] | None = None
) -> Figure:
    """SAN aggregation weights of one query pixel over its K×K window, one panel per layer.

    weights: per layer (K², H, W) (weights averaged over the weight groups); layers may differ in
    resolution, so the query is given as fractions (row, col) of the image and mapped to each grid.
    """
    layers = [_as_numpy(w) for w in weights]
    n = len(layers)
    cols = min(n, 8)
    rows = int(np.ceil(n / cols))
    size = min(1.4, PAGE_WIDTH / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(size * cols + 0.4, size * rows + 1.0), squeeze=False, layout="constrained"
    )
    for li in range(rows * cols):
        ax = axes.flat[li]
        _clean(ax)
        if li >= n:
            ax.set_visible(False)
            continue
        kk, h, w = layers[li].shape
        k = int(round(np.sqrt(kk)))
        i, j = min(int(query[0] * h), h - 1), min(int(query[1] * w), w - 1)
        p = layers[li][:, i, j].reshape(k, k)
        ax.imshow(p, cmap=CMAP, vmin=0.0, vmax=max(float(p.max()), 1e-12))
        _mark_query(ax, k // 2, k // 2)
        name = layer_names[li] if layer_names else f"layer {li + 1}"
        ax.set_title(f"{name}\n{h}×{w} grid, pixel ({i},{j})", fontsize=8)
    fig.suptitle(title)
    fig.supxlabel(
        "K×K window around the query pixel (centre outlined); colour: aggregation weight (mean over weight "
        "groups), each panel scaled to its maximum",
        fontsize=9,
    )
    return fig


def window_means(
    means: Sequence, *, title: str, max_groups: int = 8, layer_names: Sequence[str] | None = None
) -> Figure:
    """SAN aggregation weights averaged over pixels and images: weight groups (rows, with their mean
    last) × layers (columns).

    means: per layer (G, K²). Shows the first ``max_groups`` groups and the mean over all groups.
    """
    layers = [_as_numpy(m) for m in means]
    groups = min(max(m.shape[0] for m in layers), max_groups)
    n_rows, cols = groups + 1, len(layers)
    scale = min(1.05, PAGE_WIDTH / cols)
    fig, axes = plt.subplots(
        n_rows, cols, figsize=(scale * cols + 0.6, scale * n_rows + 0.9), squeeze=False, layout="constrained"
    )
    for li, m in enumerate(layers):
        g, kk = m.shape
        k = int(round(np.sqrt(kk)))
        for ri in range(n_rows):
            ax = axes[ri, li]
            _clean(ax)
            if ri == n_rows - 1:
                p, label = m.mean(0), "mean of groups"
            elif ri < g:
                p, label = m[ri], f"group {ri + 1}"
            else:
                ax.set_visible(False)
                continue
            p = p.reshape(k, k)
            ax.imshow(p, cmap=CMAP, vmin=0.0, vmax=max(float(p.max()), 1e-12))
            _mark_query(ax, k // 2, k // 2)
            if ri == 0:
                ax.set_title(layer_names[li] if layer_names else f"layer {li + 1}", fontsize=9)
            if li == 0:
                ax.set_ylabel(label, fontsize=8)
    fig.suptitle(title)
    fig.supxlabel(
        "K×K window (centre outlined); colour: aggregation weight averaged over pixels and images, "
        "each panel scaled to its maximum",
        fontsize=9,
    )
    return fig


def san_layers(attention: Mapping) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """From a SAN ``attention.npz``: per layer the (n_show, K², H, W) weights and the (G, K²) means."""
    keys = sorted(
        k[: -len("_weights")] for k in attention if k.startswith("layer") and k.endswith("_weights")
    )
    return [attention[f"{k}_weights"] for k in keys], [attention[f"{k}_mean"] for k in keys]


# ----------------------------------------------------------------------------- quadratic heads
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
    title: str,
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
    cols = min(n, 3)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(
        rows, cols, figsize=(3.3 * cols, 3.3 * rows + 0.4), squeeze=False, layout="constrained"
    )
    palette = plt.get_cmap("tab20")
    for li in range(rows * cols):
        ax = axes.flat[li]
        if li >= n:
            ax.set_visible(False)
            continue
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
    fig.suptitle(title)
    return fig


def centre_trajectories(
    trajectory,
    *,
    title: str,
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
    cols = min(n_layers, 3)
    rows = int(np.ceil(n_layers / cols))
    size = 4.2 if n_layers == 1 else 3.3
    fig, axes = plt.subplots(
        rows, cols, figsize=(size * cols + 0.3, size * rows + 0.4), squeeze=False, layout="constrained"
    )
    palette = plt.get_cmap("tab20")
    for li in range(rows * cols):
        ax = axes.flat[li]
        if li >= n_layers:
            ax.set_visible(False)
            continue
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
    fig.suptitle(title)
    return fig


# ----------------------------------------------------------------------------- curves
def error_vs_alpha(
    alphas,
    errors: Mapping[str, Sequence] | Sequence,
    *,
    title: str,
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
    ax.set_title(title)
    ax.legend(frameon=False, fontsize=9)
    return fig


def loss_curve(steps, losses, *, title: str, y_label: str = "mean squared error") -> Figure:
    """One loss curve against optimisation steps, log-scale y."""
    fig, ax = plt.subplots(figsize=(6.4, 3.2), layout="constrained")
    ax.semilogy(_as_numpy(steps), _as_numpy(losses))
    ax.set_xlabel("gradient step")
    ax.set_ylabel(y_label)
    ax.set_title(title)
    return fig


def step_curves(
    series: Mapping[str, tuple],
    *,
    title: str,
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
    ax.set_title(title)
    ax.legend(frameon=False, fontsize=9)
    return fig


def training_curves(histories: Mapping[str, object], *, title: str, cols: int = 4) -> Figure:
    """Training curves of several runs, one panel per run: train and test accuracy (%, left axis) and
    train and test loss (right axis) against the epoch.

    histories: run name → DataFrame (``history.csv``) with an ``epoch`` column and any of ``train_acc``,
    ``test_acc`` (fractions), ``train_loss``, ``test_loss``.
    """
    names = list(histories)
    cols = max(1, min(cols, len(names)))
    rows = int(np.ceil(len(names) / cols))
    fig, axes = plt.subplots(
        rows, cols, figsize=(PAGE_WIDTH, 2.5 * rows + 0.8), squeeze=False, layout="constrained"
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i in range(rows * cols):
        ax = axes.flat[i]
        if i >= len(names):
            ax.set_visible(False)
            continue
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
    fig.suptitle(title)
    return fig
