"""Multi-head self-attention on a (B, H, W, D) grid of tokens with relative positional scores.

Score of head h between query q and key k (Cordonnier et al., eq. (8), the terms the code uses):

    A^(h)_{q,k} = X_q W_qry^(h) (X_k W_key^(h))ᵀ / √d_h   (content, optional)
                + r^(h)(δ = k − q)                          (positional bias from an encoding, optional)
                + q^(h)·r_δ / √d_h                          (query-positional, learned encoding with content)

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

Positional-only attention (``content=False``): probabilities do not depend on the input, so the
softmax is computed once per forward as (heads, N, N) and applied to every image (attention dropout,
as in the official code, then draws one mask shared by the batch). With content the forward uses
``F.scaled_dot_product_attention`` with the positional scores as ``attn_mask``; the (B, heads, N, N)
probabilities are materialised only when ``return_attention=True``.

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
    ):
        super().__init__()
        if value not in VALUES:
            raise ConfigError("value", value, list(VALUES))
        if not content and encoding is None:
            raise ConfigError("encoding", None, "an encoding module when content=False")
        if encoding is not None and getattr(encoding, "heads", heads) != heads:
            raise ConfigError("encoding.heads", encoding.heads, f"equal to heads={heads}")
        if not 0.0 <= attn_dropout < 1.0:
            raise ConfigError("attn_dropout", attn_dropout, "a float in [0, 1)")
        self.dim, self.heads, self.content, self.value_mode = dim, heads, content, value
        self.head_dim = dim if head_dim is None else head_dim
        self.out_dim = dim if out_dim is None else out_dim
        self.attn_dropout = attn_dropout
        self.encoding = encoding
        if content:
            self.query = nn.Linear(dim, heads * self.head_dim, bias=qkv_bias)
            self.key = nn.Linear(dim, heads * self.head_dim, bias=qkv_bias)
        v_dim = dim if value == "paper" else self.head_dim
        if value == "standard":
            self.value = nn.Linear(dim, heads * v_dim, bias=qkv_bias)
        self.out = nn.Linear(heads * v_dim, self.out_dim)
        self.dropout = nn.Dropout(attn_dropout)

    def compute_keys(self, x: Tensor) -> Tensor:
        """Keys X W_key: x (B, H, W, D) -> (B, heads, N, d_h)."""
        b, h, w, _ = x.shape
        return self.key(x).reshape(b, h * w, self.heads, self.head_dim).transpose(1, 2)

    def positional_scores(self, height: int, width: int) -> Tensor | None:
        """Positional bias (heads, N, N), or None without an encoding."""
        return None if self.encoding is None else self.encoding.scores(height, width)

    def _values(self, xs: Tensor) -> Tensor:
        """Per-head values (B, heads, N, d_v) from tokens xs (B, N, D)."""
        b, n, _ = xs.shape
        if self.value_mode == "paper":
            return xs.unsqueeze(1).expand(b, self.heads, n, self.dim)  # V^(h) = X for every head
        return self.value(xs).reshape(b, n, self.heads, self.head_dim).transpose(1, 2)

    def forward(
        self, x: Tensor, keys: Tensor | None = None, return_attention: bool = False
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """x (B, H, W, D) -> (out (B, H, W, D_out), keys used or None, probabilities or None)."""
        b, height, width, d = x.shape
        n = height * width
        xs = x.reshape(b, n, d)
        bias = self.positional_scores(height, width)
        probs = None
        if not self.content:
            shared = torch.softmax(bias, dim=-1)  # (heads, N, N), one map for every image
            p = self.dropout(shared).to(xs.dtype)  # softmax in the parameters' precision
            if self.value_mode == "paper":
                # (heads·N × N) @ (N × B·D): softmax(A^(h)) X for all heads and images in one GEMM
                ctx = p.reshape(self.heads * n, n) @ xs.transpose(0, 1).reshape(n, b * d)
                ctx = ctx.reshape(self.heads, n, b, d).permute(2, 1, 0, 3)  # (B, N, heads, D)
            else:
                ctx = (p @ self._values(xs)).transpose(1, 2)  # (B, N, heads, d_v)
            if return_attention:
                probs = shared.unsqueeze(0).expand(b, -1, -1, -1)
        else:
            q = self.query(xs).reshape(b, n, self.heads, self.head_dim).transpose(1, 2)
            if keys is None:
                keys = self.compute_keys(x)
            v = self._values(xs)
            keys_, v = keys.to(q.dtype), v.to(q.dtype)  # one dtype under autocast
            if bias is not None:
                bias = bias.to(q.dtype)
            if hasattr(self.encoding, "query_scores"):  # X_q W_qry Ŵ_key r_δ (learned 2D with content)
                bias = bias + self.encoding.query_scores(q, height, width)
            if return_attention:
                scores = (q @ keys_.transpose(-2, -1)) / math.sqrt(self.head_dim)  # q·k/√d_h
                if bias is not None:
                    scores = scores + bias
                probs = torch.softmax(scores, dim=-1)
                ctx = self.dropout(probs) @ v
            else:
                drop = self.attn_dropout if self.training else 0.0
                ctx = F.scaled_dot_product_attention(q, keys_, v, attn_mask=bias, dropout_p=drop)
            ctx = ctx.transpose(1, 2)  # (B, N, heads, d_v)
        out = self.out(ctx.reshape(b, n, -1))  # concat_h(...) W_out + b_out
        return out.reshape(b, height, width, self.out_dim), keys, probs

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, heads={self.heads}, head_dim={self.head_dim}, content={self.content}, "
            f"value={self.value_mode!r}, out_dim={self.out_dim}"
        )
