"""Attention maps: layers × heads grids over the key grid (paper models, ViT) and SAN's K×K windows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from .style import GRID_WIDTH, _as_numpy, _clean, _colorbar, _mark_query, _panel_grid, shared_scale


# ----------------------------------------------------------------------------- attention grids
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
