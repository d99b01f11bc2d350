"""Numbers for the qualitative claims about attention maps: how far, how peaked, how image-dependent.

Every function takes one layer's token attention probabilities p of shape (B, h, N, N) — B images, h heads,
N = H·W tokens in row-major order, p[b, h, q, :] a distribution over the keys of query q — and returns
per-head values averaged over images and queries (or one value for the layer). Distances are in token units;
multiply by the patch / down-sampling size for input pixels. `layer_measures` gives all of them for every
layer of a model, as the flat columns that a training history logs each epoch.

    mean distance   d̄_h   = E_{b,q} Σ_k p_{bhqk} ‖pos(k) − pos(q)‖          (0: attends to itself)
    peak            π_h   = E_{b,q} N · max_k p_{bhqk}                         (1: uniform attention)
    image dependence ι_h  = E_{b,q} ½ Σ_k |p_{bhqk} − E_b' p_{b'hqk}|           (0: the same map for every image)
    layer similarity σ_l  = E_{b,q} (1 − ½ Σ_k |p̄^l_{bqk} − p̄^{l−1}_{bqk}|), p̄ = mean over heads
"""

from __future__ import annotations

import math

import torch


def token_grid(n: int) -> tuple[int, int]:
    """(H, W) of N tokens: square when N is a square, else one row."""
    side = math.isqrt(n)
    return (side, side) if side * side == n else (1, n)


def token_distances(height: int, width: int, device=None, dtype=torch.float32) -> torch.Tensor:
    """(N, N) Euclidean distance ‖pos(k) − pos(q)‖ between the grid positions of tokens q and k."""
    ys, xs = torch.meshgrid(
        torch.arange(height, device=device, dtype=dtype),
        torch.arange(width, device=device, dtype=dtype),
        indexing="ij",
    )
    pos = torch.stack([ys.reshape(-1), xs.reshape(-1)], -1)  # (N, 2)
    return torch.cdist(pos, pos)


def _check(p: torch.Tensor, queries=None, rows: bool = False) -> torch.Tensor:
    """p as float64, shape-checked: (B, h, N, N), or (B, h, Q, N) with `queries` the Q query token indices
    (or any Q with `rows`)."""
    p = torch.as_tensor(p)
    square = queries is None and p.dim() == 4 and p.shape[-1] == p.shape[-2]
    subset = p.dim() == 4 and (rows or (queries is not None and p.shape[-2] == len(queries)))
    if not (square or subset):
        raise ValueError(f"attention maps must be (B, heads, N, N) or (B, heads, Q, N), got {tuple(p.shape)}")
    return p.double()


def mean_distance(p: torch.Tensor, queries=None, height: int | None = None, width: int | None = None):
    """(h,) d̄_h = E_{b,q} Σ_k p_{bhqk} ‖pos(k) − pos(q)‖, in token units; over all N queries, or over the
    rows of the `queries` given (p of shape (B, h, Q, N), as saved results keep a few query pixels)."""
    p = _check(p, queries)
    if height is None or width is None:
        height, width = token_grid(p.shape[-1])
    d = token_distances(height, width, p.device, p.dtype)
    if queries is not None:
        d = d[torch.as_tensor(queries, dtype=torch.long)]
    return (p * d).sum(-1).mean((0, 2))


def peak(p: torch.Tensor) -> torch.Tensor:
    """(h,) π_h = E_{b,q} N · max_k p_{bhqk}: 1 for uniform attention, N for one key (any Q rows)."""
    p = _check(p, rows=True)
    return p.amax(-1).mean((0, 2)) * p.shape[-1]


def image_dependence(p: torch.Tensor, mean: torch.Tensor | None = None) -> torch.Tensor:
    """(h,) ι_h: mean total-variation distance between each image's map and the mean map (h, N, N) over the
    images (`mean`, by default over the B images given; NaN when B < 2 and no mean is given). 0 for
    positional-only attention, which is the same for every image. Any Q query rows (B, h, Q, N)."""
    p = _check(p, rows=True)
    if mean is None:
        if p.shape[0] < 2:
            return torch.full((p.shape[1],), float("nan"), dtype=p.dtype)
        mean = p.mean(0)
    return 0.5 * (p - torch.as_tensor(mean).to(p)).abs().sum(-1).mean((0, 2))


def layer_similarity(p: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
    """σ = E_{b,q} (1 − TV(p̄(q), p̄_prev(q))), p̄ the mean over heads: 1 when two layers attend alike.
    Any Q query rows (B, h, Q, N), the same rows in both layers."""
    a, b = _check(p, rows=True).mean(1), _check(prev, rows=True).mean(1)
    if a.shape != b.shape:
        raise ValueError(f"layers of different shapes: {tuple(a.shape)} and {tuple(b.shape)}")
    return 1 - 0.5 * (a - b).abs().sum(-1).mean()


def layer_measures(maps: list[torch.Tensor], scale: float = 1.0, means=None) -> dict[str, float]:
    """Flat columns for a history row: for each token-attention layer l (one entry of `maps` per application,
    as models return them) `distance_l` (d̄ averaged over heads, × `scale` for pixels), `peak_l` (π averaged
    over heads), `image_dependence_l` (against `means[l]` when given) and for l ≥ 1 `similarity_l` (σ with
    layer l − 1). Window maps (SAN, 5-D) are skipped: their neighbourhood is fixed by the kernel."""
    out: dict[str, float] = {}
    tokens = [m for m in maps if m.dim() == 4]
    for layer, p in enumerate(tokens):
        out[f"distance_{layer}"] = float(mean_distance(p).mean()) * scale
        out[f"peak_{layer}"] = float(peak(p).mean())
        mean = None if means is None else means[layer]
        out[f"image_dependence_{layer}"] = float(image_dependence(p, mean).mean())
        if layer:
            out[f"similarity_{layer}"] = float(layer_similarity(p, tokens[layer - 1]))
    return out


@torch.no_grad()
def probe(model: torch.nn.Module, images: torch.Tensor, batch: int = 50) -> dict[str, float]:
    """`layer_measures` of `model` on the fixed `images` (B, 3, H, W), distances in input pixels (a token
    covers W / grid-width pixels), in eval mode, in chunks of `batch` images: a first pass takes each
    layer's mean map over all B images, a second measures every image against it (so the result does not
    depend on `batch`). The model's training mode is restored afterwards; {} for a model without token maps."""
    was_training = model.training
    model.eval()
    chunks = [images[i : i + batch] for i in range(0, images.shape[0], batch)]
    try:
        sums = None
        for x in chunks:
            _, maps = model(x, return_attention=True)
            tokens = [m.double().sum(0) for m in maps if m.dim() == 4]
            sums = tokens if sums is None else [a + b for a, b in zip(sums, tokens, strict=True)]
        if not sums:
            return {}
        means = [s / images.shape[0] for s in sums]
        scale = images.shape[-1] / token_grid(means[0].shape[-1])[1]
        rows = [layer_measures(model(x, return_attention=True)[1], scale, means) for x in chunks]
    finally:
        model.train(was_training)
    weights = [x.shape[0] for x in chunks]
    return {k: sum(r[k] * w for r, w in zip(rows, weights, strict=True)) / sum(weights) for k in rows[0]}


def centre_displacement(centers: torch.Tensor) -> torch.Tensor:
    """Quadratic heads: mean distance of the centres Δ from their initial values, per epoch and layer.

    centers: (E+1, L, h, 2) as `attnlib.train` logs them (row 0 = initialisation) -> (E+1, L)."""
    return (centers - centers[:1]).norm(dim=-1).mean(-1)


def centre_spread(centers: torch.Tensor) -> torch.Tensor:
    """Root-mean-square distance of each layer's centres from the layer's mean centre: (..., L, h, 2) -> (..., L)."""
    return (centers - centers.mean(-2, keepdim=True)).norm(dim=-1).pow(2).mean(-1).sqrt()


def logged_centres(run) -> torch.Tensor | None:
    """The quadratic centres Δ a saved run logged, (E+1, L, h, 2) in float64 (row 0 = initialisation), or None
    for a run without a centres log (not quadratic, or nothing saved)."""
    import numpy as np

    centers = None if run is None else run.centers
    if not centers or "centers" not in centers:
        return None
    return torch.as_tensor(np.asarray(centers["centers"], np.float64))


#: A map whose strongest probability is below this multiple of uniform (1/N over N keys) attends to every
#: key almost alike: the model averages its features over the image, whatever colours its panels show.
NEAR_UNIFORM = 1.1


def attention_peaks(run):
    """Strongest attention probability of each layer of a saved run (over heads, the saved query pixels and
    the saved test images) as a multiple of uniform attention 1/N over its N keys: a numpy array (layers,),
    or None for a run without token attention maps (SAN, or nothing saved)."""
    import numpy as np

    att = None if run is None else run.attention
    if not att or "rows" not in att:
        return None
    rows = np.asarray(att["rows"])  # (images, layers, heads, queries, N)
    return rows.max(axis=(0, 2, 3, 4)) * rows.shape[-1]
