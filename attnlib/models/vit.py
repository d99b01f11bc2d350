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
- LayerNorm eps 1e-5 (PyTorch default, as [Re]). Hidden dropout 0 ([Re] has none; attention dropout 0.1).
- HA: one shared block applied ``layers`` times with keys computed once, from the first application's
  normalised input ([Re] ``k is None`` branch).

The [Re] code's quirks, each a field with the intended form (the default) beside it; the registry sets the
[Re] form for ``vit`` and ``vit_ha``:

- ``residual``: "prenorm" x + f(LN(x)) (Dosovitskiy et al.) | "re" f(LN(x)) + LN(x), the residual added to
  the *normalised* input (``SelfAttention.forward``, ``Feedforward.forward``).
- ``final_norm``: True, a LayerNorm before the pooling | False, none ([Re]).
- ``pool``: "tokens", the mean of the H x W patch tokens | "re_noise_cls", the [Re] "cls" slot: a token of
  fresh U(0, 1) noise in patch space (C·p² features), drawn at every forward and prepended to the patches,
  embedded by the same Linear plus its own position-embedding row (row 0), attending and attended like
  any token; the classifier averages all N + 1 tokens. The maps returned are then the N x N patch block
  of each head's probabilities, each row renormalised over the patch keys (the noise slot's share left
  out), so that they keep the contract's (B, heads, N, N) rows summing to one.
- ``init``: "official", ``init_bert_weights`` (N(0, 0.02²) for Linear / Embedding weights, zero biases;
  convolutions at PyTorch's default) | "re", PyTorch's defaults as the [Re] code keeps them: Linear
  U(±1/√fan_in) (kaiming-uniform, a = √5) with U(±1/√fan_in) biases, position embedding N(0, 1), the 3x3
  stem convolution kaiming-uniform (a = √5), the ResNet18 stage's convolutions kaiming-normal (fan_out,
  ReLU: torchvision's ResNet init), BatchNorm / LayerNorm (1, 0).

Parameters at the [Re] configuration: 37,394,506 (HA: 6,531,946) in the [Re] form, the [Re] code's counts;
the intended form has 400 more (a final LayerNorm, 800, and no noise-slot position row, −400).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlib.attention import Encoder, EncoderBlock, MultiHeadSelfAttention2d
from attnlib.checks import check_choice, check_positive_int, check_probability
from attnlib.errors import ConfigError

from .paper import init_bert_weights
from .resnet import _stage

STEMS = ("resnet", "none")
RESIDUALS = {"prenorm": "pre", "re": "re"}  # ViTConfig.residual -> EncoderBlock norm
POOLS = ("tokens", "re_noise_cls")
INITS = ("official", "re")


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
    # the [Re] quirks (module docstring), each at the intended form by default
    residual: str = field(default="prenorm", metadata={"before": "prenorm"})  # "prenorm" | "re"
    final_norm: bool = field(default=True, metadata={"before": True})
    pool: str = field(default="tokens", metadata={"before": "tokens"})  # "tokens" | "re_noise_cls"
    init: str = field(default="official", metadata={"before": "official"})  # "official" | "re"

    def __post_init__(self):
        for name in ("layers", "heads", "hidden", "mlp", "patch", "image_size"):
            check_positive_int(name, getattr(self, name))
        check_positive_int("num_classes", self.num_classes, 2)
        if self.image_size % self.patch:
            raise ConfigError("patch", self.patch, f"a divisor of image_size={self.image_size}")
        check_choice("stem", self.stem, STEMS)
        check_choice("residual", self.residual, RESIDUALS)
        check_choice("pool", self.pool, POOLS)
        check_choice("init", self.init, INITS)
        for name in ("hierarchical", "final_norm"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, getattr(self, name), "True or False")
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
        self.noise_slot = cfg.pool == "re_noise_cls"
        self.patch_embed = nn.Linear(channels * cfg.patch**2, cfg.hidden)
        # learned absolute positions (row 0: the noise slot's, pool "re_noise_cls")
        self.pos_embed = nn.Embedding(self.grid * self.grid + self.noise_slot, cfg.hidden)

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
            norm = RESIDUALS[cfg.residual]
            return EncoderBlock(attn, cfg.hidden, cfg.mlp, cfg.dropout, norm=norm, eps=1e-5)

        self.encoder = Encoder(block, cfg.layers, hierarchical=cfg.hierarchical)
        self.norm = nn.LayerNorm(cfg.hidden) if cfg.final_norm else nn.Identity()
        self.classifier = nn.Linear(cfg.hidden, cfg.num_classes)
        if cfg.init == "official":
            self.apply(init_bert_weights)
        elif cfg.stem == "resnet":  # init "re": PyTorch's defaults, the stage's convs as torchvision's ResNet
            for m in self.stem[3].modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: Tensor, return_attention: bool = False):
        if tuple(x.shape[-2:]) != (self.cfg.image_size,) * 2:
            raise ConfigError("image_size", self.cfg.image_size, f"the input size {tuple(x.shape[-2:])}")
        x = F.pixel_unshuffle(self.stem(x), self.cfg.patch)  # patches (B, C·p², S/p, S/p)
        b = x.shape[0]
        if not self.noise_slot:
            x = self.patch_embed(x.permute(0, 2, 3, 1))  # (B, grid, grid, D)
            x = x + self.pos_embed.weight.view(self.grid, self.grid, -1)
        else:  # [Re]: u ~ U(0, 1)^(C·p²) prepended to the patches, z = [u; patches] W_e + E_pos, (B, 1, N + 1, D)
            patches = x.flatten(2).transpose(1, 2)  # (B, N, C·p²), row-major
            noise = torch.rand(b, 1, patches.shape[-1], dtype=patches.dtype, device=patches.device)
            x = self.patch_embed(torch.cat([noise, patches], 1)) + self.pos_embed.weight
            x = x.unsqueeze(1)  # one row of N + 1 tokens: content-only attention ignores the grid
        x, maps = self.encoder(x, return_attention)
        if self.noise_slot:  # the patch block of each map, rows renormalised over the patch keys
            maps = [m[:, :, 1:, 1:] / m[:, :, 1:, 1:].sum(-1, keepdim=True) for m in maps]
        logits = self.classifier(self.norm(x).mean(dim=(1, 2)))  # mean over all tokens (N or N + 1)
        return (logits, maps) if return_attention else logits
