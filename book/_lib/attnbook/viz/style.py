"""The one style of the book's figures and what every figure module shares: colours, widths, the shared colour
scale and its bar, panel grids, the placeholder of a figure without data."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

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


def _panel_grid(n: int, cols: int, figsize) -> tuple[Figure, np.ndarray, list]:
    """A figure of ``n`` panels in rows of ``cols`` (constrained layout), the spare axes of the last row
    hidden. figsize(cols, rows) -> (width, height) in inches. -> (figure, the axes grid, the n axes)."""
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=figsize(cols, rows), squeeze=False, layout="constrained")
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes, list(axes.flat[:n])


def placeholder(text: str) -> Figure:
    """A small empty figure saying ``text``: where a numbered figure has no data (a run not yet trained)."""
    fig, ax = plt.subplots(figsize=(6.4, 1.2), layout="constrained")
    _clean(ax)
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=11, color="0.35", transform=ax.transAxes)
    return fig
