"""Schematics (no results): where one query pixel may attend in a SAN layer, a ViT layer and a layer of
quadratic heads, drawn on one small grid of pixels."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Ellipse, Rectangle

from .style import OUTLINE_COLOR, PAGE_WIDTH, QUERY_COLOR

#: The three panels of ``attention_scopes``, left to right: their titles.
SCOPE_TITLES = (
    "SAN: a K×K window\naround each pixel",
    "ViT: every patch token,\nweights from content",
    "Quadratic heads: one Gaussian\nper head at a fixed offset Δ",
)


def _grid(ax, side: int) -> None:
    """A ``side`` × ``side`` grid of pixels (row 0 at the top), no ticks."""
    ax.set_xlim(-0.5, side - 0.5)
    ax.set_ylim(side - 0.5, -0.5)
    ax.set_aspect("equal")
    ax.set_xticks(np.arange(-0.5, side, 1.0), minor=True)
    ax.set_yticks(np.arange(-0.5, side, 1.0), minor=True)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)
    ax.grid(which="minor", color="0.82", linewidth=0.5)
    ax.tick_params(which="minor", length=0)


def _query(ax, row: int, col: int, size: float = 1.0) -> None:
    corner = (col - size / 2, row - size / 2)
    ax.add_patch(Rectangle(corner, size, size, facecolor=QUERY_COLOR, edgecolor=OUTLINE_COLOR, lw=1.0))


def attention_scopes(side: int = 9, kernel: int = 3, patch: int = 3, heads: int = 9) -> Figure:
    """Three panels on a ``side`` × ``side`` image, one query pixel at its centre (filled square):

    - SAN: the query's ``kernel`` × ``kernel`` window, the only pixels it mixes (pairwise: one weight per
      pixel of the window from the query's and that pixel's features);
    - ViT: ``patch`` × ``patch`` patches are the tokens; the query's patch attends to every patch (weights
      from content, the shade varying with it);
    - quadratic heads: each of ``heads`` heads attends to a Gaussian exp(−α‖δ − Δ⁽ʰ⁾‖²) of the shift δ,
      centred at its own offset Δ⁽ʰ⁾ (here the √heads × √heads grid around the query, the construction
      of chapter 1), whatever the image.
    """
    if side % 2 == 0 or side % patch or kernel > side:
        raise ValueError(f"side: got {side}; allowed: an odd multiple of patch={patch}, ≥ kernel={kernel}")
    centre = side // 2
    fig, axes = plt.subplots(1, 3, figsize=(PAGE_WIDTH * 0.8, 3.2), layout="constrained")
    for ax, name in zip(axes, SCOPE_TITLES, strict=True):
        _grid(ax, side)
        ax.set_title(name, fontsize=9, fontweight="normal")
    san, vit, quadratic = axes
    # SAN: the window, every pixel of it a key (shaded), nothing outside
    low = centre - kernel // 2
    san.add_patch(Rectangle((low - 0.5, low - 0.5), kernel, kernel, facecolor="#56b4e9", alpha=0.45, lw=0))
    san.add_patch(Rectangle((low - 0.5, low - 0.5), kernel, kernel, fill=False, edgecolor="#0072b2", lw=1.6))
    _query(san, centre, centre)
    san.set_xlabel(f"keys: the {kernel}×{kernel} window only\n(weights from content)", fontsize=8)
    # ViT: patches as tokens, all of them keys, shaded by a made-up content weight
    tokens = side // patch
    shade = np.random.default_rng(0).dirichlet(np.ones(tokens * tokens)).reshape(tokens, tokens)
    for i in range(tokens):
        for j in range(tokens):
            corner = (j * patch - 0.5, i * patch - 0.5)
            strength = 0.15 + 0.7 * shade[i, j] / shade.max()
            vit.add_patch(Rectangle(corner, patch, patch, facecolor="#009e73", alpha=strength, lw=0))
            vit.add_patch(Rectangle(corner, patch, patch, fill=False, edgecolor="0.25", lw=1.0))
    first = (centre // patch) * patch
    vit.add_patch(
        Rectangle((first - 0.5, first - 0.5), patch, patch, fill=False, edgecolor=QUERY_COLOR, lw=2.2)
    )
    vit.set_xlabel(
        f"keys: all {tokens * tokens} patch tokens\n({patch}×{patch} pixels each; query patch outlined)",
        fontsize=8,
    )
    # quadratic heads: a Gaussian per head at its offset, drawn at one and two standard deviations
    k = int(round(np.sqrt(heads)))
    offsets = [(di, dj) for di in range(-(k // 2), k - k // 2) for dj in range(-(k // 2), k - k // 2)]
    palette = plt.get_cmap("tab10")
    for h, (di, dj) in enumerate(offsets):
        colour = palette(h % 10)
        at = (centre + 2 * dj, centre + 2 * di)  # offsets two pixels apart, so the Gaussians stay apart
        for width, alpha in ((1.6, 0.35), (0.8, 0.6)):
            quadratic.add_patch(Ellipse(at, width, width, facecolor=colour, alpha=alpha, lw=0))
    _query(quadratic, centre, centre, size=0.7)
    quadratic.set_xlabel(
        f"{heads} heads, offsets Δ 2 pixels apart\n(positions only, not content)", fontsize=8
    )
    return fig
