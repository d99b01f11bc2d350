"""Attention maps: layers × heads grids over the key grid (paper models, ViT) and SAN's K×K windows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from .style import (
    GRID_WIDTH,
    MAX_COLUMNS,
    PANEL,
    _as_numpy,
    _clean,
    _colorbar,
    _mark_query,
    _panel_grid,
    multiple_scale,
    shared_scale,
)


# ----------------------------------------------------------------------------- attention grids
def attention_grid(
    rows,
    grid: tuple[int, int],
    query: tuple[int, int],
    *,
    title: str | None = None,
    layer_names: Sequence[str] | None = None,
    average: bool = True,
    heads: Sequence[int] | None = None,
    columns: int = MAX_COLUMNS,
) -> Figure:
    """Attention probabilities of one query pixel, layers (rows) × heads (columns).

    rows: (L, heads, N) (or (heads, N) for one layer): the attention of the query over the N = H·W keys.
    ``heads``: the heads shown (indices, default all), ``average`` adds the mean over all heads after
    them. Each map is coloured by its multiple of uniform attention, p·N, on one log scale centred on 1
    from 1/N to N (``multiple_scale``): every figure of attention over N keys shares it. The query pixel
    is outlined. A layer of more than ``columns`` maps wraps onto several rows.
    """
    r = _as_numpy(rows)
    r = r[None] if r.ndim == 2 else r
    height, width = (int(g) for g in grid)
    maps = r.reshape(r.shape[0], r.shape[1], height, width)
    kw = dict(layer_names=layer_names, average=average, heads=heads, columns=columns)
    return _panels(maps, query, title=title, uniform=1.0 / (height * width), **_token_axes(grid, query), **kw)


def _token_axes(grid, query) -> dict:
    """The axis and colour-bar labels of a map over the tokens of ``grid`` for the query token ``query``."""
    (height, width), query = (int(g) for g in grid), tuple(int(q) for q in query)
    return {
        "xlabel": f"key position on the {height}×{width} grid (query token {query} outlined)",
        "label": f"multiple of uniform attention 1/{height * width} (log scale)",
    }


def _layer_panels(maps, heads, average) -> list[list[tuple[np.ndarray, str]]]:
    """Per layer the (map, name) of the ``heads`` shown, then the mean over all heads when ``average``."""
    out = []
    for layer in maps:
        row = [(layer[h], f"head {h + 1}") for h in heads]
        if average:
            row.append((layer.mean(0), "mean of heads"))
        out.append(row)
    return out


def _arrange(layers, layer_names, most: int = MAX_COLUMNS) -> tuple[list[list], list[str], list[str] | None]:
    """The cells of a figure from per-layer (map, name) lists: -> (rows of (map, title) cells or None,
    the row labels, the column titles or None when every cell has its own title). One row per layer when
    a layer's maps fit ``most`` columns, titled by column; else each layer wraps onto rows of equal length
    (its name beside its first row), every map titled."""
    per_layer = len(layers[0])
    names = list(layer_names) if layer_names else [f"layer {li + 1}" for li in range(len(layers))]
    if per_layer <= most:
        return [list(row) for row in layers], names, [name for _, name in layers[0]]
    wraps = int(np.ceil(per_layer / most))
    cols = int(np.ceil(per_layer / wraps))
    rows, labels = [], []
    for li, layer in enumerate(layers):
        for w in range(wraps):
            chunk = list(layer[w * cols : (w + 1) * cols])
            rows.append(chunk + [None] * (cols - len(chunk)))
            labels.append(names[li] if w == 0 else "")
    return rows, labels, None


def _panels(maps, centre, *, title, xlabel, label, uniform, layer_names, average, heads, columns) -> Figure:
    """Layers × (the ``heads`` shown, plus the mean of all heads when ``average``) of 2D maps
    (L, heads, h, w) as multiples of ``uniform`` on the one colour scale of every attention figure
    (``multiple_scale`` from 1/N to N, N = 1/uniform: the same range in every figure) with one colour bar
    under the maps, the pixel ``centre`` outlined. Maps of ``PANEL`` inches, at most ``columns`` in a row
    (``_arrange``)."""
    n_layers, n_heads = maps.shape[:2]
    heads = list(range(n_heads)) if heads is None else [int(h) for h in heads]
    if not heads and not average or any(not 0 <= h < n_heads for h in heads):
        raise ValueError(f"heads: got {heads}; allowed: indices 0 to {n_heads - 1} (some, or the mean)")
    rows, labels, columns = _arrange(_layer_panels(maps, heads, average), layer_names, columns)
    return _draw(rows, labels, columns, centre, title=title, xlabel=xlabel, label=label, uniform=uniform)


def _draw(rows, labels, columns, centre, *, title, xlabel, label, uniform) -> Figure:
    """The figure of ``_panels``: rows of (map, title) cells (None: empty) on the one colour range of every
    map over N = 1/uniform keys, 1/N to N (``multiple_scale``)."""
    _, colours = multiple_scale([], uniform, bound=1.0 / uniform)
    cols = len(rows[0])
    fig, axes = plt.subplots(
        len(rows),
        cols,
        figsize=(PANEL * cols + 1.6, (PANEL + (0.0 if columns else 0.2)) * len(rows) + 0.9),
        squeeze=False,
        layout="constrained",
    )
    image = None
    for ri, row in enumerate(rows):
        for ci, cell in enumerate(row):
            ax = axes[ri, ci]
            _clean(ax)
            if cell is None:
                ax.set_visible(False)
                continue
            p, name = cell
            image = ax.imshow(np.clip(p / uniform, colours["norm"].vmin, None), **colours)
            _mark_query(ax, *centre)
            if columns is None or ri == 0:
                ax.set_title(name if columns is None else columns[ci], fontsize=8, fontweight="normal", pad=2)
            if ci == 0 and labels[ri]:
                # horizontal, so the labels of neighbouring rows never overlap
                ax.set_ylabel(labels[ri], fontsize=9, rotation=0, ha="right", va="center")
    _colorbar(fig, image, axes, label, uniform)
    if title:
        fig.suptitle(title)
    fig.supxlabel(xlabel, fontsize=9)
    return fig


def token_attention(
    attention: Mapping,
    *,
    title: str | None = None,
    query: int = 0,
    image: int | None = 0,
    layer_label: str = "layer",
    heads: Sequence[int] | None = None,
    average: bool = True,
    columns: int = MAX_COLUMNS,
) -> Figure:
    """``attention_grid`` from a saved ``attention.npz`` (``attnlib.measures.attention_summary``).

    query: index into the saved fixed query pixels; image: index of a saved test image, or None for the
    average over all the averaged test images (``rows_mean``). ``heads`` and ``average`` as in
    ``attention_grid`` (and ``columns``): ``head_split`` gives the heads of a figure and of its fold-out.
    """
    grid = tuple(int(g) for g in attention["grid"])
    token = int(attention["queries"][query])
    pixel = divmod(token, grid[1])
    rows = attention["rows_mean"][:, :, query] if image is None else attention["rows"][image][:, :, query]
    names = [f"{layer_label} {i + 1}" for i in range(rows.shape[0])]
    kw = dict(title=title, layer_names=names, heads=heads, average=average, columns=columns)
    return attention_grid(rows, grid, pixel, **kw)


def sharpest_heads(attention: Mapping, query: int = 0, layer_label: str = "layer") -> Figure:
    """One row, one panel per layer: the head whose map of query ``query`` (averaged over the saved images)
    peaks highest, on the scale of every attention figure: the figure of a run whose maps are all
    near-uniform, where a layers × heads grid would be white panels."""
    grid = tuple(int(g) for g in attention["grid"])
    token = int(attention["queries"][query])
    rows = np.asarray(attention["rows_mean"])[:, :, query]  # (L, heads, N)
    uniform = 1.0 / rows.shape[-1]
    best = rows.max(-1).argmax(-1)
    cells = [(rows[i, h].reshape(grid), f"{layer_label} {i + 1}, head {h + 1}") for i, h in enumerate(best)]
    pixel = divmod(token, grid[1])
    return _draw([cells], [""], None, pixel, title=None, uniform=uniform, **_token_axes(grid, pixel))


def head_split(n_heads: int) -> tuple[list[int], list[int]]:
    """The heads of an attention figure (the first ``MAX_COLUMNS`` − 1, beside the mean of heads: one row
    per layer) and those of its fold-out (the rest, none for a model of that few heads): every head once."""
    first = min(n_heads, MAX_COLUMNS - 1)
    return list(range(first)), list(range(first, n_heads))


#: Panels per row of the SAN figures (one per layer): four keep each panel's two-line title apart.
SAN_COLUMNS = 4


def _window_scale(maps: Sequence[np.ndarray], what: str) -> tuple[list[np.ndarray], dict, str]:
    """SAN's K×K window weights for one colour scale: non-negative weights (pairwise SAN's softmax over
    the window) as multiples of uniform 1/K² on a log scale (``multiple_scale``); weights of both signs
    (patchwise SAN's unnormalised ones) as they are, on the diverging linear scale around 0
    (``shared_scale``). -> (the maps to draw, ``imshow`` keywords, the colour bar's label)."""
    if min(float(np.min(m)) for m in maps) < 0:
        return list(maps), shared_scale(maps), f"{what} (signed, linear scale)"
    kk = maps[0].size
    shown, colours = multiple_scale(maps, 1.0 / kk, bound=kk)  # every SAN window figure: 1/K² .. K²
    return shown, colours, f"{what}, multiple of uniform 1/K² = 1/{kk} (log scale)"


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
    drawn, colours, label = _window_scale([p[0] for p in panels], "aggregation weight")
    image = None
    for ax in axes.flat:
        _clean(ax)
    for li, ax in enumerate(shown):
        _, k, h, w, i, j = panels[li]
        image = ax.imshow(drawn[li], **colours)
        _mark_query(ax, k // 2, k // 2)
        name = layer_names[li] if layer_names else f"layer {li + 1}"
        ax.set_title(name, fontsize=9, fontweight="normal")
        ax.set_xlabel(f"{h}×{w} grid, pixel ({i}, {j})", fontsize=8)
    _colorbar(fig, image, axes, label)
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
    last) × layers (columns, at most ``MAX_COLUMNS`` in a block of rows: more layers wrap onto a second
    block), on one colour scale (``_window_scale``) with one colour bar.

    means: per layer (G, K²). Shows the first ``max_groups`` groups and the mean over all groups.
    """
    layers = [_as_numpy(m) for m in means]
    groups = min(max(m.shape[0] for m in layers), max_groups)
    n_rows, n_layers = groups + 1, len(layers)
    blocks = int(np.ceil(n_layers / MAX_COLUMNS))
    cols = int(np.ceil(n_layers / blocks))
    size = min(PANEL, 1.0)  # K×K windows of a few taps read at a smaller size than token grids
    fig, axes = plt.subplots(
        n_rows * blocks,
        cols,
        figsize=(size * cols + 1.9, (size + 0.15) * n_rows * blocks + 0.9),
        squeeze=False,
        layout="constrained",
    )
    cells = {}
    for li, m in enumerate(layers):
        g, kk = m.shape
        k = int(round(np.sqrt(kk)))
        for ri in range(n_rows):
            if ri == n_rows - 1:
                cells[ri, li] = (m.mean(0).reshape(k, k), k)
            elif ri < g:
                cells[ri, li] = (m[ri].reshape(k, k), k)
    keys = list(cells)
    drawn, colours, label = _window_scale([cells[c][0] for c in keys], "aggregation weight")
    drawn = dict(zip(keys, drawn, strict=True))
    names = list(layer_names) if layer_names else [f"layer {li + 1}" for li in range(n_layers)]
    image = None
    for ax in axes.flat:
        _clean(ax)
    for b in range(blocks):
        for c in range(cols):
            li = b * cols + c
            for ri in range(n_rows):
                ax = axes[b * n_rows + ri, c]
                if li >= n_layers:
                    ax.set_visible(False)
                    continue
                if ri == 0:
                    ax.set_title(names[li], fontsize=8, fontweight="normal", pad=2)
                if c == 0:
                    row = "mean of groups" if ri == n_rows - 1 else f"group {ri + 1}"
                    ax.set_ylabel(row, fontsize=8, rotation=0, ha="right", va="center")
                if (ri, li) not in cells:  # this layer has fewer groups: an empty cell, its row label kept
                    ax.set_frame_on(False)
                    continue
                image = ax.imshow(drawn[ri, li], **colours)
                k = cells[ri, li][1]
                _mark_query(ax, k // 2, k // 2)
    _colorbar(fig, image, axes, label + "\nmean over pixels and images")
    if title:
        fig.suptitle(title)
    fig.supxlabel("K×K window (centre outlined)", fontsize=9)
    return fig


def san_layers(attention: Mapping) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """From a SAN ``attention.npz``: per layer the (n_show, K², H, W) weights and the (G, K²) means."""
    keys = sorted(
        k[: -len("_weights")] for k in attention if k.startswith("layer") and k.endswith("_weights")
    )
    return [attention[f"{k}_weights"] for k in keys], [attention[f"{k}_mean"] for k in keys]
