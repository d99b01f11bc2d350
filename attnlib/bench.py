"""Throughput and utilisation of the paper's models: attnlib against the plain formulation.

``python -m attnlib.bench [--quick] [--out results/bench/cpu.json] [--all]``

In one process, side by side, for each model (learned 2D + content, quadratic isotropic positional-only)
at the ``paper`` and ``budget`` shapes, in fp32 and bf16 autocast: forward + backward images/s, peak
memory, model FLOPs per image (``torch.utils.flop_counter.FlopCounterMode``), achieved FLOP/s and the
utilisation against this machine's matmul peak, measured in the same run with large square matmuls.

The *plain* formulation (``PlainAttention``) is the same math written the obvious way, as the official
code and the [Re] reproduction write it: explicit score tensors of shape (B, H, W, heads, H, W) built
with ``einsum``, a softmax over the flattened keys, dropout, and ``einsum`` with the values. It shares
the attnlib layer's weights, so both give the same outputs (``tests/test_bench.py`` checks it).

Timing: warm-up step (also counts the FLOPs), one step that measures memory, then the median of
``repeats`` timed steps. CPU: wall clock; memory = peak resident set size (``VmHWM`` from
/proc/self/status, reset through /proc/self/clear_refs after ``malloc_trim``) minus the resident size
before the step. CUDA: CUDA events; memory = ``torch.cuda.max_memory_allocated`` minus the memory
allocated before the step.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlib.attention import Learned2DEncoding, MultiHeadSelfAttention2d, QuadraticEncoding
from attnlib.attention.encodings import relative_shifts
from attnlib.errors import ConfigError


# ------------------------------------------------------------------------------ plain formulation
class PlainAttention(nn.Module):
    """The same layer as ``MultiHeadSelfAttention2d`` (value="paper"), written as published code does.

    Shares the modules (hence the weights) of ``layer``. Shapes: x (B, H, W, D) -> out (B, H, W, D_out);
    scores and probabilities (B, H, W, heads, H, W) [query i, j; head; key k, l], or (H, W, heads, H, W)
    without content (one map for the batch, as the official code).
    """

    def __init__(self, layer: MultiHeadSelfAttention2d):
        super().__init__()
        if layer.value_mode != "paper":
            raise ConfigError("value", layer.value_mode, "'paper' (the plain formulation covers the paper model)")
        self.heads, self.head_dim, self.dim, self.content = layer.heads, layer.head_dim, layer.dim, layer.content
        self.encoding, self.out, self.dropout = layer.encoding, layer.out, layer.dropout
        if self.content:
            self.query, self.key = layer.query, layer.key

    def positional_scores(self, height: int, width: int) -> Tensor | None:
        """(H, W, heads, H, W): the encoding's scores written out for every (query, key) pair."""
        enc = self.encoding
        if isinstance(enc, QuadraticEncoding):
            ii, jj = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
            grid = torch.stack([ii, jj], -1).to(enc.centers)  # (H, W, 2)
            delta = grid[None, None] - grid[:, :, None, None]  # δ = key − query: (H, W, H, W, 2)
            d = delta[:, :, None] - enc.centers[:, None, None, :]  # δ − Δ_h: (H, W, heads, H, W, 2)
            return -0.5 * torch.einsum("ijhkla,hab,ijhklb->ijhkl", d, enc.inverse_covariance(), d)
        if isinstance(enc, Learned2DEncoding):
            idx_row = relative_shifts(height) + enc.max_pos - 1
            idx_col = relative_shifts(width) + enc.max_pos - 1
            row = enc.head_keys_row(enc.row_embeddings(idx_row))  # (H, H, heads): w_rowᵀ r^row_{k−i}
            col = enc.head_keys_col(enc.col_embeddings(idx_col))  # (W, W, heads)
            return row.permute(0, 2, 1)[:, None, :, :, None] + col.permute(0, 2, 1)[None, :, :, None, :]
        if enc is None:
            return None
        raise ConfigError("encoding", type(enc).__name__, "QuadraticEncoding, Learned2DEncoding or None")

    def forward(self, x: Tensor, keys: Tensor | None = None, return_attention: bool = False):
        """x (B, H, W, D) -> (out, keys (B, heads, N, d_h) or None, probabilities (B, heads, N, N) or None)."""
        b, height, width, d = x.shape
        n, heads, dh = height * width, self.heads, self.head_dim
        scores = self.positional_scores(height, width)
        if self.content:
            q = self.query(x).view(b, height, width, heads, dh)
            if keys is None:
                k = self.key(x).view(b, height, width, heads, dh)
                keys = k.reshape(b, n, heads, dh).transpose(1, 2)
            else:
                k = keys.transpose(1, 2).reshape(b, height, width, heads, dh)
            content = torch.einsum("bijhd,bklhd->bijhkl", q, k) / math.sqrt(dh)  # q·k/√d_h
            scores = content if scores is None else scores + content
            if isinstance(self.encoding, Learned2DEncoding):  # q·(r^row_{k−i} + r^col_{l−j})/√d_h
                enc = self.encoding
                r_row = enc.row_embeddings(relative_shifts(height) + enc.max_pos - 1)  # (H, H, D_p)
                r_col = enc.col_embeddings(relative_shifts(width) + enc.max_pos - 1)  # (W, W, D_p)
                row = torch.einsum("bijhd,ikd->bijhk", q, r_row)
                col = torch.einsum("bijhd,jld->bijhl", q, r_col)
                scores = scores + (row[..., :, None] + col[..., None, :]) / math.sqrt(dh)
        lead = scores.shape[:-2]
        probs = torch.softmax(scores.reshape(*lead, n), dim=-1).view(*lead, height, width)
        dropped = self.dropout(probs)
        if self.content:
            ctx = torch.einsum("bijhkl,bkld->bijhd", dropped, x)
        else:
            ctx = torch.einsum("ijhkl,bkld->bijhd", dropped, x)
        out = self.out(ctx.reshape(b, height, width, heads * d))
        if return_attention:
            p = probs if self.content else probs.expand(b, *probs.shape)
            probs = p.reshape(b, n, heads, n).transpose(1, 2)
        else:
            probs = None
        return out, keys, probs


def plain_copy(model: nn.Module) -> nn.Module:
    """A deep copy of ``model`` (same weights) whose attention layers are ``PlainAttention``."""
    import copy

    plain = copy.deepcopy(model)
    for module in list(plain.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, MultiHeadSelfAttention2d):
                setattr(module, name, PlainAttention(child))
    return plain
