"""The attention layer in plain PyTorch, written the obvious way: the one reference formulation.

As the official code and the [Re] reproduction write it: explicit score tensors for every (query, key)
pair, laid out (B, H, W, heads, H, W) [query i, j; head; key k, l] and built with ``einsum``, a softmax
over the flattened keys, dropout on the probabilities, ``einsum`` with the values, the output projection.
Score of head h (δ = key − query; ``attnlib.attention.encodings.RelativeEncoding``):

    A^(h)_{q,k} = q_h·k_h/√d_h + s^(h)(δ) + u^(h)(q_h, δ),     out = concat_h[softmax(A^(h)) V^(h)] W_out + b_out

with the encoding's terms as published code writes them too (its ``plain_scores``, ``plain_query_scores``:
the official index-then-project learned scores, einsum over explicit shifts), not the fused terms the fast
paths use.

``tests/test_attention_paths.py`` checks every fast path of ``attnlib.attention.ops`` against ``attention``
in float64 (values, probabilities, gradients); ``attnlib.lab.bench`` times ``PlainAttention`` against the library.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn


def attention(
    layer,
    x: Tensor,
    keys: Tensor | None = None,
    return_attention: bool = False,
    dropout: Callable[[Tensor], Tensor] | None = None,
) -> tuple[Tensor, Tensor | None]:
    """The attention layer ``layer`` (a ``MultiHeadSelfAttention2d``, or anything with its attributes) on x.

    x (B, H, W, D); keys (B, heads, N, d_h) to use instead of X W_key, or None; ``dropout``: applied to the
    probabilities (default none) -> out (B, H, W, D_out), probabilities (B, heads, N, N) or None.
    Without content the probabilities are one (H, W, heads, H, W) map, expanded to the batch before the
    dropout (a mask per image, as the [Re] code). With ``layer.score_layout == "re"`` queries and keys are
    read as a (B, W, H, ·) grid and the scores permuted back, as the [Re] code
    (``Learned2dRelativeSelfAttention.compute_attention_scores``) writes it.
    """
    b, height, width, _ = x.shape
    n, heads, dh, enc = height * width, layer.heads, layer.head_dim, layer.encoding
    scores = None  # (H, W, heads, H, W) shared by the batch, or (B, H, W, heads, H, W)
    if enc is not None and enc.has_scores:  # s^(h)(δ)
        scores = enc.plain_scores(height, width)
    if layer.content:
        re_layout = getattr(layer, "score_layout", "intended") == "re"
        gh, gw = (width, height) if re_layout else (height, width)  # [Re]: .view(bs, w, h, heads, d)
        q = layer.query(x).view(b, gh, gw, heads, dh)
        if keys is None:
            k = layer.key(x).view(b, gh, gw, heads, dh)
        else:
            k = keys.transpose(1, 2).reshape(b, gh, gw, heads, dh)
        content = torch.einsum("bijhd,bklhd->bijhkl", q, k) / math.sqrt(dh)  # q·k/√d_h
        scores = content if scores is None else scores + content
        if enc is not None and enc.has_query_scores:  # u^(h)(q_h, δ)
            scores = scores + enc.plain_query_scores(q, gh, gw)
        if re_layout:  # [Re] .permute(0, 2, 1, 3, 5, 4): (B, W, H, heads, W, H) -> (B, H, W, heads, H, W)
            scores = scores.permute(0, 2, 1, 3, 5, 4)
    else:  # one map for the batch, expanded before the dropout: a mask per image
        scores = scores.expand(b, *scores.shape)
    lead = scores.shape[:-2]
    probs = scores.reshape(*lead, n).softmax(dim=-1).view(*lead, height, width)
    dropped = probs if dropout is None else dropout(probs)
    if layer.values == "input":  # V^(h) = X
        ctx = torch.einsum("bijhkl,bkld->bijhd", dropped, x)
    else:  # V^(h) = X W_val^(h)
        v = layer.value(x).view(b, height, width, heads, dh)
        ctx = torch.einsum("bijhkl,bklhd->bijhd", dropped, v)
    out = layer.out(ctx.reshape(b, height, width, -1))
    if not return_attention:
        return out, None
    return out, probs.reshape(b, n, heads, n).transpose(1, 2)


def compute_keys(layer, x: Tensor) -> Tensor | None:
    """X W_key: x (B, H, W, D) -> (B, heads, N, d_h), or None for a layer without content."""
    if not layer.content:
        return None
    b, height, width, _ = x.shape
    return layer.key(x).view(b, height * width, layer.heads, layer.head_dim).transpose(1, 2)


class PlainAttention(nn.Module):
    """``layer`` computed by the reference formulation, with torch's ``nn.Dropout``: a drop-in replacement
    that shares the layer's modules (hence its weights). Same calls as ``MultiHeadSelfAttention2d``."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.heads, self.head_dim = layer.heads, layer.head_dim
        self.content, self.values = layer.content, layer.values
        self.score_layout = getattr(layer, "score_layout", "intended")
        self.encoding, self.out = layer.encoding, layer.out
        self.dropout = nn.Dropout(layer.attn_dropout)
        if layer.values == "projected":
            self.value = layer.value
        if layer.content:
            self.query, self.key = layer.query, layer.key
        self.train(layer.training)

    def compute_keys(self, x: Tensor) -> Tensor | None:
        return compute_keys(self, x)

    def forward(self, x: Tensor, keys: Tensor | None = None, return_attention: bool = False):
        out, probs = attention(self, x, keys, return_attention, self.dropout)
        return (out, probs) if return_attention else out
