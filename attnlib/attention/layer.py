"""Multi-head self-attention on a (B, H, W, D) grid of tokens with relative positional scores.

Score of head h between query q and key k (Cordonnier et al., eq. (8), the terms the code uses):

    A^(h)_{q,k} = X_q W_qry^(h) (X_k W_key^(h))ᵀ / √d_h   (content, optional)
                + r^(h)(δ = k − q)                          (positional bias from an encoding, optional)
                + q^(h)·r_δ / √d_h                          (query-positional, learned encoding with content)

(which positional terms a learned encoding uses is its ``form``: ``encodings.Learned2DEncoding``)

    MHSA(X) = concat_h[softmax(A^(h)) V^(h)] W_out + b_out

Two value conventions:

- ``value="paper"`` (official code): no per-head value projection, every head averages the full
  hidden vector, V^(h) = X; the concatenation (heads·D) goes through ``out = Linear(heads·D, D_out)``.
  That equals Σ_h softmax(A^(h)) (X W_out^(h)) with W_out^(h) the h-th (D, D_out) slice of W_outᵀ
  (Lemma 1's per-head filter). Both orders cost heads·N²·D + heads·N·D·D_out flops when D_out = D;
  we average X first because all heads then share one X (no per-head copy of X W^(h)) and the
  positional-only case becomes one GEMM (heads·N × N)·(N × B·D).
- ``value="standard"`` (ViT): V^(h) = X W_val^(h) with ``value = Linear(D, heads·d_v)``, then
  ``out = Linear(heads·d_v, D_out)``.

How it is computed (the same math as the explicit formulation; ``attnlib.bench`` times both and
``tests/test_bench.py`` checks outputs and gradients):

- Positional-only (``content=False``): probabilities do not depend on the input, so the softmax is
  computed once per forward as (heads, N, N) and applied to every image (attention dropout, as in the
  official code, then draws one mask shared by the batch). With paper values the rows are ordered
  (query, head), so one GEMM per image (N·heads × N) @ (N × D) gives concat_h directly.
- Content, keys needed (``need_keys=True``, e.g. Hierarchical Attention): q and k projections, one
  batched GEMM ``baddbmm`` that adds the bias (positional, and for the learned encoding the
  query-positional term, built per axis then summed in one pass), softmax, dropout, value GEMM.
- Content, keys not needed and ``bilinear=True`` (the paper models' non-HA encoders): scores through
  A_h = W_qry^(h)ᵀ W_key^(h) without forming q or k (``_bilinear``): one D × heads·D projection instead
  of two, and no per-head copies. See ``_bilinear``.

``F.scaled_dot_product_attention`` (with the positional scores as its additive ``attn_mask``) computes
the q/k content path on GPUs, where its fused kernels apply (``sdpa=None``: on CUDA tensors). On the CPU
the explicit path is the default: with training-time attention dropout or head size 400, SDPA falls back
to its math path there, which upcasts bf16 to fp32 and copies the per-head values (2x slower than the
explicit path, measured by ``attnlib.bench``); ``sdpa=True`` forces it (a test checks both agree). Attention dropout draws its mask from 32-bit random integers
(``dropout_mask``, ~10x cheaper than ``bernoulli_`` on the CPU) and folds 1/(1−p) into the value GEMM.
The (B, heads, N, N) probabilities are returned only when ``return_attention=True``.

Hierarchical Attention: ``forward(x, keys=...)`` reuses the given keys (B, heads, N, d_h) instead of
computing ``self.key(x)`` and returns the keys it used.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlib.errors import ConfigError

VALUES = ("paper", "standard")


def _compute_dtype(t: Tensor) -> torch.dtype:
    """The dtype a matmul on ``t`` runs in: the autocast dtype when autocast is on for its device."""
    device = t.device.type
    if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4
        return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else t.dtype
    if device == "cpu":
        return torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled() else t.dtype
    return torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else t.dtype


def dropout_mask(shape: torch.Size | tuple[int, ...], p: float, device=None) -> Tensor:
    """Bernoulli(p) mask, True where an entry is dropped (the distribution of ``nn.Dropout``'s mask).

    Drawn as 32-bit uniform integers r and dropped where r < p·2³² (p exact to 2⁻³²); on the CPU this is
    about ten times cheaper than ``bernoulli_``, which dominated the attention dropout's cost.
    """
    n = math.prod(shape)
    bits = torch.randint(-(2**63), 2**63 - 1, ((n + 1) // 2,), dtype=torch.int64, device=device)
    r = bits.view(torch.int32)[:n]  # two uniform int32 per int64
    return (r < round(p * 2**32) - 2**31).view(shape)


class Dropout(nn.Dropout):
    """``nn.Dropout`` whose mask comes from ``dropout_mask``: the same distribution and 1/(1−p) scaling,
    several times cheaper on the CPU. Shapes: any -> same."""

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0 or self.p >= 1 or self.inplace:
            return super().forward(x)
        return x.masked_fill(dropout_mask(x.shape, self.p, x.device), 0.0) * (1.0 / (1.0 - self.p))


class MultiHeadSelfAttention2d(nn.Module):
    """Multi-head self-attention over an H x W token grid.

    Args:
        dim: input features D.
        heads: number of heads N_h.
        encoding: module with ``scores(H, W) -> (heads, N, N)`` (see ``encodings``) or None.
        content: add the content term q·k/√d_h (needs ``query`` / ``key`` projections).
        head_dim: d_h of queries/keys (and d_v of standard values); default D (the official code's
            per-head size equals the hidden size, which is why 400 hidden / 9 heads is fine).
        attn_dropout: dropout on the attention probabilities.
        value: "paper" or "standard" (module docstring).
        out_dim: output features D_out (default D).
        qkv_bias: biases of query / key / value projections (official paper code: True; [Re] ViT: False).
        sdpa: compute the q/k content path with ``F.scaled_dot_product_attention`` (None: on CUDA only;
            probabilities asked for with ``return_attention`` always come from the explicit path).
        bilinear: when the caller does not need the keys (``need_keys=False``), values are "paper" and it
            saves FLOPs (``_bilinear_pays``: B·N > D when d_h = D), compute the content scores through
            A_h = W_qry^(h)ᵀ W_key^(h) (``_bilinear``): same math, no q / k projections; the key
            projection is then not called.

    Shapes: x (B, H, W, D) -> out (B, H, W, D_out); keys (B, heads, N, d_h) or None;
    probabilities (B, heads, N, N), N = H·W row-major, each row summing to one.
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        encoding: nn.Module | None = None,
        content: bool = True,
        head_dim: int | None = None,
        attn_dropout: float = 0.1,
        value: str = "paper",
        out_dim: int | None = None,
        qkv_bias: bool = True,
        bilinear: bool = False,
        sdpa: bool | None = None,
    ):
        super().__init__()
        if value not in VALUES:
            raise ConfigError("value", value, list(VALUES))
        if not content and encoding is None:
            raise ConfigError("encoding", None, "an encoding module when content=False")
        if not content and getattr(encoding, "needs_query", False):
            raise ConfigError("content", content, f"True (encoding form {encoding.form!r} needs queries)")
        if encoding is not None and getattr(encoding, "heads", heads) != heads:
            raise ConfigError("encoding.heads", encoding.heads, f"equal to heads={heads}")
        if not 0.0 <= attn_dropout < 1.0:
            raise ConfigError("attn_dropout", attn_dropout, "a float in [0, 1)")
        self.dim, self.heads, self.content, self.value_mode = dim, heads, content, value
        self.head_dim = dim if head_dim is None else head_dim
        self.out_dim = dim if out_dim is None else out_dim
        self.attn_dropout = attn_dropout
        self.bilinear, self.sdpa = bilinear, sdpa
        self.encoding = encoding
        if content:
            self.query = nn.Linear(dim, heads * self.head_dim, bias=qkv_bias)
            self.key = nn.Linear(dim, heads * self.head_dim, bias=qkv_bias)
        v_dim = dim if value == "paper" else self.head_dim
        if value == "standard":
            self.value = nn.Linear(dim, heads * v_dim, bias=qkv_bias)
        self.out = nn.Linear(heads * v_dim, self.out_dim)
        self.dropout = Dropout(attn_dropout)

    def compute_keys(self, x: Tensor) -> Tensor:
        """Keys X W_key: x (B, H, W, D) -> (B, heads, N, d_h)."""
        b, h, w, _ = x.shape
        return self.key(x).reshape(b, h * w, self.heads, self.head_dim).transpose(1, 2)

    def positional_scores(self, height: int, width: int) -> Tensor | None:
        """Positional bias (heads, N, N), or None without an encoding."""
        return None if self.encoding is None else self.encoding.scores(height, width)

    def attention_bias(self, q: Tensor, height: int, width: int) -> Tensor | None:
        """Everything added to q·k/√d_h before the softmax, in q's dtype: None, the positional scores
        (heads, N, N), or with a query-dependent encoding (learned 2D, forms attnlib and re) its
        ``content_bias`` (B, heads, N, N)."""
        if self.encoding is None:
            return None
        if getattr(self.encoding, "query_dependent", False):  # X_q W_qry Ŵ_key r_δ (learned 2D with content)
            return self.encoding.content_bias(q, height, width)
        return self.encoding.scores(height, width).to(q.dtype)

    def _values(self, xs: Tensor) -> Tensor:
        """Per-head values (B, heads, N, d_v) from tokens xs (B, N, D)."""
        b, n, _ = xs.shape
        if self.value_mode == "paper":
            return xs.unsqueeze(1).expand(b, self.heads, n, self.dim)  # V^(h) = X for every head
        return self.value(xs).reshape(b, n, self.heads, self.head_dim).transpose(1, 2)

    def _positional_only(self, xs: Tensor, height: int, width: int, return_attention: bool):
        """Input-independent attention: one softmax (heads, N, N) for the batch. -> ctx (B, N, heads·d_v)."""
        b, n, d = xs.shape
        shared = torch.softmax(self.positional_scores(height, width), dim=-1)  # softmax in fp32
        p = self.dropout(shared)  # one mask for the batch, as the official code
        if self.value_mode == "paper":
            # rows ordered (query, head): (N·heads × N) @ X_b gives (N, heads·D) per image, already in the
            # layout of concat_h; the shared matrix is broadcast over the batch (stride 0, no copy)
            dtype = _compute_dtype(xs)
            pt = p.transpose(0, 1).reshape(n * self.heads, n).to(dtype)
            ctx = torch.bmm(pt.expand(b, -1, -1), xs.to(dtype))  # (B, N·heads, D)
        else:
            ctx = (p @ self._values(xs)).transpose(1, 2)  # (B, N, heads, d_v)
        probs = shared.unsqueeze(0).expand(b, -1, -1, -1) if return_attention else None
        return ctx.reshape(b, n, -1), probs

    def _content(self, q: Tensor, k: Tensor, bias: Tensor | None, xs: Tensor, return_attention: bool):
        """softmax(q·kᵀ/√d_h + bias) V with explicit scores. q, k (B, heads, N, d_h) -> ctx (B, N, heads·d_v).

        Scores are one batched GEMM that adds the bias (baddbmm); attention dropout draws its mask from
        32-bit random integers (``dropout_mask``) and its 1/(1−p) rescaling rides on the value GEMM's alpha.
        With paper values every head averages the same X, so the probabilities are laid out as
        (B, N·heads, N) and one GEMM per image gives concat_h directly (no per-head copy of X).
        """
        b, h, n, dh = q.shape
        if not return_attention and (q.is_cuda if self.sdpa is None else self.sdpa):
            v = self._values(xs).to(q.dtype)  # (B, heads, N, d_v)
            drop = self.attn_dropout if self.training else 0.0
            ctx = F.scaled_dot_product_attention(
                q, k, v, attn_mask=bias, dropout_p=drop
            )  # softmax(qkᵀ/√d_h + bias) V
            return ctx.transpose(1, 2).reshape(b, n, -1), None
        zero = q.new_zeros(())
        qf, kf = q.reshape(b * h, n, dh), k.reshape(b * h, n, dh)
        if bias is None:
            scores = torch.baddbmm(zero, qf, kf.transpose(1, 2), beta=0, alpha=dh**-0.5)
        else:
            bias = bias.expand(b, h, n, n).reshape(b * h, n, n)
            scores = torch.baddbmm(bias, qf, kf.transpose(1, 2), alpha=dh**-0.5)  # bias + q·k/√d_h
        probs = torch.softmax(scores, dim=-1)  # (B·heads, N, N)
        dropped, keep_scale = probs, 1.0
        if self.training and self.attn_dropout > 0:
            dropped = probs.masked_fill(dropout_mask(probs.shape, self.attn_dropout, probs.device), 0.0)
            keep_scale = 1.0 / (1.0 - self.attn_dropout)
        if self.value_mode == "paper":
            pt = dropped.view(b, h, n, n).transpose(1, 2).reshape(b, n * h, n)  # rows (query, head)
            ctx = torch.baddbmm(zero, pt, xs.to(pt.dtype), beta=0, alpha=keep_scale)  # (B, N·heads, D)
        else:
            v = self._values(xs).to(q.dtype).reshape(b * h, n, self.head_dim)
            ctx = torch.baddbmm(zero, dropped, v, beta=0, alpha=keep_scale)  # (B·heads, N, d_v)
            ctx = ctx.view(b, h, n, self.head_dim).transpose(1, 2)
        return ctx.reshape(b, n, -1), probs.view(b, h, n, n) if return_attention else None

    def _bilinear_pays(self, rows: int) -> bool:
        """Whether ``_bilinear`` costs fewer FLOPs than q and k for ``rows`` = B·N tokens (paper values only):
        Z = X A plus A_h = W_qryᵀW_key, 2·rows·D·heads·D + 2·heads·D²·d_h, against 2 · 2·rows·D·heads·d_h,
        i.e. rows·(2·d_h − D) > D·d_h (with d_h = D: more tokens than features, B·N > D; not at batch 1)."""
        d, dh = self.dim, self.head_dim
        return self.value_mode == "paper" and rows * (2 * dh - d) > d * dh

    def _bilinear(self, xs: Tensor, height: int, width: int, return_attention: bool):
        """Content attention with paper values, keys not needed: the same scores without forming q or k.

        q_h·k_h/√d_h = X_q A_h X_kᵀ + c_h·X_k + (terms constant along the keys, which the softmax
        cancels: b_key only shifts each query's scores), with A_h = W_qry^(h)ᵀ W_key^(h)/√d_h (D × D) and
        c_h = W_key^(h)ᵀ b_qry^(h)/√d_h, built once per forward. Z = X A + c is one Linear(D, heads·D)
        instead of two, and its natural (B, N, heads, D) layout makes every image one GEMM
        (N·heads × D) @ (D × N): the scores come out as (B, N·heads, N) [query, head, key], the layout in
        which softmax(·) X gives concat_h directly. No per-head copies of q, k or the probabilities.
        xs (B, N, D) -> ctx (B, N, heads·D), probabilities (B, heads, N, N) or None.
        """
        b, n, d = xs.shape
        h, dh = self.heads, self.head_dim
        dtype = _compute_dtype(xs)
        xc = xs.to(dtype)  # one cast of X for the two GEMMs that use it
        wq, wk = self.query.weight.view(h, dh, d), self.key.weight.view(h, dh, d)
        scale = dh**-0.5
        a = torch.bmm(wk.transpose(1, 2), wq * scale)  # (heads, D, D): A_hᵀ, Linear's weight layout
        c = None
        if self.query.bias is not None:
            c = torch.einsum("hp,hpd->hd", self.query.bias.view(h, dh) * scale, wk)  # c_h
        if self.key.bias is not None:  # no effect on the output; link it so its gradient is the exact 0
            c = self.key.bias.sum() * 0.0 if c is None else c + self.key.bias.sum() * 0.0
        z = F.linear(xs, a.reshape(h * d, d), None if c is None else c.expand(h, d).reshape(-1)).to(dtype)
        if self.encoding is None:
            bias = None
        elif getattr(self.encoding, "query_dependent", False):  # learned 2D: (positional +) query-positional
            qb = None if self.query.bias is None else self.query.bias.view(h, dh)
            bias = self.encoding.linear_query_bias(xc, wq, qb, height, width).to(dtype)
        else:  # (heads, N, N) -> (N·heads, N), broadcast over the batch by baddbmm
            bias = self.encoding.scores(height, width).transpose(0, 1).reshape(n * h, n).to(dtype)
        z, zero = z.view(b, n * h, d), xc.new_zeros(())
        if bias is None:
            scores = torch.baddbmm(zero, z, xc.transpose(1, 2), beta=0)
        else:
            scores = torch.baddbmm(bias, z, xc.transpose(1, 2))  # (B, N·heads, N)
        probs = torch.softmax(scores, dim=-1)
        dropped, keep_scale = probs, 1.0
        if self.training and self.attn_dropout > 0:
            dropped = probs.masked_fill(dropout_mask(probs.shape, self.attn_dropout, probs.device), 0.0)
            keep_scale = 1.0 / (1.0 - self.attn_dropout)
        ctx = torch.baddbmm(zero, dropped, xc, beta=0, alpha=keep_scale)  # (B, N·heads, D) = concat_h
        maps = probs.view(b, n, h, n).transpose(1, 2) if return_attention else None
        return ctx.view(b, n, h * d), maps

    def forward(
        self, x: Tensor, keys: Tensor | None = None, return_attention: bool = False, need_keys: bool = True
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """x (B, H, W, D) -> (out (B, H, W, D_out), keys used or None, probabilities or None).

        ``need_keys=False`` (the caller ignores the returned keys, e.g. a non-hierarchical encoder) lets a
        layer built with ``bilinear=True`` take the bilinear path (``_bilinear``), which returns keys None.
        """
        b, height, width, d = x.shape
        n = height * width
        xs = x.reshape(b, n, d)
        if not self.content:
            ctx, probs = self._positional_only(xs, height, width, return_attention)
        elif self.bilinear and keys is None and not need_keys and self._bilinear_pays(b * n):
            ctx, probs = self._bilinear(xs, height, width, return_attention)
        else:
            q = self.query(xs).view(b, n, self.heads, self.head_dim).transpose(1, 2)  # (B, heads, N, d_h)
            if keys is None:
                keys = self.compute_keys(x)
            bias = self.attention_bias(q, height, width)
            ctx, probs = self._content(q, keys.to(q.dtype), bias, xs, return_attention)
        out = self.out(ctx)  # concat_h(...) W_out + b_out
        return out.reshape(b, height, width, self.out_dim), keys, probs

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, heads={self.heads}, head_dim={self.head_dim}, content={self.content}, "
            f"value={self.value_mode!r}, out_dim={self.out_dim}"
        )
