"""Hierarchical SAN, the network of the [Re] report's SAN + HA runs (``SAN/models/networks.py``, class
``Encoder`` with ``sa_type`` ``pair_hier`` / ``patch_hier``).

x (B, 3, 32, 32) -> 1x1 conv 3 -> C + BN + ReLU, then, at full resolution and constant width C (no pooling),
one shared layer of ``blocks`` SAN bottlenecks applied ``passes`` times:

    for t = 1..passes:  x = conv_t(x) (1x1, C -> C);  x = layer(x);  x = ReLU(BN_t(x))

-> global average pool -> Linear(C, classes). [Re] configuration: C = 256, 2 bottlenecks, 4 passes, K = 3,
relation channels C/16, SA channels C/4, 8 channels per aggregation weight (``attnlib.san.model``'s
``Bottleneck``, module for module). ``downsample=r`` (budget only; [Re]: 1) feeds the stem the r x r
space-to-depth of the image (3r² channels), so that the same network runs on 32/r x 32/r pixels.

Hierarchical Attention: the keys ψ(x) are computed once per forward, by the first bottleneck's attention
on its first input, and reused by all ``blocks`` × ``passes`` self-attention applications (2 × 4 = 8);
queries φ and values β are recomputed from the current features. So the second bottleneck's key projection
is never called: it exists because the [Re] module builds it (its parameters count, 4,096 at C = 256, and
never receive a gradient; ``find_unused_parameters`` tells DistributedDataParallel so).

``raw_input``: the [Re] ``Bottleneck.forward`` computes relu(bn1(x)) and then applies the attention to x,
discarding the normalised tensor (the official SAN attends to relu(bn1(x))): an apparent bug. False (the
default) is the network as intended; True is the [Re] code's form (bn1 then takes no part, and its
parameters, too, get no gradient).

``pass_statistics``: the [Re] shared layer's batch norms (bn1, bn2 and the two in each γ) normalise four
different distributions, one per pass, but keep one set of running statistics, their average: in evaluation
every pass is normalised with the wrong mean and variance. True (the default) keeps running statistics per
pass, their weights shared (`PassBatchNorm`: buffers, no parameter added); False is the [Re] code's form.
On the budget seed-0 pairwise run trained with shared statistics, 2,000 test images scored 25.8% with the
running statistics and 53.9% normalised with their own batch statistics.

Parameters at the [Re] configuration: 352,750 (pairwise) and 356,282 (patchwise), equal to the modules that
the [Re] ``Encoder`` uses in hierarchical mode. That ``Encoder`` also builds four stages
(``layer0``..``layer3``) that its hierarchical forward never calls: 691,582 / 709,242 parameters in all.
We build only the network it runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from attnlib.checks import check_divisor, check_positive_int
from attnlib.errors import ConfigError
from attnlib.san.model import SA_TYPES, Bottleneck, conv1x1


@dataclass
class HierarchicalSANConfig:
    """The [Re] hierarchical SAN; defaults are its configuration (``san_pairwise_hier.yaml``)."""

    sa_type: str = "pairwise"  # "pairwise" | "patchwise"
    width: int = 256  # C, constant through the network
    blocks: int = 2  # bottlenecks in the shared layer ([Re] layers[0])
    passes: int = 4  # applications of the shared layer ([Re]: conv0..conv3)
    kernel: int = 3  # footprint K (odd) ([Re] kernels[0])
    rel_reduction: int = 16  # relation channels φ, ψ = width // rel_reduction
    mid_reduction: int = 4  # SA channels (β) = width // mid_reduction
    share_planes: int = 8  # channels sharing one aggregation weight
    downsample: int = (
        1  # r: the stem sees the r x r space-to-depth of the image (3r² channels, 32/r pixels a side)
    )
    raw_input: bool = False  # True: the [Re] code's form, attention applied to x instead of relu(bn1(x))
    patchwise_softmax: bool = False  # official / [Re] patchwise SAN does not normalise its weights
    pass_statistics: bool = True  # BN running statistics per pass in the shared layer; False: the [Re] form
    num_classes: int = 10

    def __post_init__(self):
        if self.sa_type not in SA_TYPES:
            raise ConfigError("sa_type", self.sa_type, " | ".join(map(repr, SA_TYPES)))
        for name in (
            "width",
            "blocks",
            "passes",
            "rel_reduction",
            "mid_reduction",
            "share_planes",
            "downsample",
        ):
            check_positive_int(name, getattr(self, name))
        check_positive_int("num_classes", self.num_classes, 2)
        if (
            not isinstance(self.kernel, int)
            or isinstance(self.kernel, bool)
            or self.kernel < 1
            or self.kernel % 2 == 0
        ):
            raise ConfigError("kernel", self.kernel, "an odd positive int")
        step = self.mid_reduction * self.share_planes
        if self.width % step or self.width % self.rel_reduction:
            raise ConfigError(
                "width",
                self.width,
                f"a multiple of mid_reduction*share_planes = {step} and of rel_reduction = {self.rel_reduction}",
            )
        for name in ("raw_input", "patchwise_softmax", "pass_statistics"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, getattr(self, name), "True or False")


class PassBatchNorm(nn.Module):
    """A BatchNorm2d whose weight and bias are shared by every pass, with running statistics per pass.

    The network sets ``index`` (0..passes-1) before each pass; training updates only that pass's statistics
    and evaluation normalises with them. Same parameters (names and shapes) as the BatchNorm2d it replaces."""

    def __init__(self, bn: nn.BatchNorm2d, passes: int):
        super().__init__()
        self.eps, self.momentum, self.index = bn.eps, bn.momentum, 0
        self.weight, self.bias = bn.weight, bn.bias
        self.register_buffer("running_mean", bn.running_mean.repeat(passes, 1))  # (passes, C)
        self.register_buffer("running_var", bn.running_var.repeat(passes, 1))

    def forward(self, x):
        i = self.index  # the rows are views: F.batch_norm updates this pass's statistics in place
        return F.batch_norm(
            x, self.running_mean[i], self.running_var[i], self.weight, self.bias, self.training,
            self.momentum, self.eps,
        )  # fmt: skip


def _per_pass(module: nn.Module, passes: int) -> list[PassBatchNorm]:
    """Replace every BatchNorm2d inside `module` by a PassBatchNorm; return them."""
    norms = []
    for name, child in module.named_children():
        if isinstance(child, nn.BatchNorm2d):
            norms.append(PassBatchNorm(child, passes))
            setattr(module, name, norms[-1])
        else:
            norms += _per_pass(child, passes)
    return norms


class HierarchicalSAN(nn.Module):
    """x (B, 3, 32, 32) -> logits (B, classes) [, list of α (B, Cw, K·K, H, W), one per SA application]."""

    find_unused_parameters = True  # the second bottleneck's ψ (and with raw_input, bn1) are never used

    def __init__(self, cfg: HierarchicalSANConfig):
        super().__init__()
        self.cfg = cfg
        c = cfg.width
        self.stem = nn.Sequential(conv1x1(3 * cfg.downsample**2, c), nn.BatchNorm2d(c), nn.ReLU(inplace=True))
        self.layer = nn.ModuleList(Bottleneck(cfg, c, cfg.kernel, cfg.raw_input) for _ in range(cfg.blocks))
        self._pass_norms = _per_pass(self.layer, cfg.passes) if cfg.pass_statistics else []
        self.transitions = nn.ModuleList(conv1x1(c, c) for _ in range(cfg.passes))  # [Re] conv0..conv3
        self.norms = nn.ModuleList(nn.BatchNorm2d(c) for _ in range(cfg.passes))  # [Re] bn0..bn3
        self.fc = nn.Linear(c, cfg.num_classes)

    def forward(self, x, return_attention: bool = False):
        maps: list[torch.Tensor] = []
        check_divisor("downsample", self.cfg.downsample, x.shape[-2:])
        x = self.stem(F.pixel_unshuffle(x, self.cfg.downsample))  # r = 1: the image itself
        keys = None  # ψ of the first bottleneck's first input, then reused by every application
        for t, (transition, norm) in enumerate(zip(self.transitions, self.norms, strict=True)):
            for bn in self._pass_norms:
                bn.index = t
            x = transition(x)
            for block in self.layer:
                x, alpha, keys = block(x, keys)
                maps.append(alpha)
            x = F.relu(norm(x))
        logits = self.fc(x.mean(dim=(2, 3)))
        return (logits, maps) if return_attention else logits
