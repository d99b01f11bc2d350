"""The attention layer's fast compute paths and the one dispatch that picks a path from the inputs.

Every path computes the reference formulation (``attnlib.attention.reference``), head h, tokens N = H·W:

    A^(h) = q_h k_hᵀ/√d_h + s^(h) + u^(h)(q_h)      (content, encoding's scores and query term; any may be absent)
    MHSA(X) = concat_h[softmax(A^(h)) V^(h)] W_out + b_out

with V^(h) = X (values "input", the paper) or X W_val^(h) (values "projected", ViT). With input values,
concat_h[P^(h) X] W_out = Σ_h P^(h) (X W_out^(h)) (Lemma 1's per-head filter W_out^(h)); we average X
first because all heads then share one X (no per-head copy of X W^(h)).

Paths (``PATHS``), each a function of tensors:

- ``positional`` (no content): the probabilities do not depend on the input, so one softmax (heads, N, N)
  serves the batch; attention dropout draws a mask per image (the [Re] code expands the probabilities to
  the batch before its dropout), as every other path does. With input values the rows are ordered
  (query, head), so (N·heads × N) @ (N × B·D) gives concat_h for the whole batch in one GEMM.
- ``explicit``: q and k (given keys for Hierarchical Attention), one batched GEMM ``baddbmm`` that adds
  the encoding's ``content_bias``, softmax, dropout, value GEMM. Returns the probabilities when asked.
- ``sdpa``: ``F.scaled_dot_product_attention`` with the encoding's bias as its additive ``attn_mask``.
  No probabilities. The GPU default; on the CPU, with training-time dropout or head size 400, it falls back
  to its math path, which upcasts bf16 and copies the per-head values (2x slower than ``explicit``,
  measured by ``attnlib.lab.bench``).
- ``bilinear`` (input values, keys not given): the content scores through A_h = W_qry^(h)ᵀ W_key^(h)
  without forming q or k; one D × heads·D projection instead of two (see ``bilinear``).

``attention(layer, x, keys, return_attention)`` picks: ``positional`` without content; ``bilinear`` when
it may and saves FLOPs (``bilinear_pays``); ``sdpa`` on CUDA when no probabilities are asked for;
``explicit`` otherwise. ``path=`` forces one (tests, benchmarks).

The [Re] score layout (``layer.score_layout == "re"``, square or not): the [Re] code reads the (H, W) grid
of queries and keys as (W, H) and permutes its (B, W, H, heads, W, H) scores back to (H, W) order. With σ
the transposition of an H x W grid into W x H (flat index i·W + j -> j·H + i) that is

    A_re[q, k] = Ã[σq, σk]   =>   out[q] = Σ_m softmax(Ã[σq, m]) V[σ⁻¹m]

with Ã the intended score of the same tokens laid on a W x H grid: every path computes Ã on that grid, with
the values of the transposed grid, and transposes its output (and maps) back (``reference`` writes it as
the [Re] code does). Attention dropout draws its mask from
32-bit random integers (``dropout_mask``, ~10x cheaper than ``bernoulli_`` on the CPU) and folds 1/(1−p)
into the value GEMM.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlib.errors import ConfigError

PATHS = ("positional", "explicit", "sdpa", "bilinear")


# ------------------------------------------------------------------------------------------ dropout
def dropout_mask(shape: torch.Size | tuple[int, ...], p: float, device=None) -> Tensor:
    """Bernoulli(p) mask, True where an entry is dropped (the distribution of ``nn.Dropout``'s mask).

    Drawn as 32-bit uniform integers r and dropped where r < p·2³² (p exact to 2⁻³²); on the CPU this is
    about ten times cheaper than ``bernoulli_``, which dominated the attention dropout's cost.
    """
    n = math.prod(shape)
    bits = torch.randint(-(2**63), 2**63 - 1, ((n + 1) // 2,), dtype=torch.int64, device=device)
    r = bits.view(torch.int32)[:n]  # two uniform int32 per int64
    return (r < round(p * 2**32) - 2**31).view(shape)


def _drop(probs: Tensor, p: float) -> tuple[Tensor, float]:
    """Attention dropout as (probabilities with the dropped entries zeroed, 1/(1 − p)): the caller folds the
    rescaling into its next product."""
    if p <= 0:
        return probs, 1.0
    return probs.masked_fill(dropout_mask(probs.shape, p, probs.device), 0.0), 1.0 / (1.0 - p)


def dropout(x: Tensor, p: float) -> Tensor:
    """Training-mode dropout with ``dropout_mask``: zero with probability p, scale the rest by 1/(1−p)."""
    if p == 0:
        return x
    return x.masked_fill(dropout_mask(x.shape, p, x.device), 0.0) * (1.0 / (1.0 - p))


class Dropout(nn.Dropout):
    """``nn.Dropout`` whose mask comes from ``dropout_mask``: the same distribution and 1/(1−p) scaling,
    several times cheaper on the CPU. Shapes: any -> same."""

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0 or self.p >= 1 or self.inplace:
            return super().forward(x)
        return dropout(x, self.p)


def _compute_dtype(t: Tensor) -> torch.dtype:
    """The dtype a matmul on ``t`` runs in: the autocast dtype when autocast is on for its device."""
    device = t.device.type
    if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4
        return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else t.dtype
    if device == "cpu":
        return torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled() else t.dtype
    return torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else t.dtype


# ------------------------------------------------------------------------------------------ products
class _Scores(torch.autograd.Function):
    """S = bias + α·A Bᵀ for A (G, M, K), B (G, N, K): one ``baddbmm`` forward, and a backward whose
    gradients come out in A's and B's own (row-major) layouts with α inside their GEMMs.

    torch's ``baddbmm`` backward returns B's gradient as the transpose of a (G, K, N) product and multiplies
    by α in a separate pass: the reshapes after it then transpose (G, N, K) in memory element by element,
    which on the CPU cost more than the GEMMs themselves (``attnlib.lab.engine_bench`` profiles)."""

    @staticmethod
    def forward(ctx, a: Tensor, b: Tensor, bias: Tensor | None, alpha: float) -> Tensor:
        ctx.save_for_backward(a, b)
        ctx.alpha, ctx.has_bias = alpha, bias is not None
        if bias is None:
            return torch.baddbmm(a.new_zeros(()), a, b.transpose(1, 2), beta=0, alpha=alpha)
        return torch.baddbmm(bias, a, b.transpose(1, 2), alpha=alpha)

    @staticmethod
    def backward(ctx, grad: Tensor):
        a, b = ctx.saved_tensors
        zero, alpha = grad.new_zeros(()), ctx.alpha
        grad = grad.to(a.dtype)
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_a = torch.baddbmm(zero, grad, b.to(grad.dtype), beta=0, alpha=alpha)  # α·G B
        if ctx.needs_input_grad[1]:
            grad_b = torch.baddbmm(zero, grad.transpose(1, 2), a, beta=0, alpha=alpha)  # α·Gᵀ A
        grad_bias = grad if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_a, grad_b, grad_bias, None


def scores(a: Tensor, b: Tensor, bias: Tensor | None = None, alpha: float = 1.0) -> Tensor:
    """bias + α·A Bᵀ (``_Scores``): A (G, M, K), B (G, N, K), bias None or broadcastable to (G, M, N), of one
    dtype (the caller casts) -> (G, M, N)."""
    if not torch.is_grad_enabled() or not (a.requires_grad or b.requires_grad):
        if bias is None:
            return torch.baddbmm(a.new_zeros(()), a, b.transpose(1, 2), beta=0, alpha=alpha)
        return torch.baddbmm(bias, a, b.transpose(1, 2), alpha=alpha)
    return _Scores.apply(a, b, bias, alpha)


# ------------------------------------------------------------------------------------------ paths
# Values ``v``: (B, N, D) when every head averages the same X (V^(h) = X), else (B, heads, N, d_v).
# Each path returns ctx = concat_h[P^(h) V^(h)] (B, N, heads·d_v) and the probabilities (B, heads, N, N)
# when asked (else None).


def positional(scores: Tensor, v: Tensor, dropout_p: float = 0.0, return_attention: bool = False):
    """softmax(s^(h)) V^(h) for input-independent scores (heads, N, N): one softmax for the batch.

    Without dropout the batch shares one matrix, so the batch goes into the GEMM's columns: one
    (N·heads × N) @ (N × B·D) product (input values; per head (N × N) @ (N × B·d_v) for projected ones)
    instead of a batched product with the matrix broadcast over the batch, which the CPU's batched GEMM
    copies B times forward and whose backward writes B gradients of it to sum them. Then the gradient of
    the shared matrix is one GEMM over B·D columns."""
    heads, n = scores.shape[:2]
    b = v.shape[0]
    shared = torch.softmax(scores, dim=-1)  # softmax in the encoding's dtype (fp32 under autocast)
    dtype = _compute_dtype(v)
    probs = shared.unsqueeze(0).expand(b, -1, -1, -1) if return_attention else None
    if dropout_p > 0:  # a mask per image: P_b = Dropout(softmax(s)) for each b, (B, heads, N, N)
        p = dropout(shared.expand(b, heads, n, n), dropout_p)
        if v.dim() == 3:  # rows ordered (query, head): (N·heads × N) @ X_b gives (N, heads·D) per image
            ctx = torch.bmm(p.transpose(1, 2).reshape(b, n * heads, n).to(dtype), v.to(dtype))
        else:
            ctx = (p.to(dtype) @ v.to(dtype)).transpose(1, 2)  # (B, N, heads, d_v)
        return ctx.reshape(b, n, -1), probs
    if v.dim() == 3:  # (N·heads × N) @ (N × B·D) -> [query, head, image, feature]
        d = v.shape[-1]
        pt = shared.transpose(0, 1).reshape(n * heads, n).to(dtype)
        ctx = (pt @ v.to(dtype).transpose(0, 1).reshape(n, b * d)).view(n, heads, b, d)
        return ctx.permute(2, 0, 1, 3).reshape(b, n, heads * d), probs
    dv = v.shape[-1]  # per head (N × N) @ (N × B·d_v) -> [head, query, image, feature]
    vt = v.to(dtype).permute(1, 2, 0, 3).reshape(heads, n, b * dv)
    ctx = torch.bmm(shared.to(dtype), vt).view(heads, n, b, dv)
    return ctx.permute(2, 1, 0, 3).reshape(b, n, heads * dv), probs


def explicit(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    bias: Tensor | None = None,
    dropout_p: float = 0.0,
    return_attention: bool = False,
):
    """softmax(q·kᵀ/√d_h + bias) V with explicit scores. q, k (B, heads, N, d_h); bias None,
    (heads, N, N) or (B, heads, N, N).

    Scores are one batched GEMM that adds the bias (``scores``); the 1/(1−p) rescaling of dropout rides
    on the value GEMM's alpha. With input values every head averages the same X, so the probabilities are
    laid out as (B, N·heads, N) and one GEMM per image gives concat_h directly (no per-head copy of X).
    """
    b, h, n, dh = q.shape
    zero = q.new_zeros(())
    qf, kf = q.reshape(b * h, n, dh), k.reshape(b * h, n, dh)
    if bias is not None:
        bias = bias.expand(b, h, n, n).reshape(b * h, n, n)
    s = scores(qf, kf, bias, dh**-0.5)  # bias + q·k/√d_h
    probs = torch.softmax(s, dim=-1)  # (B·heads, N, N)
    dropped, keep_scale = _drop(probs, dropout_p)
    if v.dim() == 3:
        pt = dropped.view(b, h, n, n).transpose(1, 2).reshape(b, n * h, n)  # rows (query, head)
        ctx = torch.baddbmm(zero, pt, v.to(pt.dtype), beta=0, alpha=keep_scale)  # (B, N·heads, D)
    else:
        dv = v.shape[-1]
        v = v.to(q.dtype).reshape(b * h, n, dv)
        ctx = torch.baddbmm(zero, dropped, v, beta=0, alpha=keep_scale)  # (B·heads, N, d_v)
        ctx = ctx.view(b, h, n, dv).transpose(1, 2)
    return ctx.reshape(b, n, -1), probs.view(b, h, n, n) if return_attention else None


def sdpa(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None = None, dropout_p: float = 0.0) -> Tensor:
    """softmax(q·kᵀ/√d_h + bias) V by ``F.scaled_dot_product_attention`` (its own dropout RNG). -> ctx."""
    b, h, n, _ = q.shape
    if v.dim() == 3:
        v = v.unsqueeze(1).expand(b, h, n, v.shape[-1])  # V^(h) = X for every head
    ctx = F.scaled_dot_product_attention(q, k, v.to(q.dtype), attn_mask=bias, dropout_p=dropout_p)
    return ctx.transpose(1, 2).reshape(b, n, -1)


def bilinear_pays(dim: int, head_dim: int, rows: int) -> bool:
    """Whether ``bilinear`` costs fewer FLOPs than q and k for ``rows`` = B·N tokens: Z = X A plus
    A_h = W_qryᵀW_key, 2·rows·D·heads·D + 2·heads·D²·d_h, against 2 · 2·rows·D·heads·d_h, i.e.
    rows·(2·d_h − D) > D·d_h (with d_h = D: more tokens than features, B·N > D; not at batch 1)."""
    return rows * (2 * head_dim - dim) > dim * head_dim


def bilinear(
    xs: Tensor,
    query: nn.Linear,
    key: nn.Linear,
    encoding,
    heads: int,
    height: int,
    width: int,
    dropout_p: float = 0.0,
    return_attention: bool = False,
    values: Tensor | None = None,
):
    """Content attention with input values, keys not given: the same scores without forming q or k.

    q_h·k_h/√d_h = X_q A_h X_kᵀ + c_h·X_k + (terms constant along the keys, which the softmax cancels:
    b_key only shifts each query's scores), with A_h = W_qry^(h)ᵀ W_key^(h)/√d_h (D × D) and
    c_h = W_key^(h)ᵀ b_qry^(h)/√d_h, built once per forward. Z = X A + c is one Linear(D, heads·D)
    instead of two, and its natural (B, N, heads, D) layout makes every image one GEMM
    (N·heads × D) @ (D × N): the scores come out as (B, N·heads, N) [query, head, key], the layout in
    which softmax(·) X gives concat_h directly. No per-head copies of q, k or the probabilities.
    The encoding's terms come from ``encoding.linear_query_bias`` in that layout.
    xs (B, N, D) -> ctx (B, N, heads·D), probabilities (B, heads, N, N) or None. ``values`` (B, N, D): the
    tokens the heads average, when they are not xs (the [Re] score layout); default xs.
    """
    b, n, d = xs.shape
    h = heads
    dh = query.out_features // h
    dtype = _compute_dtype(xs)
    xc = xs.to(dtype)  # one cast of X for the two GEMMs that use it
    wq, wk = query.weight.view(h, dh, d), key.weight.view(h, dh, d)
    scale = dh**-0.5
    a = torch.bmm(wk.transpose(1, 2), wq * scale)  # (heads, D, D): A_hᵀ, Linear's weight layout
    c = None
    if query.bias is not None:
        c = torch.einsum("hp,hpd->hd", query.bias.view(h, dh) * scale, wk)  # c_h
    if key.bias is not None:  # no effect on the output; link it so its gradient is the exact 0
        c = key.bias.sum() * 0.0 if c is None else c + key.bias.sum() * 0.0
    z = F.linear(xs, a.reshape(h * d, d), None if c is None else c.expand(h, d).reshape(-1)).to(dtype)
    bias = None
    if encoding is not None:  # (N·heads, N) broadcast over the batch, or (B, N·heads, N)
        qb = None if query.bias is None else query.bias.view(h, dh)
        bias = encoding.linear_query_bias(xc, wq, qb, height, width).to(dtype)
    z, zero = z.view(b, n * h, d), xc.new_zeros(())
    probs = torch.softmax(scores(z, xc, bias), dim=-1)  # bias + Z Xᵀ: (B, N·heads, N)
    dropped, keep_scale = _drop(probs, dropout_p)
    xv = xc if values is None else values.to(dtype)
    ctx = torch.baddbmm(zero, dropped, xv, beta=0, alpha=keep_scale)  # (B, N·heads, D) = concat_h
    maps = probs.view(b, n, h, n).transpose(1, 2) if return_attention else None
    return ctx.view(b, n, h * d), maps


# ------------------------------------------------------------------------------------------ dispatch
def available_paths(layer, keys: Tensor | None = None, return_attention: bool = False) -> tuple[str, ...]:
    """The paths that compute ``layer`` for these inputs (``positional`` alone without content)."""
    if not layer.content:
        return ("positional",)
    paths = ["explicit"]
    if not return_attention:
        paths.append("sdpa")
    if keys is None and layer.values == "input":
        paths.append("bilinear")
    return tuple(paths)


def choose_path(layer, x: Tensor, keys: Tensor | None = None, return_attention: bool = False) -> str:
    """The path ``attention`` takes by default: positional without content; bilinear when it is available
    and saves FLOPs; SDPA on CUDA when no probabilities are asked for; explicit otherwise."""
    paths = available_paths(layer, keys, return_attention)
    b, height, width, _ = x.shape
    if paths == ("positional",):
        return "positional"
    if "bilinear" in paths and bilinear_pays(layer.dim, layer.head_dim, b * height * width):
        return "bilinear"
    if "sdpa" in paths and x.is_cuda:
        return "sdpa"
    return "explicit"


def attention(
    layer, x: Tensor, keys: Tensor | None = None, return_attention: bool = False, path: str = "auto"
) -> tuple[Tensor, Tensor | None]:
    """The layer ``layer`` (a ``MultiHeadSelfAttention2d``: its weights, encoding and settings) on x.

    x (B, H, W, D); keys (B, heads, N, d_h) to use instead of X W_key (Hierarchical Attention) or None
    -> out (B, H, W, D_out), probabilities (B, heads, N, N) [N = H·W row-major, rows sum to one] or None.
    ``path``: "auto" (``choose_path``) or one of ``available_paths`` (ConfigError otherwise).
    """
    if keys is not None and not layer.content:
        raise ConfigError("keys", tuple(keys.shape), "None for a layer without content (it has no keys)")
    if path == "auto":
        path = choose_path(layer, x, keys, return_attention)
    elif path not in (paths := available_paths(layer, keys, return_attention)):
        raise ConfigError("path", path, f"one of {list(paths)} for these inputs (all paths: {list(PATHS)})")
    b, height, width, d = x.shape
    n, heads = height * width, layer.heads
    xs = x.reshape(b, n, d)
    p = layer.attn_dropout if layer.training else 0.0
    re_layout = getattr(layer, "score_layout", "intended") == "re"
    # the grid the scores see (W x H for the [Re] layout) and the tokens the values come from (σ⁻¹: transposed)
    sh, sw = (width, height) if re_layout else (height, width)
    xv = x.transpose(1, 2).reshape(b, n, d) if re_layout else xs
    if path == "positional":
        scores = layer.encoding.scores(height, width)
        ctx, probs = positional(scores, _values(layer, xs), p, return_attention)
    elif path == "bilinear":
        ctx, probs = bilinear(
            xs, layer.query, layer.key, layer.encoding, heads, sh, sw, p, return_attention,
            values=xv if re_layout else None,
        )  # fmt: skip
    else:
        q = layer.query(xs).view(b, n, heads, layer.head_dim).transpose(1, 2)  # (B, heads, N, d_h)
        k = (layer.compute_keys(x) if keys is None else keys).to(q.dtype)
        bias = None if layer.encoding is None else layer.encoding.content_bias(q, sh, sw)
        if path == "sdpa":
            ctx, probs = sdpa(q, k, _values(layer, xv), bias, p), None
        else:
            ctx, probs = explicit(q, k, _values(layer, xv), bias, p, return_attention)
    out = layer.out(ctx).reshape(b, sh, sw, layer.out_dim)  # concat_h(...) W_out + b_out
    if re_layout:  # out[q] = O[σq]; maps P_re[q, k] = P̃[σq, σk]
        out = out.transpose(1, 2)
        if probs is not None:
            probs = probs.view(b, heads, sh, sw, sh, sw).permute(0, 1, 3, 2, 5, 4).reshape(b, heads, n, n)
    return out.reshape(b, height, width, layer.out_dim), probs


def _values(layer, xs: Tensor) -> Tensor:
    """V from tokens xs (B, N, D): xs itself (input values, shared by the heads) or (B, heads, N, d_v)."""
    if layer.values == "input":
        return xs
    b, n, _ = xs.shape
    return layer.value(xs).reshape(b, n, layer.heads, layer.head_dim).transpose(1, 2)
