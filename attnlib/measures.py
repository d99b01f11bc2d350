"""Numbers for the qualitative claims about attention maps: how far, how peaked, how image-dependent.

Every function takes one layer's token attention probabilities p of shape (B, h, N, N) — B images, h heads,
N = H·W tokens in row-major order, p[b, h, q, :] a distribution over the keys of query q — and returns
per-head values averaged over images and queries (or one value for the layer). Distances are in token units;
multiply by the patch / down-sampling size for input pixels. `probe_heads` gives all of them for every layer
and head of a model on fixed images (the standard probe, `attention_probe`), `probe` the
same averaged over heads as the flat columns that a training history logs each epoch, and
`uniform_reference` their values for uniform attention on the same grid. What a finished run saves of its
model's maps is measured here too: `attention_summary` (attention.npz: the rows of fixed query pixels and
the mean by relative offset, `offset_mean`) and `probe_file` (probe.npz: the standard probe at
initialisation and at the end, beside uniform attention's values).

    mean distance   d̄_h   = E_{b,q} Σ_k p_{bhqk} ‖pos(k) − pos(q)‖          (0: attends to itself)
    peak            π_h   = E_{b,q} N · max_k p_{bhqk}                         (1: uniform attention)
    image dependence ι_h  = E_{b,q} ½ Σ_k |p_{bhqk} − E_b' p_{b'hqk}|           (0: the same map for every image)
    layer similarity σ_l  = E_{b,q} (1 − ½ Σ_k |p̄^l_{bqk} − p̄^{l−1}_{bqk}|), p̄ = mean over heads
    offset share    s_h   = max_δ E_{b,q} p_{bh,q,q+δ}                           (1: one fixed shift; 1/N: uniform)
"""

from __future__ import annotations

import math

import numpy as np
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


def offset_mean(p: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Mean attention by relative offset δ = (dy, dx), in float64: p (..., N, N) with N = H·W -> (..., 2H−1,
    2W−1), entry [dy + H − 1, dx + W − 1] = (1/N) Σ_q p(q → q + δ) (0 where the key is off the grid)."""
    p = torch.as_tensor(p).double()
    n = height * width
    ys, xs = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    ys, xs = ys.reshape(-1), xs.reshape(-1)
    dy, dx = ys[None, :] - ys[:, None] + height - 1, xs[None, :] - xs[:, None] + width - 1  # (N, N), ≥ 0
    index = dy * (2 * width - 1) + dx  # of each (q, k) in the flattened (2H−1, 2W−1) offsets
    rows = p.reshape(-1, n * n)  # (lead, N·N)
    sums = torch.zeros(rows.shape[0], (2 * height - 1) * (2 * width - 1), dtype=p.dtype, device=p.device)
    sums.index_add_(1, index.reshape(-1).to(p.device), rows)
    return (sums / n).reshape(*p.shape[:-2], 2 * height - 1, 2 * width - 1)


def offset_share(p: torch.Tensor) -> torch.Tensor:
    """(h,) a head's positional signature: max over relative offsets δ of E_{b,q} p_{bhq,q+δ}, the share of its
    attention mass at one fixed shift over every query and image (0 where q + δ is off the grid). 1 for a head
    that attends to one shift (for δ ≠ 0 the share of queries with q + δ on the grid), 1/N for uniform
    attention. p of shape (B, h, N, N) on a square grid (`token_grid`)."""
    p = _check(p)
    return offset_mean(p.mean(0), *token_grid(p.shape[-1])).flatten(-2).amax(-1)  # mean over images first


def layer_similarity(p: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
    """σ = E_{b,q} (1 − TV(p̄(q), p̄_prev(q))), p̄ the mean over heads: 1 when two layers attend alike.
    Any Q query rows (B, h, Q, N), the same rows in both layers."""
    a, b = _check(p, rows=True).mean(1), _check(prev, rows=True).mean(1)
    if a.shape != b.shape:
        raise ValueError(f"layers of different shapes: {tuple(a.shape)} and {tuple(b.shape)}")
    return 1 - 0.5 * (a - b).abs().sum(-1).mean()


@torch.no_grad()
def probe_heads(model: torch.nn.Module, images: torch.Tensor, batch: int = 50) -> dict | None:
    """The measures of `model`'s token attention on the fixed `images` (B, 3, H, W), per layer and head, in
    eval mode and in chunks of `batch` images (the model's training mode is restored afterwards): a first
    pass takes each layer's mean map over all B images, a second measures every image against it, so the
    result does not depend on `batch`. Distances in input pixels (a token covers W / grid-width pixels).

    Returns None for a model without token maps (ResNet; SAN, whose window weights have no measure here),
    else float64 tensors over the L applications of attention (one per entry of the model's maps):
      distance (L, h)          d̄_h × pixels per token
      peak (L, h)              π_h (1: uniform)
      image_dependence (L, h)  ι_h against the layer's mean map over the B images
      similarity (L,)          σ_l with layer l − 1 (NaN for l = 0)
    and grid (H, W) of the tokens, scale (pixels per token)."""
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
            return None
        means = [s / images.shape[0] for s in sums]
        grid = token_grid(means[0].shape[-1])
        total: dict[str, torch.Tensor] = {}
        for x in chunks:
            tokens = [m for m in model(x, return_attention=True)[1] if m.dim() == 4]
            nan = torch.full((1,), math.nan, dtype=torch.float64, device=tokens[0].device)
            rows = {  # per-image means over this chunk, weighted by its size below
                "distance": torch.stack([mean_distance(p) for p in tokens]),
                "peak": torch.stack([peak(p) for p in tokens]),
                "image_dependence": torch.stack(
                    [image_dependence(p, m) for p, m in zip(tokens, means, strict=True)]
                ),
                "similarity": torch.cat(
                    [
                        nan,
                        *(
                            layer_similarity(p, q).reshape(1)
                            for q, p in zip(tokens, tokens[1:], strict=False)
                        ),
                    ]
                ),
            }
            for k, v in rows.items():
                total[k] = total.get(k, 0) + v.cpu() * x.shape[0]
    finally:
        model.train(was_training)
    out = {k: v / images.shape[0] for k, v in total.items()}
    scale = images.shape[-1] / grid[1]
    out["distance"] = out["distance"] * scale
    return {**out, "grid": torch.tensor(grid), "scale": torch.tensor(float(scale), dtype=torch.float64)}


def uniform_reference(height: int, width: int, scale: float = 1.0) -> dict[str, float]:
    """The measures of uniform attention p_{qk} = 1/N on an H × W grid, exactly: d̄ = mean over all (q, k)
    of ‖pos(k) − pos(q)‖ (× `scale` for pixels), π = 1, ι = 0 (no image enters), σ = 1 (layers alike)."""
    d = token_distances(height, width, dtype=torch.float64).mean()  # = E_q Σ_k (1/N) ‖pos(k) − pos(q)‖
    return {"distance": float(d) * scale, "peak": 1.0, "image_dependence": 0.0, "similarity": 1.0}


def probe(model: torch.nn.Module, images: torch.Tensor, batch: int = 50) -> dict[str, float]:
    """`probe_heads` as the flat columns of a history row (`layer_measures`' names): for each layer l
    `distance_l` (input pixels), `peak_l`, `image_dependence_l` averaged over heads, and for l ≥ 1
    `similarity_l`; {} for a model without token maps."""
    m = probe_heads(model, images, batch)
    if m is None:
        return {}
    out: dict[str, float] = {}
    for layer in range(m["distance"].shape[0]):
        for key in ("distance", "peak", "image_dependence"):
            out[f"{key}_{layer}"] = float(m[key][layer].mean())
        if layer:
            out[f"similarity_{layer}"] = float(m["similarity"][layer])
    return out


# -------------------------------------------------- what a finished run saves: attention.npz and probe.npz
QUERY_FRACTIONS = ((0.5, 0.5), (0.25, 0.25), (0.25, 0.75), (0.75, 0.5))  # fixed query pixels (row, col)


def _query_tokens(height: int, width: int) -> np.ndarray:
    return np.array([int(fr * height) * width + int(fc * width) for fr, fc in QUERY_FRACTIONS])


@torch.inference_mode()
def attention_summary(
    model: torch.nn.Module, images: torch.Tensor, n_show: int, device
) -> dict[str, np.ndarray]:
    """Attention maps of fixed test images, small enough for git (float16, well under 1 MB).

    images: the first test images, normalised float (M, 3, 32, 32); maps of the first `n_show` are kept
    per image, all M are averaged. Token maps (paper models, ViT; (B, heads, N, N) per layer, N = H·W):
      queries (Q,) token index of the fixed query pixels (QUERY_FRACTIONS of the grid), grid (2,) = (H, W)
      rows (n_show, L, heads, Q, N)   attention of each fixed query over all keys, per image
      rows_mean (L, heads, Q, N)      the same averaged over the M images
      offset_mean (L, heads, 2H−1, 2W−1)  attention by relative offset (`offset_mean`), averaged over
                                          queries and images
    Window maps (SAN; (B, G, K², H, W) per layer; layer i has its own grid):
      layer{i}_weights (n_show, K², H, W)   aggregation weights averaged over the G groups
      layer{i}_mean (G, K²)                 averaged over pixels and images
    """
    device = torch.device(device)
    model = model.to(device).eval()
    out: dict[str, np.ndarray] = {}
    sums: dict[str, np.ndarray] = {}
    m = images.shape[0]
    for start in range(0, m, 8):
        x = images[start : start + 8].to(device)
        _, maps = model(x, return_attention=True)
        for i, a in enumerate(maps):
            a = a.float()
            if a.dim() == 4:  # (B, heads, N, N)
                h, w = token_grid(a.shape[-1])
                qs = torch.as_tensor(_query_tokens(h, w), device=a.device)
                rows = a[:, :, qs, :]  # (B, heads, Q, N)
                off = offset_mean(a.mean(0).cpu(), h, w).numpy()  # (heads, 2H−1, 2W−1), this batch
                _accumulate(sums, f"rows_{i}", rows.sum(0).cpu().numpy())
                _accumulate(sums, f"offset_{i}", off * a.shape[0])
                if start == 0:
                    out[f"rows_{i}"] = rows[:n_show].cpu().numpy()
                    out["grid"], out["queries"] = np.array([h, w]), qs.cpu().numpy()
            else:  # (B, G, K², H, W)
                if start == 0:
                    out[f"layer{i:02d}_weights"] = a[:n_show].mean(1).cpu().numpy()
                _accumulate(sums, f"layer{i:02d}_mean", a.mean((3, 4)).sum(0).cpu().numpy())
    layers = sorted(int(k.split("_")[1]) for k in sums if k.startswith("rows_"))
    if layers:
        out["rows"] = np.stack([out.pop(f"rows_{i}") for i in layers], axis=1)
        out["rows_mean"] = np.stack([sums[f"rows_{i}"] / m for i in layers])
        out["offset_mean"] = np.stack([sums[f"offset_{i}"] / m for i in layers])
    out.update({k: v / m for k, v in sums.items() if k.startswith("layer")})
    return {k: (v.astype(np.float16) if v.dtype.kind == "f" else v) for k, v in out.items()}


def _accumulate(sums: dict, key: str, value: np.ndarray) -> None:
    sums[key] = sums[key] + value if key in sums else value.astype(np.float64)


PROBE_MEASURES = ("distance", "peak", "image_dependence", "similarity")


def attention_probe(model: torch.nn.Module, images: torch.Tensor, device) -> dict[str, np.ndarray] | None:
    """The standard probe of `model` at one moment (`probe_heads` on `device`, every query of the fixed
    `images`): {"distance", "peak", "image_dependence": (L, h), "similarity": (L,), "grid": (2,),
    "scale": ()} as numpy float64 arrays, or None for a model without token attention maps.

    Runs under `torch.random.fork_rng`: it consumes nothing of the global RNG streams (CPU, and the device's
    on CUDA), so that a run probed at initialisation trains exactly as one that is not."""
    device = torch.device(device)
    model = model.to(device)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        m = probe_heads(model, images.to(device))
    if m is None:
        return None
    return {k: v.detach().cpu().numpy() for k, v in m.items()}


def probe_file(images: int, init: dict | None, end: dict | None) -> dict[str, np.ndarray]:
    """The arrays of probe.npz, the standard attention probe that every run saves: the measures of its
    token attention on the first `images` test images (every query), per layer (one entry per application
    of attention, as the model returns its maps) and per head, at initialisation (`init`, before the first
    step) and at the end (`end`), each an `attention_probe`, beside their values for uniform attention on
    the same grid (`uniform_reference`, exact):

      images ()                                  P, the number of test images (the first P)
      token_layers ()                            L; 0 for a model without token maps: ResNet18, and SAN,
                                                 whose window aggregation weights have no token probe
      grid (2,), pixels_per_token ()             the token grid (H, W) and the input pixels per token
      init_distance, end_distance (L, h)         mean attended distance d̄ in input pixels
      init_peak, end_peak (L, h)                 peak π as a multiple of uniform (mean over queries of N·max p)
      init_image_dependence, end_... (L, h)      image dependence ι (TV from the layer's mean map over P images)
      init_similarity, end_similarity (L,)       σ with the previous layer (NaN for the first)
      uniform_distance, uniform_peak, uniform_image_dependence, uniform_similarity ()
    All floats float64. A probe missing at one moment (`init` None for a model with maps) is an error."""
    out = {"images": np.asarray(images, dtype=np.int64)}
    if end is None:
        if init is not None:
            raise ValueError("a probe at initialisation without one at the end")
        return {**out, "token_layers": np.asarray(0, dtype=np.int64)}
    if init is None:
        raise ValueError("a probe at the end without one at initialisation")
    grid, scale = np.asarray(end["grid"], np.int64), float(end["scale"])
    out.update(
        token_layers=np.asarray(end["distance"].shape[0], dtype=np.int64),
        grid=grid,
        pixels_per_token=np.asarray(scale, np.float64),
    )
    for when, m in (("init", init), ("end", end)):
        out.update({f"{when}_{k}": np.asarray(m[k], np.float64) for k in PROBE_MEASURES})
    uniform = uniform_reference(int(grid[0]), int(grid[1]), scale)
    out.update({f"uniform_{k}": np.asarray(uniform[k], np.float64) for k in PROBE_MEASURES})
    return out


# ------------------------------------------------ what saved runs logged: quadratic centres, attention peaks
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
    att = None if run is None else run.attention
    if not att or "rows" not in att:
        return None
    rows = np.asarray(att["rows"])  # (images, layers, heads, queries, N)
    return rows.max(axis=(0, 2, 3, 4)) * rows.shape[-1]
