"""The one style of the book's figures and what every figure module shares: colours, widths, the shared colour
scale and its bar, panel grids, the placeholder of a figure without data."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FixedLocator, NullLocator

CMAP = "viridis"
DIVERGING = "RdBu_r"  # for values of both signs (SAN patchwise weights), symmetric around 0
QUERY_COLOR = "#e4572e"
#: Multiples of uniform attention (p·N: 1 is uniform), on a log scale centred on 1: blue below, white at,
#: red above uniform.
MULTIPLE_CMAP = "RdBu_r"
OUTLINE_COLOR = "0.1"  # the query pixel's outline on a map: thin and dark, over any colour of MULTIPLE_CMAP
PAGE_WIDTH = 10.0  # inches: the width of a figure that fills the book's text column
#: Width (inches) of the panel grids (attention maps): narrower than PAGE_WIDTH, so that shown at the text
#: column's width their labels stay legible; panels shrink instead.
GRID_WIDTH = 7.5
#: Side (inches) of one map of a panel grid, and the most maps in a row: 5 × 1.25 in of a 7.75 in figure is
#: 16% of the figure's width per map, ≥ 90 px in a text column ≥ 560 px wide.
PANEL = 1.25
MAX_COLUMNS = 5


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


def _mark_query(ax, row: int, col: int, size: float = 1.0) -> None:
    """Outline the query pixel (row, col) of a map: a thin line on the pixel's border, its inside left free."""
    ax.add_patch(
        Rectangle(
            (col - size / 2, row - size / 2), size, size, fill=False, edgecolor=OUTLINE_COLOR, linewidth=0.9
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


def multiple_scale(arrays, uniform: float, bound: float | None = None) -> tuple[list[np.ndarray], dict]:
    """Maps of non-negative weights as multiples of the uniform weight (p / uniform, e.g. p·N: 1 is uniform),
    and one ``imshow`` colour scale for all of them: ``MULTIPLE_CMAP`` on a log scale symmetric around 1,
    from 1/b to b. ``bound`` b: fixed (the attention figures pass 1/uniform, a single key's multiple N: one
    range for every figure of a family, white uniform and darkest all weight on one key), else the smallest
    power of 2 ≥ max(2, the largest multiple). Multiples below 1/b take the scale's lowest colour.
    -> (the maps as multiples, the ``imshow`` keywords)."""
    multiples = [_as_numpy(a) / uniform for a in arrays]
    if bound is None:
        values = np.concatenate([m.ravel() for m in multiples])
        high = float(np.nanmax(values)) if values.size else 1.0
        bound = 2.0 ** np.ceil(np.log2(max(high, 2.0)))  # smallest power of 2 ≥ max(2, high)
    floor = 1.0 / bound
    return [np.clip(m, floor, None) for m in multiples], {
        "cmap": MULTIPLE_CMAP,
        "norm": LogNorm(vmin=floor, vmax=bound),
    }


def _multiple_ticks(bar) -> None:
    """Ticks of a multiple-of-uniform colour bar at the powers of 2 (at most 9 of them), "×1/4", "×1", "×4"."""
    low, high = bar.norm.vmin, bar.norm.vmax
    top = int(round(np.log2(high)))
    step = max(1, int(np.ceil(2 * top / 8)))
    powers = [k for k in range(-top, top + 1) if k % step == 0]
    bar.ax.yaxis.set_major_locator(FixedLocator([2.0**k for k in powers]))
    bar.ax.yaxis.set_minor_locator(NullLocator())
    bar.ax.set_yticklabels([f"×{2**k:g}" if k >= 0 else f"×1/{2**-k:g}" for k in powers])
    if low <= 1.0 <= high:
        bar.ax.axhline(1.0, color=OUTLINE_COLOR, linewidth=1.0)


def _colorbar(fig, image, axes, label: str, uniform: float | None = None):
    """A colour bar for all ``axes`` (one scale, at most 4.5 inches long), with the uniform level 1/N
    marked when given; on a multiple-of-uniform scale (``multiple_scale``), ticks at the powers of 2 and a
    line at ×1 (uniform)."""
    multiple = isinstance(image.norm, LogNorm)
    shrink = min(0.9, 4.5 / fig.get_figheight())
    bar = fig.colorbar(
        image,
        ax=axes,
        shrink=shrink,
        aspect=30 * shrink / 0.9,
        pad=0.02,
        extend="min" if multiple else "neither",
    )
    bar.set_label(label, fontsize=9)
    bar.ax.tick_params(labelsize=8)
    if multiple:
        _multiple_ticks(bar)
        return bar
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
