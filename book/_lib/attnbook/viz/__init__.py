"""The book's figures: one seaborn style, numpy in, matplotlib ``Figure`` out.

Conventions (the model contract of CONTRIBUTING.md):
- attention probabilities of paper models and ViT: one array per layer, (heads, N, N) with N = H·W
  tokens in row-major order (token ``i*W + j`` is pixel (i, j)); row q is the distribution of query q;
- SAN aggregation weights: one array per layer, (G, K·K, H, W): the weights of pixel (i, j) over its K×K
  window, tap ``kh*K + kw``;
- shifts δ = key − query, given as (row shift δ₁, column shift δ₂) in pixels of the attention grid.

Every function returns the figure and leaves displaying or saving it to the caller. One module per kind of
figure:

    style      the style (``set_style``), colours, widths, the colour scales (``multiple_scale``: multiples of
               uniform attention on a log scale), ``placeholder``
    attention  attention maps: layers × heads grids (``token_attention``), SAN windows (``window_maps``)
    centres    quadratic heads: centres after training (``quadratic_centres``) and during it
    curves     error against α, losses, training histories, per-layer measures against the epoch
    glance     accuracy against parameter count (``accuracy_vs_params``), ours beside the literature's
    schematic  where one query attends in SAN, ViT and quadratic heads (``attention_scopes``; no results)
"""

from .attention import (
    SAN_COLUMNS,
    attention_grid,
    head_split,
    san_layers,
    sharpest_heads,
    token_attention,
    window_maps,
    window_means,
)
from .centres import centre_trajectories, quadratic_centres
from .curves import (
    LAYER_MEASURES,
    error_vs_alpha,
    gap_by_length,
    layer_colours,
    layer_series,
    loss_curve,
    measures_vs_epochs,
    step_curves,
    training_curves,
)
from .glance import (
    ARROW_MARGIN,
    BOX_PAD,
    BOX_SPOTS,
    GROUP_COLOURS,
    LABEL_SPOTS,
    LITERATURE_MARKERS,
    _spread_boxes,  # noqa: F401 -- reached as viz._spread_boxes by the tests of the box placement
    accuracy_vs_params,
)
from .schematic import SCOPE_TITLES, attention_scopes
from .style import (
    CMAP,
    DIVERGING,
    GRID_WIDTH,
    MAX_COLUMNS,
    MULTIPLE_CMAP,
    PAGE_WIDTH,
    PANEL,
    QUERY_COLOR,
    multiple_scale,
    placeholder,
    set_style,
    shared_scale,
)

__all__ = [
    "ARROW_MARGIN",
    "BOX_PAD",
    "BOX_SPOTS",
    "CMAP",
    "DIVERGING",
    "GRID_WIDTH",
    "GROUP_COLOURS",
    "LABEL_SPOTS",
    "LAYER_MEASURES",
    "LITERATURE_MARKERS",
    "MAX_COLUMNS",
    "MULTIPLE_CMAP",
    "PAGE_WIDTH",
    "PANEL",
    "QUERY_COLOR",
    "SAN_COLUMNS",
    "SCOPE_TITLES",
    "accuracy_vs_params",
    "attention_grid",
    "attention_scopes",
    "centre_trajectories",
    "error_vs_alpha",
    "head_split",
    "layer_colours",
    "layer_series",
    "loss_curve",
    "measures_vs_epochs",
    "multiple_scale",
    "sharpest_heads",
    "placeholder",
    "quadratic_centres",
    "san_layers",
    "set_style",
    "shared_scale",
    "step_curves",
    "gap_by_length",
    "token_attention",
    "training_curves",
    "window_maps",
    "window_means",
]
