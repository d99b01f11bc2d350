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


def _ellipse(ax, centre, inv_cov, color, radius: float, nsigma: float = 1.0, scale: float = 1.0) -> bool:
    """Contour of exp(−½ δᵀΣ⁻¹δ) at ``nsigma`` standard deviations, in (column, row) plot coordinates,
    lightly filled and clipped to the panel (|shift| ≤ ``radius``): an ellipse wider than the panel shows
    as a dashed band across it, not as two loose lines. ``scale``: plot units per unit of Σ's coordinates
    (input pixels per grid pixel). -> whether the ellipse reaches outside the panel."""
    cov = np.linalg.pinv(inv_cov) * scale**2
    vals, vecs = np.linalg.eigh(cov)
    vals = np.clip(vals, 0.0, None)
    if not np.all(np.isfinite(vals)) or vals.max() > 1e8:
        return False
    # eigenvector (row, col) -> plot angle in (x=col, y=row) coordinates
    angle = np.degrees(np.arctan2(vecs[0, 1], vecs[1, 1]))
    half = nsigma * np.sqrt(np.clip(np.diag(cov), 0.0, None))  # half extents along row and column
    outside = bool(np.any(np.abs(centre) + half > radius))
    for fill in (True, False):  # a light fill (no edge), then the edge
        ax.add_patch(
            Ellipse(
                (centre[1], centre[0]),
                2 * nsigma * np.sqrt(vals[1]),
                2 * nsigma * np.sqrt(vals[0]),
                angle=angle,
                fill=fill,
                facecolor=color if fill else "none",
                edgecolor="none" if fill else color,
                alpha=0.08 if fill else 0.85,
                linewidth=0.0 if fill else 1.0,
                linestyle="--" if outside else "-",
                clip_on=True,
                clip_box=ax.bbox,
            )
        )
    return outside


def _shift_labels(ax, unit: str) -> None:
    ax.set_xlabel(f"column shift δ₂ ({unit})")
    ax.set_ylabel(f"row shift δ₁ ({unit})")


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
    pixel_size: float = 1.0,
    unit: str = "pixels",
) -> Figure:
    """Attention centres Δ^(h) of every head, one panel per layer, with 1σ contours of each Gaussian
    (clipped to the panel; dashed where they reach outside it, a legend says so).

    centres: per layer (heads, 2) as (row shift, column shift) in pixels of the attention grid;
    inverse_covariances: per layer (heads, 2, 2) or None. ``pixel_size``: the ``unit`` per grid pixel
    (input pixels per token: 4 for an 8×8 grid on a 32×32 image, with ``unit="input pixels"``); shifts,
    ellipses and ``radius`` are drawn in ``unit``. The query pixel sits at the origin (square).
    """
    centres = [_as_numpy(c) * pixel_size for c in centres]
    invs = [_as_numpy(s) for s in inverse_covariances] if inverse_covariances is not None else None
    radius = radius or max(
        3.0 * pixel_size, float(np.ceil(max(np.abs(c).max() for c in centres) + pixel_size))
    )
    n = len(centres)
    fig, _, shown = _panel_grid(n, _layer_columns(n), lambda cols, rows: (2.7 * cols, 2.8 * rows + 0.4))
    palette = plt.get_cmap("tab20")
    clipped = False
    for li, ax in enumerate(shown):
        _shift_axes(ax, radius)
        for h, c in enumerate(centres[li]):
            color = palette(h % 20)
            if invs is not None:
                clipped |= _ellipse(ax, c, invs[li][h], color, radius, scale=pixel_size)
            ax.plot(c[1], c[0], "o", color=color, markersize=5)
            ax.annotate(str(h + 1), (c[1], c[0]), textcoords="offset points", xytext=(3, 3), fontsize=7)
        ax.set_title(layer_names[li] if layer_names else f"layer {li + 1}")
        _shift_labels(ax, unit)
    if clipped:
        dashed = plt.Line2D(
            [], [], color="0.3", linestyle="--", label="1σ ellipse reaching outside the panel"
        )
        fig.legend(handles=[dashed], loc="outside lower center", frameon=False, fontsize=8)
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
    pixel_size: float = 1.0,
    unit: str = "pixels",
) -> Figure:
    """How the attention centres move during training.

    trajectory: (steps, layers, heads, 2) or (steps, heads, 2) for one layer, as (row, column) shifts.
    Each head draws a line from its initial centre (hollow circle) to its final one (filled); ``targets``
    (M, 2) marks points the centres should reach (e.g. a convolution's kernel grid) with crosses.
    ``x_values`` (steps,): the epoch or step of each row (default 0, 1, ...), for the legend.
    ``pixel_size`` and ``unit`` as in ``quadratic_centres`` (``targets`` given in grid pixels too).
    """
    t = _as_numpy(trajectory) * pixel_size
    if t.ndim == 3:
        t = t[:, None]
    steps, n_layers, heads, _ = t.shape
    x_values = np.arange(steps) if x_values is None else _as_numpy(x_values)
    radius = max(3.0 * pixel_size, float(np.ceil(np.abs(t).max() + 0.5 * pixel_size)))
    cols = _layer_columns(n_layers)
    size = 4.2 if n_layers == 1 else (3.3 if cols < 4 else 2.7)
    fig, _, shown = _panel_grid(n_layers, cols, lambda cols, rows: (size * cols + 0.3, size * rows + 0.4))
    palette = plt.get_cmap("tab20")
    for li, ax in enumerate(shown):
        _shift_axes(ax, radius)
        if targets is not None:
            tg = _as_numpy(targets) * pixel_size
            ax.plot(tg[:, 1], tg[:, 0], "x", color="0.2", markersize=8, label="target")
        for h in range(heads):
            color = palette(h % 20)
            path = t[:, li, h]
            ax.plot(path[:, 1], path[:, 0], "-", color=color, linewidth=1.0, alpha=0.8)
            ax.plot(path[0, 1], path[0, 0], "o", mfc="none", color=color, markersize=5)
            ax.plot(path[-1, 1], path[-1, 0], "o", color=color, markersize=5)
        ax.set_title(layer_names[li] if layer_names else (f"layer {li + 1}" if n_layers > 1 else ""))
        _shift_labels(ax, unit)
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
