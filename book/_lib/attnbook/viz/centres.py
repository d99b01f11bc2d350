"""Quadratic heads: their attention centres and covariances after training, and their paths during it."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Ellipse

from .style import QUERY_COLOR, _as_numpy, _panel_grid


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
