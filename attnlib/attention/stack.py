"""Encoder blocks (attention + MLP) and the encoder: independent blocks or Hierarchical Attention.

``norm="post"`` is the paper's BERT layer (official ``BertLayer``):

    a = MHSA(x);  x = LN(x + Dropout(Dense(a)));  x = LN(x + Dropout(W₂ GELU(W₁ x)))

where ``Dense`` (``attn_dense=True``) is the extra Linear(D, D) of ``BertSelfOutput``; the [Re] code's
block is the same without ``Dense`` and with ReLU in the MLP (``attn_dense=False, activation="relu"``).
``norm="pre"`` is the ViT block:

    x = x + Dropout(MHSA(LN(x)));  x = x + Dropout(W₂ GELU(W₁ LN(x)))

``norm="re"`` is the [Re] ViT block (``ViT/models/networks.py``), whose residual adds the *normalised* input:

    h = LN(x);  x = h + Dropout(MHSA(h));  h = LN(x);  x = h + Dropout(W₂ GELU(W₁ h))

Hierarchical Attention ([Re] report, Sec. 4.1): one shared block applied ``layers`` times; the keys
are computed once, from the first application's input, and reused; queries, values and positional
scores are recomputed from each application's input. The parameter count does not depend on ``layers``.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from attnlib.checks import check_choice, check_positive_int, check_probability

from .layer import MultiHeadSelfAttention2d
from .ops import Dropout

NORMS = ("post", "pre", "re")
ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU}  # the MLP's non-linearity (official BERT: GELU; [Re]: ReLU)


class EncoderBlock(nn.Module):
    """Attention + MLP with residuals, layer norms and dropout. x (B, H, W, D) -> (B, H, W, D).

    Args:
        attn: the attention layer (its ``out_dim`` must equal ``dim``).
        dim: hidden size D. mlp: MLP hidden size. dropout: hidden dropout.
        norm: "post" (paper / BERT), "pre" (ViT) or "re" (the [Re] ViT: residual on LN(x)).
        eps: layer-norm epsilon (official: 1e-12).
        attn_dense: add BertSelfOutput's Linear(D, D) after the attention (paper model).
        activation: the MLP's non-linearity, "gelu" or "relu".
    """

    def __init__(
        self,
        attn: MultiHeadSelfAttention2d,
        dim: int,
        mlp: int,
        dropout: float = 0.1,
        norm: str = "post",
        eps: float = 1e-12,
        attn_dense: bool = False,
        activation: str = "gelu",
    ):
        super().__init__()
        check_choice("norm", norm, NORMS)
        check_choice("activation", activation, ACTIVATIONS)
        check_probability("dropout", dropout)
        self.norm = norm
        self.attn = attn
        self.attn_dense = nn.Linear(dim, dim) if attn_dense else nn.Identity()
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), ACTIVATIONS[activation](), nn.Linear(mlp, dim))
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.dropout = Dropout(dropout)

    def keys(self, x: Tensor) -> Tensor | None:
        """The keys its attention computes from the block input x (B, H, W, D): (B, heads, N, d_h), or None
        for an attention layer without content."""
        return self.attn.compute_keys(x if self.norm == "post" else self.norm1(x))

    def forward(self, x: Tensor, keys: Tensor | None = None, return_attention: bool = False):
        """x (B, H, W, D) -> x; with ``return_attention`` (x, probabilities (B, heads, N, N)).

        ``keys``: the attention uses these keys instead of its own (Hierarchical Attention)."""
        h = x if self.norm == "post" else self.norm1(x)
        a = self.attn(h, keys, return_attention)
        a, probs = a if return_attention else (a, None)
        if self.norm == "post":
            x = self.norm1(x + self.dropout(self.attn_dense(a)))
            x = self.norm2(x + self.dropout(self.mlp(x)))
        elif self.norm == "re":  # [Re]: out = f(LN(x)) + LN(x)
            x = h + self.dropout(self.attn_dense(a))
            h = self.norm2(x)
            x = h + self.dropout(self.mlp(h))
        else:
            x = x + self.dropout(self.attn_dense(a))
            x = x + self.dropout(self.mlp(self.norm2(x)))
        return (x, probs) if return_attention else x


class Encoder(nn.Module):
    """``layers`` applications of blocks made by ``block_factory``.

    hierarchical=False: ``layers`` independent blocks, each computing its own keys.
    hierarchical=True: one shared block (``self.block``) applied ``layers`` times; keys from the first
    application are passed to every later one (its ``attn.key`` runs once per forward).
    """

    def __init__(self, block_factory: Callable[[], EncoderBlock], layers: int, hierarchical: bool = False):
        super().__init__()
        check_positive_int("layers", layers)
        self.layers, self.hierarchical = layers, hierarchical
        if hierarchical:
            self.block = block_factory()
        else:
            self.blocks = nn.ModuleList(block_factory() for _ in range(layers))

    def applications(self) -> list[EncoderBlock]:
        """The block used at each of the ``layers`` steps, in order."""
        return [self.block] * self.layers if self.hierarchical else list(self.blocks)

    def forward(self, x: Tensor, return_attention: bool = False) -> tuple[Tensor, list[Tensor]]:
        """x (B, H, W, D) -> (x, maps): one (B, heads, N, N) map per application when asked, else []."""
        keys = self.block.keys(x) if self.hierarchical else None  # HA: from the first application's input
        maps = []
        for block in self.applications():
            if return_attention:
                x, probs = block(x, keys, return_attention=True)
                maps.append(probs)
            else:
                x = block(x, keys)
        return x, maps
