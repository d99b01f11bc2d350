"""ViT for CIFAR-10 in the [Re] configuration (``ViT/models/networks.py``, ``ViT/configs/vit.yaml``).

x (B, 3, 32, 32) -> stem -> non-overlapping p x p patches (a 16x16 token grid at p = 2)
-> Linear(C·p², D) + learned absolute position embedding -> L pre-norm blocks
[MHSA(LN(x)) + MLP(LN(x)), GELU] -> LN -> mean over tokens -> Linear(D, classes).

Choices, checked against the [Re] code:

- Attention: content only (no relative encoding); q, k, v = Linear(D, heads·D, bias=False), i.e. the
  per-head size equals the hidden size (that is how 9 heads work with D = 400), score q·k/√D, then
  ``Linear(heads·D, D)``. Same layer as the paper model (``values="projected"``), no second implementation.
- Stem: ``stem="resnet"`` is the [Re] config (``resnet_pooling: True``, ``resnet_blocks: 1``): a 3x3
  conv(3→64) + BN + ReLU and ResNet18's first stage (two BasicBlocks), patches then taken from its
  64 x 32 x 32 output. ``stem="none"`` patches the raw image.
- Pooling: mean over the 16x16 patch tokens. The [Re] code prepends a "cls" slot that is fresh uniform
  noise at every call (not a learned token) and mean-pools over all tokens, so it carries no class
  state; we drop it, which keeps the token grid at H x W and the attention maps at N = 256.
- Norms: standard pre-norm (x + f(LN(x))) with a final LN, as Dosovitskiy et al. The [Re] code adds
  the residual to the *normalised* input (out = f(LN(x)) + LN(x)); we do not copy that quirk.
  LayerNorm eps 1e-5 (PyTorch default, as [Re]). Hidden dropout 0 ([Re] has none; attention dropout 0.1).
- HA: one shared block applied ``layers`` times with keys computed once ([Re] ``k is None`` branch).
- Parameters: 37,394,906 at the [Re] configuration (HA: 6,532,346), 400 more than the [Re] code's
  37,394,506 (6,531,946): our final LayerNorm has 800 parameters theirs lacks, and their position
  embedding has one row (400) more, for the noise "cls" slot we drop.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlib.attention import Encoder, EncoderBlock, MultiHeadSelfAttention2d
from attnlib.checks import check_choice, check_positive_int, check_probability
from attnlib.errors import ConfigError

from .paper import init_bert_weights
from .resnet import _stage

STEMS = ("resnet", "none")


@dataclass
class ViTConfig:
    layers: int = 6
    heads: int = 9
    hidden: int = 400
    mlp: int = 512
    patch: int = 2
    dropout: float = 0.0
    attn_dropout: float = 0.1
    hierarchical: bool = False
    num_classes: int = 10
    image_size: int = 32
    stem: str = "resnet"  # "resnet" ([Re]: conv + ResNet18 stage 1) | "none"

    def __post_init__(self):
        for name in ("layers", "heads", "hidden", "mlp", "patch", "image_size"):
            check_positive_int(name, getattr(self, name))
        check_positive_int("num_classes", self.num_classes, 2)
        if self.image_size % self.patch:
            raise ConfigError("patch", self.patch, f"a divisor of image_size={self.image_size}")
        check_choice("stem", self.stem, STEMS)
        if not isinstance(self.hierarchical, bool):
            raise ConfigError("hierarchical", self.hierarchical, "True or False")
        check_probability("dropout", self.dropout)
        check_probability("attn_dropout", self.attn_dropout)


class ViT(nn.Module):
    """x (B, 3, S, S) -> logits (B, classes) [, list of (B, heads, N, N)], N = (S / patch)²."""

    def __init__(self, cfg: ViTConfig):
        super().__init__()
        self.cfg = cfg
        if cfg.stem == "resnet":
            self.stem = nn.Sequential(
                nn.Conv2d(3, 64, 3, 1, 1, bias=False),
                nn.BatchNorm2d(64),
                nn.ReLU(inplace=True),
                _stage(64, 64, 2, 1),
            )
            channels = 64
        else:
            self.stem, channels = nn.Identity(), 3
        self.grid = cfg.image_size // cfg.patch
        self.patch_embed = nn.Linear(channels * cfg.patch**2, cfg.hidden)
        self.pos_embed = nn.Embedding(self.grid * self.grid, cfg.hidden)  # learned absolute positions

        def block() -> EncoderBlock:
            attn = MultiHeadSelfAttention2d(
                cfg.hidden,
                cfg.heads,
                encoding=None,
                content=True,
                head_dim=cfg.hidden,
                attn_dropout=cfg.attn_dropout,
                values="projected",
                qkv_bias=False,
            )
            return EncoderBlock(attn, cfg.hidden, cfg.mlp, cfg.dropout, norm="pre", eps=1e-5)

        self.encoder = Encoder(block, cfg.layers, hierarchical=cfg.hierarchical)
        self.norm = nn.LayerNorm(cfg.hidden)
        self.classifier = nn.Linear(cfg.hidden, cfg.num_classes)
        self.apply(init_bert_weights)

    def forward(self, x: Tensor, return_attention: bool = False):
        if tuple(x.shape[-2:]) != (self.cfg.image_size,) * 2:
            raise ConfigError("image_size", self.cfg.image_size, f"the input size {tuple(x.shape[-2:])}")
        x = F.pixel_unshuffle(self.stem(x), self.cfg.patch)  # patches (B, C·p², S/p, S/p)
        x = self.patch_embed(x.permute(0, 2, 3, 1))  # (B, grid, grid, D)
        pos = self.pos_embed(torch.arange(self.grid**2, device=x.device))
        x = x + pos.view(self.grid, self.grid, -1)
        x, maps = self.encoder(x, return_attention)
        logits = self.classifier(self.norm(x).mean(dim=(1, 2)))
        return (logits, maps) if return_attention else logits
