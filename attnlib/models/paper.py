"""The fully attentional classifier of Cordonnier et al. (official ``BertImage`` for CIFAR-10).

x (B, 3, 32, 32) -> 2x2 invertible down-sampling (space-to-depth) (B, 16, 16, 12) -> Linear(12, D)
-> L post-norm blocks [MHSA (V^(h) = X) + Dense + LN, MLP + LN] -> mean over the 16x16 tokens
-> Linear(D, classes). No [CLS] token, no absolute positional encoding. Init as ``init_bert_weights``:
Normal(0, 0.02) for Linear / Embedding weights, zero biases, LayerNorm (1, 0); quadratic centres and
spreads keep their own init.

Two codes build this model, and ``block`` says whose block to use:

- ``"official"`` (Cordonnier et al., ``BertLayer``): BertSelfOutput's extra Linear(D, D) after the
  attention, biases in the query / key / value projections, positional head keys without bias, GELU MLP,
  LayerNorm eps 1e-12.
- ``"re"`` (the [Re] code, ``main/models/``): no extra Linear, query / key / value projections without
  bias, head keys with bias (``nn.Linear``'s default; a per-head constant that the softmax cancels),
  ReLU MLP, LayerNorm eps 1e-5, no hidden dropout in their code (the registry sets ``dropout=0``).
  Its 16-head learned models project the values (``value="standard"``: Linear(D, 16·D) without bias,
  then Linear(16·D, D)); its 9-head models average the hidden states (``value="paper"``).

``learned_form`` picks the learned encoding's score (``attnlib.attention.encodings.LEARNED_FORMS``:
"official", "attnlib", "re").

The [Re] code's quirks, each a field with the intended form beside it (the registry sets the [Re] form for
the experiments that reproduce a [Re] row; Paper A's keep the official code's):

- ``init``: "official" (default), ``init_bert_weights``: N(0, 0.02²) for Linear / Embedding weights, zero
  biases, LayerNorm (1, 0) | "re", PyTorch's defaults as the [Re] code leaves them: Linear weights and biases
  U(±1/√fan_in) (kaiming-uniform, a = √5), the positional tables (``nn.Embedding``) N(0, 1), LayerNorm (1, 0).
- ``score_layout``: "intended" (default), the score as written (``attnlib.attention.layer``) | "re", the
  queries and keys read as (B, W, H) and the scores permuted back, A_re[q, k] = Ã[σq, σk] with σ the grid
  transposed (learned_form "re" only, the [Re] learned models with content).
- ``quadratic_target``: "intended" (default), the quadratic score −½(δ − Δ)ᵀΣ⁻¹(δ − Δ) | "re", the [Re]
  ``GaussianAttention.get_heads_target_vectors``' second component −2(c + μ₂ + bμ₁) for −2(cμ₂ + bμ₁)
  (main/models/attention.py): the score gains (c + μ₂ − cμ₂)·δ₂ per head (``ReQuadraticEncoding``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch.nn.functional as F
from torch import Tensor, nn

from attnlib.attention import (
    Encoder,
    EncoderBlock,
    Learned2DEncoding,
    MultiHeadSelfAttention2d,
    QuadraticEncoding,
)
from attnlib.attention.encodings import LEARNED_FORMS, relative_shifts
from attnlib.checks import check_choice, check_divisor, check_positive_int, check_probability
from attnlib.errors import ConfigError

ENCODINGS = ("quadratic_iso", "quadratic_aniso", "learned")
BLOCKS = ("official", "re")  # whose encoder block: Cordonnier et al.'s official code or the [Re] code
INITS = ("official", "re")  # init_bert_weights, or PyTorch's defaults as the [Re] code keeps them
SCORE_LAYOUTS = ("intended", "re")  # attnlib.attention.layer.SCORE_LAYOUTS
QUADRATIC_TARGETS = ("intended", "re")  # the quadratic score as written, or the [Re] code's target vector
# PaperConfig.value -> what V^(h) is (the layer's ``values``): the input X, or X W_val^(h)
VALUES = {"paper": "input", "standard": "projected"}


@dataclass
class PaperConfig:
    """The paper's model. Defaults: official run scripts (6 layers, 400 hidden, 512 MLP, 9 heads)."""

    layers: int = 6
    hidden: int = 400
    mlp: int = 512
    heads: int = 9
    encoding: str = "quadratic_iso"  # "quadratic_iso" | "quadratic_aniso" | "learned"
    content: bool = False  # add the content term q·k/√d_h (official use_attention_data)
    hierarchical: bool = False  # HA: one shared block applied `layers` times, keys computed once
    dropout: float = 0.1
    attn_dropout: float = 0.1
    max_pos: int = 16  # learned encoding: largest grid side
    downsample: int = 2  # space-to-depth factor (1: none)
    num_classes: int = 10
    block: str = "official"  # "official" | "re": whose encoder block (module docstring)
    learned_form: str = "attnlib"  # learned encoding's score: "official" | "attnlib" | "re"
    value: str = "paper"  # "paper": V^(h) = X; "standard": per-head projection X W_val^(h) ([Re] 16 heads)
    # learned encoding: r and w ~ N(0, std²) (None: init_bert_weights' 0.02, as every run before the field)
    positional_std: float | None = field(default=None, metadata={"before": None})
    # "official": init_bert_weights; "re": PyTorch's defaults (the [Re] code); module docstring's table
    init: str = field(default="official", metadata={"before": "official"})
    # "intended" | "re": the [Re] (B, W, H) read of queries and keys (learned_form "re" only)
    score_layout: str = field(default="intended", metadata={"before": "intended"})
    # "intended" | "re": the [Re] code's quadratic target vector (quadratic encodings only)
    quadratic_target: str = field(default="intended", metadata={"before": "intended"})

    def __post_init__(self):
        for name in ("layers", "hidden", "mlp", "heads", "max_pos", "downsample"):
            check_positive_int(name, getattr(self, name))
        check_positive_int("num_classes", self.num_classes, 2)
        check_choice("encoding", self.encoding, ENCODINGS)
        for name, allowed in (
            ("block", BLOCKS),
            ("learned_form", LEARNED_FORMS),
            ("value", VALUES),
            ("init", INITS),
            ("score_layout", SCORE_LAYOUTS),
            ("quadratic_target", QUADRATIC_TARGETS),
        ):
            check_choice(name, getattr(self, name), allowed)
        if self.score_layout == "re" and not (self.encoding == "learned" and self.learned_form == "re"):
            raise ConfigError(
                "score_layout", self.score_layout, "'intended' (the [Re] layout is that of learned_form 're')"
            )
        if self.quadratic_target == "re" and self.encoding == "learned":
            raise ConfigError(
                "quadratic_target", "re", "'intended' (the [Re] target is that of a quadratic encoding)"
            )
        if self.encoding == "learned" and self.learned_form == "re":
            if not self.content:
                raise ConfigError("content", self.content, "True (learned_form 're' scores with the queries)")
            if self.hidden % 2:
                raise ConfigError(
                    "hidden", self.hidden, "an even integer (learned_form 're' halves the query)"
                )
        for name in ("content", "hierarchical"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, getattr(self, name), "True or False")
        check_probability("dropout", self.dropout)
        check_probability("attn_dropout", self.attn_dropout)
        if self.positional_std is not None:
            if self.encoding != "learned":
                raise ConfigError(
                    "positional_std", self.positional_std, "None (only the learned encoding has tables)"
                )
            std = self.positional_std
            if isinstance(std, bool) or not isinstance(std, int | float) or not std > 0:
                raise ConfigError("positional_std", std, "None or a positive number")


def make_encoding(cfg: PaperConfig) -> nn.Module:
    """The positional encoding of one attention layer."""
    if cfg.encoding == "learned":
        return Learned2DEncoding(
            cfg.heads, cfg.hidden, max_pos=cfg.max_pos, form=cfg.learned_form, key_bias=cfg.block == "re"
        )
    kind = ReQuadraticEncoding if cfg.quadratic_target == "re" else QuadraticEncoding
    return kind(cfg.heads, isotropic=cfg.encoding == "quadratic_iso")


class ReQuadraticEncoding(QuadraticEncoding):
    """The quadratic encoding as the [Re] code computes it (``quadratic_target="re"``).

    Their target vector u_h = −½(−2(aΔ₁ + bΔ₂), −2(c + Δ₂ + bΔ₁), a, c, 2b), dotted with
    r_δ = (δ₁, δ₂, δ₁², δ₂², δ₁δ₂), has c + Δ₂ where the official code has c·Δ₂; up to a per-head constant
    (which the softmax cancels) the score is

        A_re^(h)(δ) = −½ (δ − Δ^(h))ᵀ Σ^(h)−1 (δ − Δ^(h)) + (c_h + Δ₂^(h) − c_h Δ₂^(h)) δ₂,   Σ−1 = [[a, b], [b, c]]

    so the head's learned centre Δ is no longer where it attends."""

    def _column_term(self, width: int) -> Tensor:
        """(c + Δ₂ − cΔ₂) δ₂ per head: (heads, W, W) indexed [q_j, k_j]."""
        c, mu2 = self.inverse_covariance()[:, 1, 1], self.centers[:, 1]
        extra = c + mu2 - c * mu2
        return extra[:, None, None] * relative_shifts(width, c.device, c.dtype)[None]

    def scores(self, height: int, width: int) -> Tensor:
        heads, n = self.heads, height * width
        term = self._column_term(width)[:, None, :, None, :].expand(heads, height, width, height, width)
        return super().scores(height, width) + term.reshape(heads, n, n)

    def plain_scores(self, height: int, width: int) -> Tensor:
        term = self._column_term(width)  # (heads, W, W) -> (H, W, heads, H, W)
        return super().plain_scores(height, width) + term.permute(1, 0, 2)[None, :, :, None, :]


def init_bert_weights(module: nn.Module, std: float = 0.02) -> None:
    """Official init: Normal(0, std) for Linear / Embedding weights, zero biases, LayerNorm (1, 0)."""
    if isinstance(module, nn.Linear | nn.Embedding):
        nn.init.normal_(module.weight, 0.0, std)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
    if isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


class AttentionClassifier(nn.Module):
    """The paper's classifier: x (B, 3, H, W) -> logits (B, classes) [, list of (B, heads, N, N)]."""

    def __init__(self, cfg: PaperConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Linear(3 * cfg.downsample**2, cfg.hidden)  # official features_upscale

        official = cfg.block == "official"

        def block() -> EncoderBlock:
            attn = MultiHeadSelfAttention2d(
                cfg.hidden,
                cfg.heads,
                encoding=make_encoding(cfg),
                content=cfg.content,
                head_dim=cfg.hidden,  # both codes: per-head size = hidden size
                attn_dropout=cfg.attn_dropout,
                values=VALUES[cfg.value],
                qkv_bias=official,
                score_layout=cfg.score_layout,
            )
            return EncoderBlock(
                attn,
                cfg.hidden,
                cfg.mlp,
                cfg.dropout,
                norm="post",
                eps=1e-12 if official else 1e-5,
                attn_dense=official,
                activation="gelu" if official else "relu",
            )

        self.encoder = Encoder(block, cfg.layers, hierarchical=cfg.hierarchical)
        self.classifier = nn.Linear(cfg.hidden, cfg.num_classes)
        if cfg.init == "official":
            self.apply(init_bert_weights)
        # init "re": every module keeps PyTorch's default, as the [Re] code (module docstring)
        if cfg.positional_std is not None:
            for encoding in self.modules():
                if isinstance(encoding, Learned2DEncoding):
                    encoding.init_positional(cfg.positional_std)

    def forward(self, x: Tensor, return_attention: bool = False):
        check_divisor("downsample", self.cfg.downsample, x.shape[-2:])
        x = F.pixel_unshuffle(x, self.cfg.downsample)  # invertible down-sampling (B, 3r², H/r, W/r)
        x = self.embed(x.permute(0, 2, 3, 1))  # (B, H', W', D)
        x, maps = self.encoder(x, return_attention)
        logits = self.classifier(x.mean(dim=(1, 2)))  # average pooling over positions
        return (logits, maps) if return_attention else logits
